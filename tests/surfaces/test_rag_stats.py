"""manage.py rag_stats: the index in numbers, as a table or JSON."""

import io
import json
import re

import pytest
from django.core.management import call_command

from sources import jobs, services
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from tests.conftest import index_root
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("rag_stats", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def indexed(readme_root, tmp_path):
    services.skill_index(skill_id=SkillFactory(slug="heron-watch").pk)
    index_root(readme_root)
    (tmp_path / "other").mkdir()
    other = WorkspaceRoot.objects.create(name="other", path=str(tmp_path / "other"))
    failed, _ = jobs.root_job_request(root_id=other.pk, trigger="test")
    jobs.job_finish(job_id=failed.pk, status=JobStatus.FAILED, message="the directory vanished")
    queued, _ = jobs.root_job_request(root_id=other.pk, trigger="test", ignore_cooldown=True)
    return readme_root, other, queued


def test_json_counts_sources_files_chunks_models_disk_jobs_and_queues(indexed):
    repo, other, queued = indexed
    stats = json.loads(run("--json"))
    kinds = {row["kind"]: row for row in stats["sources"]}
    assert kinds["skill"]["sources"] == 1 and kinds["skill"]["chunks"] >= 1
    assert kinds["file"]["chunks"] >= 1 and stats["files"] == 1
    assert stats["chunks"] == sum(row["chunks"] for row in stats["sources"])
    assert [m["vectors"] for m in stats["models"]] == [stats["chunks"]]
    tables = {t["table"]: t for t in stats["disk"]["tables"]}
    assert tables["sources_chunk"]["table_bytes"] > 0 and tables["sources_chunk"]["index_bytes"] > 0
    assert stats["disk"]["database_bytes"] >= stats["disk"]["table_bytes"] + stats["disk"]["index_bytes"]
    last = {root["root"]: root["last_job"] for root in stats["roots"]}
    assert last["repo"]["status"] == "succeeded"
    assert (last["other"]["id"], last["other"]["state"]) == (queued.pk, "queued, next on the bulk queue")
    assert stats["queues"]["bulk"]["jobs_queued"] == 1
    assert stats["queues"]["interactive"]["jobs_queued"] == 0
    assert isinstance(stats["queues"]["bulk"]["broker"], int)  # the suite's Valkey answers


def test_the_table_shows_the_same_numbers_for_a_person(indexed):
    repo, other, queued = indexed
    IndexJob.objects.filter(pk=queued.pk).delete()
    text = run()
    assert "skill " in text and "embedding models" in text and "disk  tables" in text
    assert "other: job" in text and "failed" in text and "the directory vanished" in text
    assert re.search(r"^  bulk +0 job\(s\) and 0 item\(s\) queued; \d+ task\(s\) in the broker$", text, re.MULTILINE)
