"""`rag_bench freshness`'s summary and table, on plain data (no timing: the bench's numbers are the machine's)."""

import pytest

from measure.bench_freshness import _summary, freshness_table

pytestmark = pytest.mark.unit


def test_a_change_that_never_reached_search_counts_as_a_timeout_not_as_a_time():
    assert _summary([1.0, None, 3.0]) == {"n": 3, "timeouts": 1, "p50_s": 2.0, "p95_s": 2.9, "max_s": 3.0}
    assert _summary([None]) == {"n": 1, "timeouts": 1, "p50_s": None, "p95_s": None, "max_s": None}


def test_the_table_has_a_row_per_phase_and_change_and_says_how_long_the_bulk_job_ran():
    row = {"n": 2, "timeouts": 0, "p50_s": 1.0, "p95_s": 1.5, "max_s": 1.5}
    report = {
        "idle": {"edit": row, "delete": row},
        "bulk": {"edit": row, "skill saved": {**row, "bulk_running_at_end": True}, "rounds_with_bulk_running": 2},
        "bulk_job": {"status": "running", "chunks_embedded": 900},
    }
    lines = freshness_table(report)
    assert [line.split()[:2] for line in lines[1:4]] == [["idle", "edit"], ["idle", "delete"], ["bulk", "edit"]]
    assert lines[4].split() == ["bulk", "skill", "saved", "2", "1.00", "1.50", "1.50", "0"]
    assert lines[-1].strip().startswith("the bulk job ran through 2 of 2 rounds")


def test_the_git_rows_say_how_many_chunks_the_fetches_with_no_new_commit_embedded():
    row = {"n": 2, "timeouts": 0, "p50_s": 1.0, "p95_s": 1.5, "max_s": 1.5}
    lines = freshness_table({"idle": {"git push 10": row, "git no commit": {**row, "chunks_embedded": 0}}})
    assert lines[1].split()[:4] == ["idle", "git", "push", "10"]
    assert lines[2].split()[:4] == ["idle", "git", "no", "commit"]
    assert lines[3].strip() == "chunks embedded by these jobs: 0"
