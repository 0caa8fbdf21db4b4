"""python manage.py rag_index ROOT|--all [--force] [--wait]: queue index jobs as the admin's Re-index button does."""

import time

from django.core.management.base import BaseCommand, CommandError

from kernel.errors import ApplicationError
from kernel.words import counted
from sources import tasks
from sources.job_report import job_outcome_read, job_progress_read
from sources.jobs import job_state, jobs_ahead
from sources.models import ACTIVE_JOB_STATUSES, IndexJob, JobStatus, WorkspaceRoot
from sources.outcomes import WARNING
from sources.progress import duration

BAR_WIDTH = 24


def roots_named(names: list[str]) -> list[WorkspaceRoot]:
    """The roots given by name or id, in the order given; CommandError naming every one that does not exist."""
    found, unknown = [], []
    for name in names:
        root = WorkspaceRoot.objects.filter(name=name).first()
        if root is None and name.isdigit():  # a name beats an id: a root may be named "2"
            root = WorkspaceRoot.objects.filter(pk=int(name)).first()
        if root is None:
            unknown.append(name)
        else:
            found.append(root)
    if unknown:
        known = ", ".join(WorkspaceRoot.objects.order_by("name").values_list("name", flat=True)) or "none yet"
        raise CommandError(f"no workspace root named or numbered {', '.join(map(repr, unknown))} (roots: {known})")
    return found


def progress_line(job: IndexJob, ahead: int | None) -> str:
    """One job's progress in words and numbers, from its counters."""
    where = f"{job.root.name}: job {job.pk}"
    if job.status != JobStatus.RUNNING:
        return f"{where} {job_state(job, ahead)}"
    progress = job_progress_read(job)  # the numbers of the job's admin page and the API
    filled = BAR_WIDTH * progress.percent // 100
    pace = f"  {progress.rate:,.1f} {progress.rate_unit}" if progress.rate is not None else ""
    if progress.eta_seconds is not None:
        pace += f"  about {duration(progress.eta_seconds)} left"
    return (
        f"{where} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {progress.percent:3d}%  {progress.phase}  "
        f"files {job.files_seen:,}/{job.files_total:,}  chunks {job.chunks_written:,} written, "
        f"{job.chunks_embedded:,} embedded{pace}"
    )


class Command(BaseCommand):
    help = "Queue an index job for a workspace root (by name or id), or for every enabled root; optionally wait."

    def add_arguments(self, parser) -> None:
        parser.add_argument("roots", nargs="*", metavar="ROOT", help="A workspace root's name or id (repeatable).")
        parser.add_argument("--all", action="store_true", dest="all_roots", help="Every enabled root.")
        parser.add_argument("--force", action="store_true", help="Re-embed every file, changed or not.")
        parser.add_argument(
            "--wait", action="store_true", help="Show progress until the jobs end; exit 1 if one did not succeed."
        )
        parser.add_argument("--poll", type=float, default=1.0, help="Seconds between progress reads (with --wait).")

    def handle(self, *args, roots: list[str], all_roots: bool, force: bool, wait: bool, poll: float, **options) -> None:
        if bool(roots) == all_roots:
            raise CommandError("name the roots to index, or give --all (not both)")
        if poll <= 0:
            raise CommandError("--poll must be more than 0 seconds")
        targets = list(WorkspaceRoot.objects.filter(enabled=True).order_by("name")) if all_roots else roots_named(roots)
        if not targets:
            raise CommandError("no enabled workspace root to index (add one in the admin)")
        queued, refused = self._queue(targets, force=force)
        if wait and queued:
            self._wait(queued, poll=poll)
        if refused:
            raise CommandError(f"{len(refused)} of {len(targets)} root(s) not queued: {', '.join(refused)}")

    def _queue(self, targets: list[WorkspaceRoot], *, force: bool) -> tuple[list[int], list[str]]:
        queued, refused = [], []
        for root in targets:
            try:
                # As the admin's Re-index button: an operator asking now is not held by the cooldown.
                job, created = tasks.root_reindex_request(
                    root_id=root.pk, force=force, trigger="cli", ignore_cooldown=True
                )
            except ApplicationError as exc:
                self.stderr.write(f"{root.name}: {exc.message}")
                refused.append(root.name)
                continue
            state = job_state(job, jobs_ahead([job]).get(job.pk))
            already = "" if created else " (it was already there)"
            self.stdout.write(f"{root.name}: index job {job.pk}{already} {state}")
            queued.append(job.pk)
        return queued, refused

    def _wait(self, job_ids: list[int], *, poll: float) -> None:
        live = self.stdout.isatty()
        shown: dict[int, str] = {}
        try:
            while True:
                rows = list(IndexJob.objects.filter(pk__in=job_ids).select_related("root").order_by("pk"))
                ahead = jobs_ahead(rows)
                lines = {job.pk: progress_line(job, ahead.get(job.pk)) for job in rows}
                active = [job for job in rows if job.status in ACTIVE_JOB_STATUSES]
                if live:
                    # One line, rewritten: the first job still going, and how many are done.
                    current = lines[active[0].pk] if active else ""
                    done = f"[{len(rows) - len(active)}/{len(rows)} done] " if len(rows) > 1 else ""
                    self.stdout.write(f"\r\033[K{done}{current}", ending="")
                    self.stdout.flush()
                else:
                    for job in active:
                        if shown.get(job.pk) != lines[job.pk]:
                            self.stdout.write(lines[job.pk])
                shown = lines
                if not active:
                    break
                time.sleep(poll)
        except KeyboardInterrupt:
            self.stdout.write("")
            raise CommandError("stopped waiting; the jobs go on (see the admin or rag_stats)") from None
        if live:
            self.stdout.write("\r\033[K", ending="")
        self._report(rows)

    def _report(self, rows: list[IndexJob]) -> None:
        failed = []
        for job in rows:
            took = (job.finished_at - job.started_at).total_seconds() if job.finished_at and job.started_at else 0.0
            summary = (
                f"{job.root.name}: job {job.pk} {job.status} in {took:.0f} s: {counted(job.files_total, 'file')} "
                f"({job.files_changed:,} changed, {job.files_unchanged:,} unchanged, {job.files_skipped:,} skipped, "
                f"{job.files_failed:,} failed, {job.files_deleted:,} removed), "
                f"{counted(job.chunks_embedded, 'chunk')} embedded"
            )
            if job.status == JobStatus.SUCCEEDED:
                self.stdout.write(summary)
                if (outcome := job_outcome_read(job)) is not None and outcome.level == WARNING:
                    self.stderr.write(f"{job.root.name}: warning: {outcome.title.lower()}: {outcome.text}")
            else:
                self.stderr.write(f"{summary}\n  reason: {job.message or 'none given'}")
                failed.append(f"{job.root.name} (job {job.pk}, {job.status}: {job.message or 'no reason given'})")
        if failed:
            raise CommandError(f"{len(failed)} of {len(rows)} job(s) did not succeed: {'; '.join(failed)}")
