"""Admin for workspace roots, segments, index jobs and tools."""

import os
import re

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import F, Prefetch, Window
from django.db.models.functions import RowNumber
from django.http import Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from kernel.errors import ApplicationError
from kernel.words import counted
from sources import git, git_hooks, git_roots, jobs, tasks
from sources.config import git_config, web_limits, webhook_key
from sources.connectors.web import web_url_problem
from sources.git_credentials import credential_names, git_remote_problems, legacy_advice
from sources.job_report import job_outcome_read, job_progress_read, job_searchable
from sources.models import ACTIVE_JOB_STATUSES, IndexJob, JobStatus, Segment, Tool, WorkspaceRoot
from sources.outcomes import by_kind_words, left_out_words
from sources.pipeline.vectors import vectors_batches_progress
from sources.progress import phase_steps
from sources.roots import glob_problem, root_files_reread, root_pin
from sources.tools import tool_parameters_validate
from surfaces.admin.common import BrokerWarningMixin, UnixNewlinesForm, index_status_badge, status_badge
from surfaces.admin.scoping import ScopedAdminMixin, ScopedInlineMixin, row_scope
from surfaces.selectors import root_files_summary, root_path_visible


def job_badge(job: IndexJob | None) -> str:
    """A job in one line: its place in the queue, its progress (the same numbers as its page), or its outcome."""
    if job is None:
        return "never indexed"
    if job.status == JobStatus.QUEUED:
        # Only queued rows cost a query (one each): at most one per root is ever queued.
        label = jobs.job_state(job, jobs.jobs_ahead([job])[job.pk]).capitalize()
        return status_badge(status=job.status, label=label)
    if job.status == JobStatus.RUNNING:
        detail = f": {job_progress_read(job).summary} · {job_searchable(job).text}"
        return status_badge(status=job.status, label="Running", detail=detail)
    outcome = job_outcome_read(job)
    assert outcome is not None  # every status but queued and running is an outcome
    return status_badge(status=outcome.level, label=outcome.title, detail=f": {outcome.text[:240]}")


