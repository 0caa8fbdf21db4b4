"""Admin pages of the managed document library: several files uploaded at once, with one scope."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Count
from django.utils.html import format_html

from kernel.errors import ApplicationError
from kernel.words import counted
from sources import tasks, uploads
from sources.config import document_max_bytes
from sources.models import UploadedDocument
from surfaces.admin.common import BrokerWarningMixin, index_status_badge
from surfaces.admin.scoping import ScopedAdminMixin


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file field that takes several files at once (Django's documented pattern); cleans to a list."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ",".join(uploads.SUPPORTED_SUFFIXES)}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None) -> list:
        one = super().clean
        if isinstance(data, list | tuple):
            return [one(part, initial) for part in data if part]
        return [one(data, initial)] if data else []


class DocumentForm(forms.ModelForm):
    # Not "files": a form's ``files`` is the request's uploaded files.
    upload = MultipleFileField(
        required=False,
        label="Files",
        help_text=(
            "Choose one or more files (PDF, Word, PowerPoint, Excel, CSV/TSV, HTML, Markdown, text). Each becomes "
            "one document with the scope below. On an existing document: one file replaces it."
        ),
    )

    class Meta:
        model = UploadedDocument
        fields = ["enabled", "bot_id", "client_id", "channels"]

    def clean_upload(self) -> list:
        files = self.cleaned_data["upload"]
        if self.instance.pk is None and not files:
            raise forms.ValidationError("Choose at least one file.")
        if self.instance.pk is not None and len(files) > 1:
            raise forms.ValidationError("One file replaces a document; upload the others as new documents.")
        errors = []
        for part in files:  # every file checked before any is stored: a refusal keeps nothing
            try:
                uploads.upload_check(part.name, part.size, max_bytes=document_max_bytes())
            except ApplicationError as exc:
                errors.append(exc.message + ".")  # it starts with the file name: kept as typed
        if errors:
            raise forms.ValidationError(errors)
        return files


@admin.register(UploadedDocument)
class UploadedDocumentAdmin(ScopedAdminMixin, BrokerWarningMixin, admin.ModelAdmin):
    form = DocumentForm
    list_display = ["name", "enabled", "scope", "status", "chunk_count", "size_label", "indexed_at", "created_at"]
    list_filter = ["index_status", "enabled"]
    search_fields = ["name", "file_sha256"]
    readonly_fields = ["name", "size_label", "file_sha256", "status", "last_error", "indexed_at", "created_at"]
    actions = ["reindex"]

    def get_fieldsets(self, request, obj=None):
        stored = [(None, {"fields": ["name", "size_label", "file_sha256", "enabled", "upload"]})] if obj else []
        return [
            *(stored or [(None, {"fields": ["upload", "enabled"]})]),
            (
                "Who can see it",
                {
                    "fields": ["bot_id", "client_id", "channels"],
                    "description": "Empty = shared. Changes apply to search as soon as you save; nothing is "
                    "re-embedded.",
                },
            ),
            *([("Indexing", {"fields": ["status", "last_error", "indexed_at", "created_at"]})] if obj else []),
        ]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("source").annotate(chunk_total=Count("source__chunks"))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # The outermost transaction of the page: if anything after save_model fails (the log entry, the related
        # objects), the rolled-back rows take the files they stored with them.
        with uploads.upload_batch():
            return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj: UploadedDocument, form, change) -> None:
        files = form.cleaned_data.get("upload") or []
        if change and not files:
            super().save_model(request, obj, form, change)  # scope or enabled only
            return
        scope = {"bot_id": obj.bot_id, "client_id": obj.client_id, "channels": obj.channels}
        first = None
        for part in files:
            result = uploads.document_upload(
                uploads.Upload(part.name, part.read()),
                replace=obj.pk if change else None,
                max_bytes=document_max_bytes(),
                **scope,
            )
            if not result.created and not result.replaced:
                self.message_user(
                    request,
                    f"{part.name} is already in the library as “{result.document.name}” (#{result.document.pk}, "
                    "the same bytes): not stored again.",
                    messages.WARNING,
                )
            first = first or result.document
        if first is not None and not change:
            # The admin logs and redirects to the object it saved: the first document stands for them all.
            obj.pk, obj.name = first.pk, first.name
        if not change and len(files) > 1:
            self.message_user(request, f"{len(files)} files uploaded; each is indexed by the worker.", messages.INFO)
        self._broker_warn(request)

    @admin.display(description="Scope")
    def scope(self, document: UploadedDocument) -> str:
        return document.scope_label

    @admin.display(description="Index status", ordering="index_status")
    def status(self, document: UploadedDocument) -> str:
        return index_status_badge(document)

    @admin.display(description="Chunks", ordering="chunk_total")
    def chunk_count(self, document: UploadedDocument) -> int:
        return document.chunk_total  # type: ignore[attr-defined]  # annotated by get_queryset

    @admin.display(description="Size", ordering="size")
    def size_label(self, document: UploadedDocument) -> str:
        return format_html("{} bytes", f"{document.size:,}")

    @admin.action(description="Re-index selected documents", permissions=["change"])
    def reindex(self, request, queryset) -> None:
        ids = [document.pk for document in self.rows_changeable(request, queryset)]
        for document_id in ids:
            tasks.item_enqueue(kind="document", pk=document_id)
        self.message_user(request, f"Queued {counted(len(ids), 'document')} for indexing.", messages.SUCCESS)
