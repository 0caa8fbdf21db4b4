from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Count
from django.utils.html import format_html

from sources import services
from sources.chunking import front_matter_split
from sources.heartbeats import broker_ping
from sources.models import Chunk, EmbeddingModel, IndexStatus, Skill, Source
from sources.queueing import BROKER_WAIT

_STATUS_COLOURS = {
    IndexStatus.INDEXED: "#1a7f37",
    IndexStatus.FAILED: "#b42318",
    IndexStatus.RUNNING: "#2457c5",
    IndexStatus.QUEUED: "#8a6d00",
    IndexStatus.PENDING: "#5b6570",
}


class BrokerWarningMixin:
    """A warning on the list and after a save while the broker is unreachable: indexing waits for it."""

    def _broker_warn(self, request) -> None:
        if error := broker_ping():
            messages.warning(request, f"The broker (Redis) cannot be reached ({error}). Indexing is queued and "
                                      "starts by itself once the broker is back.")

    def changelist_view(self, request, extra_context=None):
        if request.method == "GET":
            self._broker_warn(request)
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        self._broker_warn(request)


def index_status_badge(item) -> str:
    """The status of a skill or tool; why it failed, or that it waits for the broker."""
    colour = _STATUS_COLOURS.get(item.index_status, "#5b6570")
    label = item.get_index_status_display()
    waiting = item.index_status == IndexStatus.QUEUED and item.last_error.startswith(BROKER_WAIT)
    if (item.index_status == IndexStatus.FAILED or waiting) and item.last_error:
        return format_html('<b style="color:{}">{}</b>: {}', colour, label, item.last_error[:200])
    return format_html('<b style="color:{}">{}</b>', colour, label)


class SkillForm(forms.ModelForm):
    class Meta:
        model = Skill
        fields = ["slug", "title", "enabled", "body", "bot_id", "client_id", "channels"]
        widgets = {"body": forms.Textarea(attrs={"rows": 28, "cols": 100, "style": "font-family: monospace"})}

    def clean_body(self) -> str:
        body = self.cleaned_data["body"]
        if len(body.encode()) > settings.RAG_MAX_SKILL_BYTES:
            raise forms.ValidationError(f"The body is larger than RAG_MAX_SKILL_BYTES ({settings.RAG_MAX_SKILL_BYTES:,} bytes).")
        front = front_matter_split(body.split("\n"))
        if front.error:
            raise forms.ValidationError(front.error[0].upper() + front.error[1:] + ".")
        return body


@admin.register(Skill)
class SkillAdmin(BrokerWarningMixin, admin.ModelAdmin):
    form = SkillForm
    list_display = ["slug", "display_title", "enabled", "scope", "status", "chunk_count", "indexed_at"]
    list_filter = ["index_status", "enabled"]
    search_fields = ["slug", "title", "body"]
    prepopulated_fields = {"slug": ["title"]}
    readonly_fields = ["status", "last_error", "indexed_at", "metadata", "content_hash"]
    actions = ["reindex", "reindex_force"]
    fieldsets = [
        (None, {"fields": ["slug", "title", "enabled", "body"]}),
        ("Who can see it", {"fields": ["bot_id", "client_id", "channels"],
                            "description": "Empty = shared. Changes apply to search as soon as you save; nothing is re-embedded."}),
        ("Indexing", {"fields": ["status", "last_error", "indexed_at", "metadata", "content_hash"]}),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("source").annotate(chunk_total=Count("source__chunks"))

    @admin.display(description="Title")
    def display_title(self, skill: Skill) -> str:
        return skill.title or (skill.source.title if skill.source else "") or "—"

    @admin.display(description="Scope")
    def scope(self, skill: Skill) -> str:
        return skill.scope_label

    @admin.display(description="Chunks", ordering="chunk_total")
    def chunk_count(self, skill: Skill) -> int:
        return skill.chunk_total

    @admin.display(description="Index status", ordering="index_status")
    def status(self, skill: Skill) -> str:
        return index_status_badge(skill)

    def _reindex(self, request, queryset, *, force: bool) -> None:
        skill_ids = list(queryset.values_list("pk", flat=True))
        for skill_id in skill_ids:
            services.skill_enqueue_index(skill_id=skill_id, force=force)
        what = "re-embedding" if force else "indexing"
        self.message_user(request, f"Queued {len(skill_ids)} skill(s) for {what}.", messages.SUCCESS)

    @admin.action(description="Re-index selected skills")
    def reindex(self, request, queryset) -> None:
        self._reindex(request, queryset, force=False)

    @admin.action(description="Re-index selected skills now (force: re-embed even if unchanged)")
    def reindex_force(self, request, queryset) -> None:
        self._reindex(request, queryset, force=True)


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin):
    list_display = ["__str__", "context_prefix", "start_line", "end_line", "embedding_model", "chunking_version"]
    list_filter = ["source__kind", "embedding_model", "chunking_version"]
    search_fields = ["content", "context_prefix", "source__key"]
    list_select_related = ["source", "embedding_model"]
    exclude = ["embedding"]

    def has_add_permission(self, request) -> bool:
        return False  # chunks are written by indexing only

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
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


from sources import admin_roots  # noqa: E402,F401 - registers roots, jobs and tools