class RootForm(UnixNewlinesForm, forms.ModelForm):
    confirm_directory = forms.BooleanField(
        required=False,
        label="Pin the directory this path leads to now",
        help_text="Needed when the path passes through a symlink, or when the directory at this path was moved or "
        "replaced since the root was pinned. Until then its jobs fail without reading it (and remove its "
        "chunks from search), and read, grep and the viewer refuse it. Tick only if the directory the path "
        "leads to now is the one to index.",
    )
    rotate_webhook_secret = forms.BooleanField(
        required=False,
        label="Set a new webhook secret",
        help_text="Shown once after saving, with the hook's URL: paste both into the git host's webhook settings "
        "(GitHub, Gitea: secret; GitLab: token). The old secret stops working at once.",
    )

    class Meta:
        model = WorkspaceRoot
        fields = "__all__"
        widgets = {
            "include_globs": forms.Textarea(attrs={"rows": 3, "cols": 90}),
            "exclude_dirs": forms.Textarea(attrs={"rows": 2, "cols": 90}),
            "deny_patterns": forms.Textarea(attrs={"rows": 3, "cols": 90}),
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "confirm_directory" in self.fields and (identity := self.instance.directory_identity):
            device, _, inode = identity.partition(":")
            target = f", through a symlink to {self.instance.symlink_target}" if self.instance.symlink_target else ""
            self.fields["confirm_directory"].help_text += f" Pinned now: device {device}, inode {inode}{target}."
        if "path" in self.fields:
            # A git root's path is its checkout under RAG_VAR_DIR/git, set when it is saved.
            self.fields["path"].required = False
            self.fields["path"].help_text += " Empty for a git root: its checkout is set for you."
        if "git_credential" in self.fields:
            names = credential_names(directory=git_config().credentials_dir)
            self.fields["git_credential"].help_text += (
                f" Bound here: {', '.join(names)}." if names else " None is bound on this server."
            )

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("web_url"):
            return self._clean_web(cleaned)
        if cleaned.get("git_url"):
            return self._clean_git(cleaned)
        if not cleaned.get("path") and "path" not in self.errors:
            self.add_error("path", "A directory root needs a path (or give a git URL).")
        if path := cleaned.get("path"):
            try:
                pin = root_pin(path=path, confirm=bool(cleaned.get("confirm_directory")), pinned=self.instance)
            except ApplicationError as exc:
                self.add_error("path", exc.message[0].upper() + exc.message[1:] + ".")
            else:
                cleaned["path"] = pin.path
                self.instance.directory_identity, self.instance.symlink_target = (
                    pin.directory_identity,
                    pin.symlink_target,
                )
        return cleaned

    def _clean_web(self, cleaned: dict) -> dict:
        """A web root: its start URL checked (scheme, no credentials, an address the crawl may reach); its path is
        the URL, and there is no directory to watch."""
        url = cleaned["web_url"].strip()
        if cleaned.get("git_url"):
            self.add_error("web_url", "A root is a web site or a git repository, not both.")
        elif problem := web_url_problem(url, allow_private=web_limits().allow_private):
            self.add_error("web_url", problem[0].upper() + problem[1:] + ".")
        cleaned["web_url"] = cleaned["path"] = url
        cleaned["watch"] = False
        self.instance.directory_identity, self.instance.symlink_target = "", ""
        return cleaned

    def _clean_git(self, cleaned: dict) -> dict:
        """A git root: its URL, branch and credential references checked; its checkout directory set by the system."""
        url = cleaned["git_url"].strip()
        credential = cleaned.get("git_credential", "").strip()
        cleaned["git_url"], cleaned["git_credential"] = url, credential
        for field, problem in git_remote_problems(url=url, credential=credential, config=git_config()).items():
            self.add_error(field, problem[0].upper() + problem[1:] + ".")
        branch = cleaned.get("git_branch", "").strip() or "main"
        if branch.startswith("-") or not re.fullmatch(r"[A-Za-z0-9._/-]+", branch) or ".." in branch:
            self.add_error("git_branch", "Not a branch name (letters, digits, . _ / -).")
        cleaned["git_branch"] = branch
        # Saved by an admin who saw the form: a credential migrated from a file, variable or URL stops failing jobs.
        self.instance.git_credential_legacy = ""
        # Never a directory an admin named: a checkout forces its files in place and removes what git does not track.
        checkouts = git_config().directory
        current = self.instance.path
        if not current or os.path.commonpath([os.path.realpath(current), checkouts]) != checkouts:
            if not self.errors:
                current = git_roots.root_git_path(name=cleaned.get("name") or "root", config=git_config())
        cleaned["path"] = current
        cleaned["watch"] = False  # the watcher follows directories on disk; a git root changes by its fetches
        self.instance.directory_identity, self.instance.symlink_target = "", ""
        return cleaned


class SegmentForm(UnixNewlinesForm, forms.ModelForm):
    class Meta:
        model = Segment
        fields = ["name", "path_glob", "embedding_model_name", "similarity_threshold", "channels"]

    def clean_path_glob(self) -> str:
        glob = self.cleaned_data["path_glob"].strip()
        if problem := glob_problem(glob):
            raise forms.ValidationError(problem)
        return glob


class SegmentInline(ScopedInlineMixin, admin.TabularInline):
    model = Segment
    form = SegmentForm
    extra = 0
    fields = ["name", "path_glob", "embedding_model_name", "similarity_threshold", "channels"]


@admin.register(WorkspaceRoot)
class WorkspaceRootAdmin(ScopedAdminMixin, BrokerWarningMixin, admin.ModelAdmin):
    form = RootForm
    inlines = [SegmentInline]
    # Seven columns, no filter sidebar (the Enabled column sorts): at 1280 px the sidebar and eight columns pushed
    # Re-index off the screen.
    list_display = ["name", "where", "enabled", "scope", "last_job", "last_verified_at", "reindex_button"]
    search_fields = ["name", "path"]
    readonly_fields = ["last_verified_at", "last_job", "jobs_link", "files_table", "git_state", "git_hook"]
    actions = ["reindex", "reindex_force"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "name",
                    "path",
                    "confirm_directory",
                    "enabled",
                    "include_globs",
                    "exclude_dirs",
                    "deny_patterns",
                    "index_hidden",
                    "scan_secrets",
                    "hard_links_inside",
                    "max_file_bytes",
                    "embedding_model_name",
                    "similarity_threshold",
                ]
            },
        ),
        (
            "Web site",
            {
                "fields": ["web_url"],
                "description": "A start URL makes this a web root: the worker crawls the pages under it on the "
                "schedule below (conditional GETs: an unchanged page is not fetched again), within the limits "
                "RAG_WEB_MAX_* set, and a page gone from the site leaves the index.",
            },
        ),
        (
            "Git repository",
            {
                "fields": [
                    "git_url",
                    "git_branch",
                    "git_credential",
                    "git_permalink",
                    "rotate_webhook_secret",
                    "git_hook",
                    "git_state",
                ],
                "description": "A git URL makes this a git root: the worker clones it into the data directory, "
                "indexes its branch commit by commit, and fetches on the schedule below and on each push its "
                "webhook reports. A credential is named, never given: the operator binds each one to the host it "
                "may be sent to (RAG_GIT_CREDENTIALS_DIR); its secret is never stored, never shown.",
            },
        ),
        (
            "Who can see it",
            {
                "fields": ["bot_id", "client_id", "channels"],
                "description": "Empty = shared. Changes apply to search as soon as you save; nothing is re-embedded.",
            },
        ),
        ("Schedule", {"fields": ["watch", "cooldown_seconds", "reverify_minutes", "last_verified_at"]}),
        ("What is indexed", {"fields": ["last_job", "jobs_link", "files_table"]}),
    ]

    @admin.display(description="Scope")
    def scope(self, root: WorkspaceRoot) -> str:
        return root.scope_label

    def get_fieldsets(self, request, obj=None):
        if obj is None or not (obj.is_git or obj.is_web):
            return self.fieldsets
        # The watcher ignores git and web roots (they change by fetches and crawls): no Watch box to tick in vain.
        return [
            (name, {**options, "fields": [f for f in options["fields"] if f != "watch"]})
            for name, options in self.fieldsets
        ]

    def get_urls(self):
        reindex = path(
            "<int:root_id>/reindex/",
            self.admin_site.admin_view(self.reindex_view),
            name="sources_workspaceroot_reindex",
        )
        files = path(
            "<int:root_id>/files/", self.admin_site.admin_view(self.files_view), name="sources_workspaceroot_files"
        )
        return [reindex, files, *super().get_urls()]

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        if obj.git_url and form.cleaned_data.get("rotate_webhook_secret"):
            # Shown once by response_add / response_change, never stored.
            request._new_webhook_secret = git_hooks.webhook_rotate(root=obj, secret_key=webhook_key())
        if change and "scan_secrets" in form.changed_data and obj.scan_secrets:
            root_files_reread(root=obj)  # files indexed while the scan was off are scanned by the next job

    def response_add(self, request, obj, post_url_continue=None):
        # After the segments are saved too: the first job sees them.
        if obj.enabled:
            self._request_job(request, obj, force=False, ignore_cooldown=True)
        if secret := getattr(request, "_new_webhook_secret", ""):
            return self._webhook_secret_page(request, obj, secret)
        return super().response_add(request, obj, post_url_continue)

    def response_change(self, request, obj):
        if secret := getattr(request, "_new_webhook_secret", ""):
            return self._webhook_secret_page(request, obj, secret)
        return super().response_change(request, obj)

    def _webhook_secret_page(self, request, root: WorkspaceRoot, secret: str) -> TemplateResponse:
        # The secret is on this page only, as a new API key is (access/admin.py): not in a message, since the
        # default message storage keeps messages in a cookie that is signed, not encrypted.
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "root": root,
            "secret": secret,
            "hook": request.build_absolute_uri(f"/api/v1/roots/{root.pk}/hook"),
            "title": f"Webhook secret for {root.name}",
        }
        response = TemplateResponse(request, "admin/sources/webhook_secret.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.display(description="Git")
    def git_state(self, root: WorkspaceRoot) -> str:
        if not root.git_url:
            return "—"
        commit = format_html(
            "{} at <code title='{}'>{}</code>",
            root.git_indexed_branch or root.git_branch,
            root.git_commit,
            root.git_commit[:12] or "not indexed yet",
        )
        if root.git_credential_legacy:
            advice = legacy_advice(url=root.git_url, legacy=root.git_credential_legacy)
            commit = format_html('{}<br><span class="errornote">{}</span>', commit, advice[0].upper() + advice[1:])
        if root.git_error:
            return format_html('{}<br><span class="errornote">Last fetch failed: {}</span>', commit, root.git_error)
        return commit

    @admin.display(description="Directory or repository", ordering="path")
    def where(self, root: WorkspaceRoot) -> str:
        """A directory root's path; a git root's remote (its credentials never shown), branch and commit: its path is
        only its checkout under the data directory."""
        if not root.git_url:
            return root.path
        return format_html("{}<br>{}", git.url_redact(root.git_url), self.git_state(root))

    @admin.display(description="Webhook")
    def git_hook(self, root: WorkspaceRoot) -> str:
        if root.pk is None or not root.git_url:
            return "Save the root as a git root first."
        state = "a secret is set" if root.git_webhook_salt else "no secret yet: tick the box above and save"
        return format_html("POST <code>/api/v1/roots/{}/hook</code> ({})", root.pk, state)

    def get_queryset(self, request):
        # The list's Last index job column: every listed root's newest job in one query, not one query per row.
        newest = IndexJob.objects.annotate(
            place=Window(RowNumber(), partition_by=F("root_id"), order_by=[F("created_at").desc(), F("pk").desc()])
        ).filter(place=1)
        return super().get_queryset(request).prefetch_related(Prefetch("jobs", queryset=newest, to_attr="newest_jobs"))

    @admin.display(description="Last index job")
    def last_job(self, root: WorkspaceRoot) -> str:
        newest = getattr(root, "newest_jobs", None)
        job = root.jobs.first() if newest is None else next(iter(newest), None)
        if job is None:
            return job_badge(job)
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:sources_indexjob_change", args=[job.pk]), job_badge(job)
        )

    @admin.display(description="")
    def reindex_button(self, root: WorkspaceRoot) -> str:
        # A button of the list's own form (forms do not nest), posting its CSRF token to this root's URL.
        return format_html(
            '<button type="submit" class="button" formmethod="post" formaction="{}" '
            'aria-label="Re-index {}">Re-index</button>',
            reverse("admin:sources_workspaceroot_reindex", args=[root.pk]),
            root.name,
        )

    @admin.display(description="Index jobs")
    def jobs_link(self, root: WorkspaceRoot) -> str:
        if root.pk is None:
            return "—"
        url = reverse("admin:sources_indexjob_changelist") + f"?root__id__exact={root.pk}"
        return format_html('<a href="{}">{}</a>', url, counted(root.jobs.count(), "job"))

    @admin.display(description="Files")
    def files_table(self, root: WorkspaceRoot) -> str:
        if root.pk is None:
            return "Saved roots are indexed at once; their files show here."
        summary = root_files_summary(root=root, scope=row_scope(root))
        if summary["more"]:
            summary["browse_url"] = reverse("admin:sources_workspaceroot_files", args=[root.pk])
        return render_to_string("admin/sources/root_files.html", summary)

    def files_view(self, request, root_id: int):
        """Every file a root indexed, FILES_SHOWN a page by path, filtered by what the path holds."""
        root = self.get_object(request, str(root_id))
        if root is None or not self.has_view_permission(request, root):
            raise Http404(f"workspace root {root_id} does not exist")
        page = request.GET.get("page", "1")
        summary = root_files_summary(
            root=root,
            scope=row_scope(root),
            path_contains=request.GET.get("path", "").strip()[:500],
            page=int(page) if page.isdigit() else 1,
        )
        context = {
            **self.admin_site.each_context(request),
            **summary,
            "opts": self.opts,
            "root": root,
            "title": f"Files of {root.name}",
        }
        return TemplateResponse(request, "admin/sources/root_files_page.html", context)

    def reindex_view(self, request, root_id: int):
        if request.method != "POST" or not self.has_change_permission(request):
            return HttpResponseNotAllowed(["POST"])
        root = self.get_queryset(request).filter(pk=root_id).first()
        if root is None:
            raise Http404(f"workspace root {root_id} does not exist")
        if not self.has_change_permission(request, root):
            raise PermissionDenied  # a shared root, to a person without access.write_shared (as its actions)
        self._request_job(request, root, force=request.POST.get("force") == "1", ignore_cooldown=True)
        return HttpResponseRedirect(request.POST.get("next") or reverse("admin:sources_workspaceroot_changelist"))

    def _request_job(self, request, root: WorkspaceRoot, *, force: bool, ignore_cooldown: bool = False) -> None:
        try:
            job, created = tasks.root_reindex_request(
                root_id=root.pk, force=force, trigger="admin", ignore_cooldown=ignore_cooldown
            )
        except ApplicationError as exc:
            self.message_user(request, f"{root.name}: {exc.message}", messages.WARNING)
            return
        # Never "started" while it waits: behind a big job it may wait minutes (sources/queues.py).
        state = jobs.job_state(job, jobs.jobs_ahead([job]).get(job.pk))
        already = "" if created else " (it was already there)"
        link = format_html('<a href="{}">job {}</a>', reverse("admin:sources_indexjob_change", args=[job.pk]), job.pk)
        self.message_user(request, format_html("{}: index {}{} {}.", root.name, link, already, state), messages.SUCCESS)

    @admin.action(description="Re-index selected roots (respects the cooldown)", permissions=["change"])
    def reindex(self, request, queryset) -> None:
        for root in self.rows_changeable(request, queryset):
            self._request_job(request, root, force=False)

    @admin.action(
        description="Re-index selected roots now (force: re-embed even if unchanged, ignores the cooldown)",
        permissions=["change"],
    )
    def reindex_force(self, request, queryset) -> None:
        for root in self.rows_changeable(request, queryset):
            self._request_job(request, root, force=True)


