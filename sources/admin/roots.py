"""Admin for workspace roots, segments, index jobs and tools."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from rag_site.errors import ApplicationError
from sources import tasks
from sources.admin.common import BrokerWarningMixin, index_status_badge
from sources.models import IndexJob, JobStatus, Segment, Tool, WorkspaceRoot
from sources.roots import root_files_reread, root_path_validate
from sources.tools import tool_parameters_validate

_JOB_COLOURS = {
    JobStatus.SUCCEEDED: "#1a7f37", JobStatus.FAILED: "#b42318", JobStatus.RUNNING: "#2457c5",
    JobStatus.QUEUED: "#8a6d00", JobStatus.CANCELLED: "#5b6570",
}


def job_badge(job: IndexJob | None) -> str:
    if job is None:
        return "never indexed"
    label = job.get_status_display()
    if job.status == JobStatus.RUNNING and job.files_total:
        label += f" {job.progress:.0%} ({job.files_seen}/{job.files_total} files)"
    detail = f": {job.message[:160]}" if job.message and job.status != JobStatus.RUNNING else ""
    return format_html('<b style="color:{}">{}</b>{}', _JOB_COLOURS.get(job.status, "#5b6570"), label, detail)


class RootForm(forms.ModelForm):
    class Meta:
        model = WorkspaceRoot
        fields = "__all__"
        widgets = {
            "include_globs": forms.Textarea(attrs={"rows": 3, "cols": 90}),
            "exclude_dirs": forms.Textarea(attrs={"rows": 2, "cols": 90}),
            "deny_patterns": forms.Textarea(attrs={"rows": 3, "cols": 90}),
        }

    def clean_path(self) -> str:
        try:
            return root_path_validate(self.cleaned_data["path"])
        except ApplicationError as exc:
            raise forms.ValidationError(exc.message[0].upper() + exc.message[1:] + ".") from None


class SegmentInline(admin.TabularInline):
    model = Segment
    extra = 0
    fields = ["name", "path_glob", "embedding_model_name", "similarity_threshold", "channels"]


@admin.register(WorkspaceRoot)
class WorkspaceRootAdmin(BrokerWarningMixin, admin.ModelAdmin):
    form = RootForm
    inlines = [SegmentInline]
    list_display = ["name", "path", "enabled", "scope", "last_job", "last_verified_at"]
    list_filter = ["enabled"]
    search_fields = ["name", "path"]
    readonly_fields = ["last_verified_at", "last_job"]
    actions = ["reindex", "reindex_force"]

    @admin.display(description="Scope")
    def scope(self, root: WorkspaceRoot) -> str:
        return root.scope_label

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if change and "scan_secrets" in form.changed_data and obj.scan_secrets:
            root_files_reread(root=obj)  # files indexed while the scan was off are scanned by the next job

    @admin.display(description="Last index job")
    def last_job(self, root: WorkspaceRoot) -> str:
        return job_badge(root.jobs.first())

    def _reindex(self, request, queryset, *, force: bool) -> None:
        for root in queryset:
            try:
                job, created = tasks.root_reindex_request(root_id=root.pk, force=force, trigger="admin")
            except ApplicationError as exc:
                self.message_user(request, f"{root.name}: {exc.message}", messages.WARNING)
                continue
            verb = "queued" if created else "already queued or running as"
            self.message_user(request, f"{root.name}: {verb} job {job.pk}.", messages.SUCCESS)

    @admin.action(description="Re-index selected roots (respects the cooldown)")
    def reindex(self, request, queryset) -> None:
        self._reindex(request, queryset, force=False)

    @admin.action(description="Re-index selected roots now (force: re-embed even if unchanged, ignores the cooldown)")
    def reindex_force(self, request, queryset) -> None:
        self._reindex(request, queryset, force=True)


@admin.register(IndexJob)
class IndexJobAdmin(admin.ModelAdmin):
    list_display = ["id", "root", "state", "trigger", "attempt", "files_changed", "files_skipped", "chunks_embedded", "created_at", "finished_at"]
    list_filter = ["status", "trigger"]
    list_select_related = ["root"]

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in IndexJob._meta.fields] + ["state"]

    @admin.display(description="Status")
    def state(self, job: IndexJob) -> str:
        return job_badge(job)

    def has_add_permission(self, request) -> bool:
        return False  # jobs are started from a root's actions or the API


class ToolForm(forms.ModelForm):
    class Meta:
        model = Tool
        fields = ["name", "server", "description", "parameters", "enabled", "bot_id", "client_id", "channels"]

    def clean_parameters(self):
        parameters = self.cleaned_data["parameters"]
        try:
            tool_parameters_validate(parameters)
        except ApplicationError as exc:
            raise forms.ValidationError(exc.message[0].upper() + exc.message[1:] + ".") from None
        return parameters


@admin.register(Tool)
class ToolAdmin(BrokerWarningMixin, admin.ModelAdmin):
    form = ToolForm
    list_display = ["key", "description", "enabled", "scope", "status", "indexed_at"]
    list_filter = ["enabled", "index_status", "server"]
    search_fields = ["key", "name", "description"]
    readonly_fields = ["key", "status", "last_error", "indexed_at"]

    @admin.display(description="Index status", ordering="index_status")
    def status(self, tool: Tool) -> str:
        return index_status_badge(tool)

    @admin.display(description="Scope")
    def scope(self, tool: Tool) -> str:
        return tool.scope_label
