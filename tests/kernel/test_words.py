"""Counts in words (kernel/words.py), and the messages that read them: no "1 chunks", no "1 memories"."""

import pytest

from kernel.words import counted
from retrieval.schemas import GrepMatchOut, GrepOut
from sources.outcomes import JobFacts, job_outcome
from surfaces.mcp import _grep_text

pytestmark = pytest.mark.unit


def test_a_count_of_one_is_singular_and_others_plural():
    assert [counted(n, "chunk") for n in (0, 1, 2, 12345)] == ["0 chunks", "1 chunk", "2 chunks", "12,345 chunks"]
    assert [counted(n, "memory", "memories") for n in (1, 3)] == ["1 memory", "3 memories"]


def test_a_job_that_embedded_one_chunk_says_one_chunk():
    outcome = job_outcome(JobFacts(status="succeeded", files_total=1, files_changed=1, chunks_embedded=1))
    assert outcome is not None and outcome.text == "1 file indexed, 1 chunk embedded"


def test_grep_over_mcp_counts_the_files_its_lines_are_in_not_the_files_it_read():
    """It said "3 matching lines in 7 files": 7 was every file read, most of them without a match."""
    lines = [("a.py", 3), ("a.py", 9), ("docs/b.md", 1)]
    matches = [GrepMatchOut(root="r", path=p, line=n, text="x", citation=f"{p}:{n}-{n}") for p, n in lines]
    out = GrepOut(pattern="x", matches=matches, files_searched=7, files_skipped=0, truncated=False)
    assert _grep_text(out).splitlines()[0] == "3 matching lines in 2 files"
    one = GrepOut(pattern="x", matches=matches[:1], files_searched=7, files_skipped=0, truncated=False)
    assert _grep_text(one).splitlines()[0] == "1 matching line in 1 file"