# A job's page: every field read-only (jobs are records).
_JOB_FIELDS = (
    "root_link",
    "live",
    "trigger",
    "force",
    "attempt",
    "worker",
    "created_at",
    "started_at",
    "heartbeat_at",
    "finished_at",
    "problems",
)


@admin.register(IndexJob)
class IndexJobAdmin(ScopedAdminMixin, admin.ModelAdmin):
    """Jobs are records: read-only, with live progress while they run and a Cancel button."""

    source_path = "root__source"  # a job is seen by those who see its root

    list_display = [
        "id",
        "root",
        "state",
        "trigger",
        "attempt",
        "files_changed",
        "files_skipped",
        "chunks_written",
        "chunks_embedded",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "trigger", ("root", admin.RelatedOnlyFieldListFilter)]  # only the roots of jobs listed
    list_select_related = ["root"]
    fields = _JOB_FIELDS
    readonly_fields = _JOB_FIELDS

    class Media:
        js = ["vendor/htmx/htmx.min.js"]

    def get_urls(self):
        return [
            path("<int:job_id>/live/", self.admin_site.admin_view(self.live_view), name="sources_indexjob_live"),
            path("<int:job_id>/cancel/", self.admin_site.admin_view(self.cancel_view), name="sources_indexjob_cancel"),
            *super().get_urls(),
        ]

    def has_add_permission(self, request) -> bool:
        return False  # jobs are started from a root (its page, its list) or the API

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # a record of what happened: viewed, never edited

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Status")
    def state(self, job: IndexJob) -> str:
        return job_badge(job)

    @admin.display(description="Root")
    def root_link(self, job: IndexJob) -> str:
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:sources_workspaceroot_change", args=[job.root_id]), job.root.name
        )

    def get_object(self, request, object_id, from_field=None):
        job = super().get_object(request, object_id, from_field)
        if job is not None:
            job.may_cancel = self.may_cancel(request)  # for the Cancel button of ``live``, which gets the row only
        return job

    def may_cancel(self, request) -> bool:
        """Cancelling edits a job: the change permission (has_change_permission stays False: the page is read only)."""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    @admin.display(description="Progress")
    def live(self, job: IndexJob) -> str:
        return render_to_string(
            "admin/sources/job_live.html", _live_context(job, may_cancel=getattr(job, "may_cancel", False))
        )

    @admin.display(description="Problems")
    def problems(self, job: IndexJob) -> str:
        seen = root_path_visible(
            root=job.root, scope=row_scope(job)
        )  # not the files of a segment the person cannot see
        rows = [row for row in job.errors if seen(row.get("path", ""))]
        if rows:
            return render_to_string("admin/sources/job_problems.html", {"job": job, "rows": rows})
        if job.files_skipped or job.files_failed:
            return "The files skipped or failed are in segments you cannot see."
        # Files left out by design (patterns, .gitignore, excluded directories) are counted in the outcome above.
        return "None so far." if job.status in ACTIVE_JOB_STATUSES else "No file was skipped or failed."

    def live_view(self, request, job_id: int):
        if not self.has_view_permission(request):
            raise PermissionDenied
        job = self.get_queryset(request).filter(pk=job_id).first()
        if job is None:
            raise Http404(f"index job {job_id} does not exist")
        return HttpResponse(
            render_to_string(
                "admin/sources/job_live.html", _live_context(job, may_cancel=self.may_cancel(request)), request=request
            )
        )

    def cancel_view(self, request, job_id: int):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.may_cancel(request):
            raise PermissionDenied
        if not self.get_queryset(request).filter(pk=job_id).exists():
            raise Http404(f"index job {job_id} does not exist")
        if jobs.job_cancel(job_id=job_id, by=request.user.get_username()):
            self.message_user(
                request, f"Job {job_id} cancelled: a running job stops after its current batch.", messages.SUCCESS
            )
        else:
            self.message_user(request, f"Job {job_id} had already ended.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:sources_indexjob_change", args=[job_id]))


def _live_context(job: IndexJob, *, may_cancel: bool) -> dict:
    progress = job_progress_read(job)
    return {
        "job": job,
        "active": job.status in ACTIVE_JOB_STATUSES,
        "may_cancel": may_cancel,
        "progress": progress,
        "searchable": job_searchable(job),
        "percent": progress.percent,
        "outcome": job_outcome_read(job),
        "phases": phase_steps(progress.phase),
        "batches": vectors_batches_progress(job.pk),
        "left_out": left_out_words(job.left_out),
        "skipped": by_kind_words(job.skipped_by_reason),
        "failed": by_kind_words(job.failed_by_reason),
        "state": jobs.job_state(job, jobs.jobs_ahead([job]).get(job.pk)) if job.status == JobStatus.QUEUED else "",
        "cancel_url": reverse("admin:sources_indexjob_cancel", args=[job.pk]),
        "live_url": reverse("admin:sources_indexjob_live", args=[job.pk]),
    }


class ToolForm(UnixNewlinesForm, forms.ModelForm):
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
class ToolAdmin(ScopedAdminMixin, BrokerWarningMixin, admin.ModelAdmin):
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
