"""manage.py rag_index: queues jobs through the admin's service; with --wait, follows them to the end."""

import io
import shutil

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from sources.models import IndexJob, JobStatus, WorkspaceRoot
from surfaces.management.commands.rag_index import progress_line
from tests.conftest import running_worker
from tests.tree import tree_make


@pytest.fixture
def roots(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    made = {}
    for name in ("alpha", "beta"):
        tree_make(tmp_path / name, files=6)
        made[name] = WorkspaceRoot.objects.create(name=name, path=str(tmp_path / name))
    return made


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("rag_index", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_a_root_named_or_numbered_is_queued_and_says_what_it_waits_behind(roots):
    out, _ = run("alpha", str(roots["beta"].pk))
    first, second = IndexJob.objects.order_by("pk")
    assert (first.root, first.trigger, first.status, second.root) == (roots["alpha"], "cli", "queued", roots["beta"])
    assert out.splitlines() == [
        f"alpha: index job {first.pk} queued, next on the bulk queue",
        f"beta: index job {second.pk} queued behind 1 job on the bulk queue",
    ]
    again, _ = run("alpha", "--force")
    assert again == f"alpha: index job {first.pk} (it was already there) queued, next on the bulk queue\n"


@pytest.mark.django_db
def test_all_queues_every_enabled_root_and_ignores_the_cooldown_as_the_admin_button_does(roots):
    WorkspaceRoot.objects.filter(name="beta").update(enabled=False)
    WorkspaceRoot.objects.create(name="gamma", path=roots["alpha"].path + "/app", cooldown_seconds=3600)
    WorkspaceRoot.objects.filter(name="gamma").update(last_verified_at=timezone.now())
    run("--all")
    assert sorted(IndexJob.objects.values_list("root__name", flat=True)) == ["alpha", "gamma"]


@pytest.mark.django_db
def test_an_unknown_root_is_an_error_naming_it_and_queues_nothing(roots):
    with pytest.raises(
        CommandError, match=r"no workspace root named or numbered 'nope', '999999' \(roots: alpha, beta\)"
    ):
        run("alpha", "nope", "999999")
    assert not IndexJob.objects.exists()
    with pytest.raises(CommandError, match="name the roots to index, or give --all"):
        run()
    with pytest.raises(CommandError, match="not both"):
        run("alpha", "--all")


@pytest.mark.django_db
def test_a_disabled_root_is_refused_with_the_reason(roots):
    WorkspaceRoot.objects.filter(name="beta").update(enabled=False)
    with pytest.raises(CommandError, match=r"1 of 2 root\(s\) not queued: beta"):
        run("alpha", "beta")
    assert list(IndexJob.objects.values_list("root__name", flat=True)) == ["alpha"]


@pytest.mark.unit
def test_a_running_job_s_progress_line_shows_its_phase_files_chunks_percent_rate_and_time_left():
    job = IndexJob(
        pk=7,
        root=WorkspaceRoot(name="repo"),
        status=JobStatus.RUNNING,
        files_total=200,
        files_seen=100,
        chunks_queued=400,
        chunks_written=400,
        chunks_embedded=200,
        phase="embedding",
        progress_mark=0.25,
        progress_samples=[[1000.0, 100, 100], [1010.0, 100, 200]],
    )
    assert progress_line(job, None) == (
        "repo: job 7 [######..................]  25%  embedding  files 100/200  chunks 400 written, 200 embedded  "
        "10.0 chunks/s  about 1 min left"
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_wait_follows_the_jobs_to_the_end_and_fails_with_the_reason_of_a_failed_job(roots, tmp_path):
    with running_worker("cli-worker"):
        out, _ = run("alpha", "--wait", "--poll", "0.2")
        lines = out.splitlines()
        done = IndexJob.objects.get(root=roots["alpha"])
        assert done.status == JobStatus.SUCCEEDED
        assert lines[0] == f"alpha: index job {done.pk} queued, next on the bulk queue"
        assert lines[-1].startswith(f"alpha: job {done.pk} succeeded in ") and "6 files (6 changed" in lines[-1]
        assert "\r" not in out  # not a terminal: plain lines

        shutil.rmtree(tmp_path / "beta")
        with pytest.raises(CommandError, match=r"1 of 1 job\(s\) did not succeed: beta \(job \d+, failed: .+\)"):
            run("beta", "--wait", "--poll", "0.2")
    failed = IndexJob.objects.get(root=roots["beta"])
    assert failed.status == JobStatus.FAILED and failed.message
