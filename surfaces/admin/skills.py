"""Admin pages of skills, chunks, sources and embedding models."""

import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpResponse, HttpResponseNotAllowed
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.html import format_html

from kernel.words import counted
from sources import tasks
from sources.chunking import front_matter_split
from sources.config import indexing_config
from sources.models import Chunk, EmbeddingModel, Skill, Source
from sources.services import skill_preview
from surfaces.admin.common import BrokerWarningMixin, UnixNewlinesForm, index_status_badge
from surfaces.admin.scoping import ScopedAdminMixin


class SkillForm(UnixNewlinesForm, forms.ModelForm):
    class Meta:
        model = Skill
        fields = ["slug", "title", "enabled", "body", "bot_id", "client_id", "channels"]
        widgets = {"body": forms.Textarea(attrs={"rows": 28, "cols": 100, "class": "monospace"})}

    def clean_body(self) -> str:
        body = self.cleaned_data["body"]
        if len(body.encode()) > settings.RAG_MAX_SKILL_BYTES:
            raise forms.ValidationError(
                f"The body is larger than RAG_MAX_SKILL_BYTES ({settings.RAG_MAX_SKILL_BYTES:,} bytes)."
            )
        front = front_matter_split(body.split("\n"))
        if front.error:
            raise forms.ValidationError(front.error[0].upper() + front.error[1:] + ".")
        return body


@admin.register(Skill)
class SkillAdmin(ScopedAdminMixin, BrokerWarningMixin, admin.ModelAdmin):
    form = SkillForm
    list_display = ["slug", "display_title", "enabled", "scope", "status", "chunk_count", "indexed_at"]
    list_filter = ["index_status", "enabled"]
    search_fields = ["slug", "title", "body"]
    prepopulated_fields = {"slug": ["title"]}
    readonly_fields = ["status", "last_error", "indexed_at", "metadata", "content_hash", "preview", "chunks_table"]
    actions = ["reindex", "reindex_force"]
    fieldsets = [
        (None, {"fields": ["slug", "title", "enabled", "body", "preview"]}),
        (
            "Who can see it",
            {
                "fields": ["bot_id", "client_id", "channels"],
                "description": "Empty = shared. Changes apply to search as soon as you save; nothing is re-embedded.",
            },
        ),
        ("Indexing", {"fields": ["status", "last_error", "indexed_at", "metadata", "content_hash", "chunks_table"]}),
    ]

    class Media:
        js = ["vendor/htmx/htmx.min.js"]

    def get_urls(self):
        preview = path("preview/", self.admin_site.admin_view(self.preview_view), name="sources_skill_preview")
        return [preview, *super().get_urls()]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("source").annotate(chunk_total=Count("source__chunks"))

    @admin.display(description="Stored chunks")
    def chunks_table(self, skill: Skill) -> str:
        if skill.source is None:
            return "None yet: the skill is indexed a few seconds after it is saved."
        chunks = Chunk.objects.filter(source=skill.source, generation=skill.source.active_generation)
        return render_to_string(
            "admin/sources/skill_chunks.html",
            {
                "chunks": chunks.select_related("embedding_model")
                .order_by("chunk_index")
                .defer("embedding", "search_vector"),
            },
        )

    @admin.display(description="Chunking preview")
    def preview(self, skill: Skill) -> str:
        return format_html(
            '<button type="button" class="button" hx-post="{}" hx-include="#id_body, [name=csrfmiddlewaretoken]" '
            'hx-target="#chunk-preview" hx-swap="innerHTML">Preview chunking</button> <span class="help">'
            "How the body above will be split and cited, before you save it.</span>"
            '<div id="chunk-preview" aria-live="polite"></div>',
            reverse("admin:sources_skill_preview"),
        )

    def preview_view(self, request):
        """The chunks the body in the form would become, with the current chunker settings; nothing is saved."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        body = request.POST.get("body", "").replace("\r\n", "\n").replace("\r", "\n")
        preview = skill_preview(body, config=indexing_config())
        preview["front_matter"] = [(name, _shown(value)) for name, value in (preview.get("metadata") or {}).items()]
        return HttpResponse(render_to_string("admin/sources/skill_preview.html", preview, request=request))

    @admin.display(description="Title")
    def display_title(self, skill: Skill) -> str:
        return skill.title or (skill.source.title if skill.source else "") or "—"

    @admin.display(description="Scope")
    def scope(self, skill: Skill) -> str:
        return skill.scope_label

    @admin.display(description="Chunks", ordering="chunk_total")
    def chunk_count(self, skill: Skill) -> int:
        return skill.chunk_total  # type: ignore[attr-defined]  # annotated by get_queryset

    @admin.display(description="Index status", ordering="index_status")
    def status(self, skill: Skill) -> str:
        return index_status_badge(skill)

    def _reindex(self, request, queryset, *, force: bool) -> None:
        skill_ids = [skill.pk for skill in self.rows_changeable(request, queryset)]
        for skill_id in skill_ids:
            tasks.item_enqueue(kind="skill", pk=skill_id, force=force)
        what = "re-embedding" if force else "indexing"
        self.message_user(request, f"Queued {counted(len(skill_ids), 'skill')} for {what}.", messages.SUCCESS)

    @admin.action(description="Re-index selected skills", permissions=["change"])
    def reindex(self, request, queryset) -> None:
        self._reindex(request, queryset, force=False)

    @admin.action(
        description="Re-index selected skills now (force: re-embed even if unchanged)", permissions=["change"]
    )
    def reindex_force(self, request, queryset) -> None:
        self._reindex(request, queryset, force=True)


@admin.register(Chunk)
class ChunkAdmin(ScopedAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "where", "context_prefix", "symbol", "embedding_model", "chunking_version"]
    list_filter = ["source__kind", "embedding_model", "chunking_version"]
    search_fields = ["content", "context_prefix", "source__key"]
    list_select_related = ["source", "embedding_model"]
    exclude = ["embedding"]

    @admin.display(description="Cites", ordering="path")
    def where(self, chunk: Chunk) -> str:
        return chunk.citation  # path:start-end for files, skill:<slug>:start-end for skills

    def has_add_permission(self, request) -> bool:
        return False  # chunks are written by indexing only

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Source)
class SourceAdmin(ScopedAdminMixin, admin.ModelAdmin):
    source_path = "pk"
    list_display = ["key", "kind", "title", "enabled", "bot_id", "client_id", "channels"]
    list_filter = ["kind", "enabled"]
    search_fields = ["key", "title"]
    # Copied from the skill, tool, root or segment on every save: edit them there.
    readonly_fields = ["kind", "key", "enabled", "bot_id", "client_id", "channels"]


@admin.register(EmbeddingModel)
class EmbeddingModelAdmin(admin.ModelAdmin):
    list_display = ["__str__", "provider", "name", "dimensions", "normalized", "created_at"]
    readonly_fields = ["provider", "name", "dimensions", "normalized", "created_at"]

    def has_add_permission(self, request) -> bool:
        return False  # rows are created from RAG_EMBEDDING_MODEL when first used


def _shown(value: object) -> str:
    """A front-matter value as a person wrote it: a list as its items, a mapping as JSON, anything else as text."""
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)
