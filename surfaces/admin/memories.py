"""Admin pages of memories: search, filter by scope and status, edit, approve, delete, within the admin scope rule."""

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet

from kernel.errors import ApplicationError
from kernel.words import counted
from sources import tasks
from sources.memories import MEMORY_MAX_CHARS, memory_approve, memory_text_clean
from sources.models import Memory, MemoryStatus, memory_status_filter
from surfaces.admin.common import BrokerWarningMixin, UnixNewlinesForm, index_status_badge, status_badge
from surfaces.admin.scoping import ScopedAdminMixin


class MemoryStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return MemoryStatus.choices

    def queryset(self, request, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        value = self.value()
        return queryset.filter(memory_status_filter(value)) if value in MemoryStatus.values else queryset


class MemoryForm(UnixNewlinesForm, forms.ModelForm):
    class Meta:
        model = Memory
        fields = ["text", "expires_at", "citation", "conversation_id", "bot_id", "client_id", "channels"]
        widgets = {"text": forms.Textarea(attrs={"rows": 4, "maxlength": MEMORY_MAX_CHARS})}

    def clean_text(self) -> str:
        try:
            return memory_text_clean(self.cleaned_data["text"])
        except ApplicationError as exc:
            raise forms.ValidationError(exc.message.removeprefix("text: ")) from None


# Badge colours of static/css/admin.css: a served memory looks indexed, one held back looks queued.
_STATUS_BADGE = {
    MemoryStatus.ACTIVE: "indexed",
    MemoryStatus.PENDING: "queued",
    MemoryStatus.SUPERSEDED: "pending",
    MemoryStatus.EXPIRED: "pending",
}


# Who wrote a memory, when, what it replaced and its index state: shown, never edited.
HISTORY = (
    "memory_status",
    "author",
    "api_key",
    "created_at",
    "approved_at",
    "approved_by",
    "supersedes",
    "superseded_by_link",
    "superseded_at",
    "index_state",
    "indexed_at",
)


@admin.register(Memory)
class MemoryAdmin(ScopedAdminMixin, BrokerWarningMixin, admin.ModelAdmin):
    """An admin's edit corrects the text in place (re-indexed at once); bots change a fact by superseding it."""

    form = MemoryForm
    list_display = ["summary", "memory_status", "scope", "author", "conversation_id", "created_at", "expires_at"]
    list_filter = [MemoryStatusFilter, "bot_id", "client_id", "index_status"]
    search_fields = ["text", "author", "conversation_id", "citation", "bot_id", "client_id", "channels"]
    readonly_fields = HISTORY
    actions = ["approve", "reindex"]
    list_select_related = ["api_key"]
    fieldsets = [
        (None, {"fields": ["text", "expires_at", "citation", "conversation_id"]}),
        (
            "Who can see it",
            {
                "fields": ["bot_id", "client_id", "channels"],
                "description": "Empty = shared. Changes apply to search as soon as you save; nothing is re-embedded.",
            },
        ),
        (
            "History",
            {"fields": HISTORY},
        ),
    ]

    def has_add_permission(self, request) -> bool:
        return False  # bots write memories (the API, MCP); the console reviews them

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("superseded_by")

    @admin.display(description="Memory", ordering="text")
    def summary(self, memory: Memory) -> str:
        return str(memory)

    @admin.display(description="Status")
    def memory_status(self, memory: Memory) -> str:
        status = memory.status
        return status_badge(status=_STATUS_BADGE[status], label=status.label)

    @admin.display(description="Scope")
    def scope(self, memory: Memory) -> str:
        return memory.scope_label

    @admin.display(description="Index status")
    def index_state(self, memory: Memory) -> str:
        return index_status_badge(memory)

    @admin.display(description="Superseded by")
    def superseded_by_link(self, memory: Memory) -> str:
        newer = getattr(memory, "superseded_by", None) if memory.superseded_at else None
        return str(newer.pk) if newer is not None else "-"

    @admin.action(description="Approve selected memories (serve them)", permissions=["change"])
    def approve(self, request, queryset) -> None:
        rows = self.rows_changeable(request, queryset)
        approved = memory_approve(memory_ids=[memory.pk for memory in rows], user=request.user)
        self.message_user(
            request,
            f"Approved {counted(approved, 'memory', 'memories')}; "
            f"{'it is' if approved == 1 else 'they are'} served now.",
            messages.SUCCESS,
        )

    @admin.action(description="Re-index selected memories", permissions=["change"])
    def reindex(self, request, queryset) -> None:
        ids = [memory.pk for memory in self.rows_changeable(request, queryset)]
        for memory_id in ids:
            tasks.item_enqueue(kind="memory", pk=memory_id)
        self.message_user(request, f"Queued {counted(len(ids), 'memory', 'memories')} for indexing.", messages.SUCCESS)
