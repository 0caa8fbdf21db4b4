"""The progress model of index jobs (sources/progress.py): phases, a share that never goes back, rate, time left."""

import pytest

from sources.progress import (
    CHUNK_WEIGHT,
    RATE_WINDOW_SECONDS,
    Counters,
    Phase,
    duration,
    progress_advance,
    progress_read,
    share_estimate,
)

pytestmark = pytest.mark.unit


def read(counters: Counters, *, phase: str = Phase.READING, mark: float = 0.0, samples=(), status: str = "running"):
    return progress_read(status=status, phase=phase, mark=mark, samples=list(samples), counters=counters)


def test_the_share_shown_never_goes_back_when_a_file_with_many_chunks_turns_up():
    mark, samples = 0.0, []
    seen = []
    # The first 10 files find 10 chunks each, all embedded; then one file brings 2,000 chunks: the estimate drops.
    steps = [
        Counters(files_total=100, files_seen=10, chunks_queued=100, chunks_embedded=100),
        Counters(files_total=100, files_seen=11, chunks_queued=2100, chunks_embedded=100),
        Counters(files_total=100, files_seen=11, chunks_queued=2100, chunks_embedded=600),
        Counters(files_total=100, files_seen=100, chunks_queued=2990, chunks_embedded=2990),
    ]
    for second, counters in enumerate(steps):
        estimate = share_estimate(counters, Phase.READING)
        mark, samples = progress_advance(
            mark=mark, samples=samples, counters=counters, phase=Phase.READING, now=1000.0 + second
        )
        seen.append((estimate, mark))
    estimates, marks = [e for e, _ in seen], [m for _, m in seen]
    assert estimates[1] < estimates[0]  # the estimate went back ...
    assert marks == sorted(marks) and marks[1] == marks[0]  # ... the mark did not
    assert marks[-1] == 0.99  # everything read and embedded, not yet finished: never 100% while running


def test_chunks_weigh_more_than_files_and_unread_files_are_expected_to_bring_chunks_like_the_read_ones():
    # Half the files read found 400 chunks: about 800 in all; 100 embedded.
    counters = Counters(files_total=100, files_seen=50, chunks_queued=400, chunks_embedded=100)
    expected = (50 + CHUNK_WEIGHT * 100) / (100 + CHUNK_WEIGHT * 800)
    assert share_estimate(counters, Phase.EMBEDDING) == pytest.approx(expected)
    # Nothing to embed (every file unchanged): reading is the work.
    assert share_estimate(Counters(files_total=10, files_seen=4), Phase.READING) == pytest.approx(0.4)


def test_listing_has_no_share_yet_and_says_how_many_files_it_found():
    progress = read(Counters(files_total=2345), phase=Phase.LISTING)
    assert (progress.percent, progress.eta_seconds) == (0, None)
    assert progress.summary == "Listing files: 2,345 files found so far"


def test_rate_and_time_left_come_from_the_recent_window_of_samples():
    counters = Counters(files_total=100, files_seen=100, chunks_queued=1000, chunks_embedded=400)
    samples = [(1000.0, 100, 200), (1010.0, 100, 400)]  # 200 chunks in 10 s
    progress = read(counters, phase=Phase.EMBEDDING, mark=0.4, samples=samples)
    assert (progress.rate, progress.rate_unit) == (20.0, "chunks/s")
    assert progress.eta_seconds == 30  # 600 chunks left at 20/s
    assert progress.summary == "Embedding: 40% · 20.0 chunks/s · about 30 s left"


def test_a_job_with_nothing_to_embed_reports_files_per_second():
    samples = [(1000.0, 100, 0), (1004.0, 500, 0)]
    progress = read(Counters(files_total=1000, files_seen=500), mark=0.5, samples=samples)
    assert (progress.rate, progress.rate_unit, progress.eta_seconds) == (100.0, "files/s", 5)


def test_the_window_keeps_only_recent_samples_and_one_before_them_after_the_anchor():
    mark, samples = progress_advance(mark=0.0, samples=[], counters=Counters(10), phase=Phase.LISTING, now=-4.0)
    mark, samples = progress_advance(mark=mark, samples=samples, counters=Counters(10), phase=Phase.LISTING, now=-2.0)
    assert samples == [(-2.0, 0, 0)]  # listing keeps only its last beat: the pace is measured from reading on
    for second in range(0, 100, 2):
        mark, samples = progress_advance(
            mark=mark, samples=samples, counters=Counters(10, 1, 0, 0), phase=Phase.READING, now=float(second)
        )
    assert samples[0][0] == -2.0  # the anchor stays
    assert samples[-1][0] == 98.0
    assert samples[1][0] <= 98.0 - RATE_WINDOW_SECONDS < samples[2][0]


def test_the_time_left_blends_the_recent_pace_with_the_whole_jobs_so_it_does_not_jump_with_one_slow_stretch():
    # Ten minutes embedding a steady 10 chunks/s, then 30 s at a third of that (a slow batch).
    mark, samples = 0.0, []
    mark, samples = progress_advance(mark=mark, samples=samples, counters=Counters(100), phase=Phase.LISTING, now=0)
    embedded = 0
    for second in range(2, 632, 2):
        embedded += 20 if second <= 600 else 7
        counters = Counters(files_total=100, files_seen=100, chunks_queued=30000, chunks_embedded=embedded)
        mark, samples = progress_advance(
            mark=mark, samples=samples, counters=counters, phase=Phase.EMBEDDING, now=float(second)
        )
        if second == 600:
            steady = read(counters, phase=Phase.EMBEDDING, mark=mark, samples=samples)
    slow = read(counters, phase=Phase.EMBEDDING, mark=mark, samples=samples)
    assert steady.rate == pytest.approx(10.0) and slow.rate == pytest.approx(3.5)  # the rate shown is the recent one
    assert steady.eta_seconds is not None and slow.eta_seconds is not None
    # The recent pace alone would almost triple the time left (2,400 s -> 6,800 s); the blend, less than double.
    assert slow.eta_seconds < 1.6 * steady.eta_seconds
    assert slow.eta_seconds > steady.eta_seconds  # it still follows the slower pace


def test_the_same_row_reads_the_same_everywhere_and_a_finished_job_says_so():
    counters = Counters(files_total=100, files_seen=60, chunks_queued=500, chunks_embedded=250)
    samples = [(1000.0, 40, 100), (1020.0, 60, 250)]
    first = read(counters, mark=0.37, samples=samples)
    assert read(counters, mark=0.37, samples=samples) == first
    assert read(counters, status="succeeded", mark=0.9).percent == 100
    assert read(counters, status="cancelled", mark=0.37).summary == "Stopped at 37%"
    assert read(counters, status="queued").summary == "Queued"


def test_time_left_reads_at_a_glance():
    assert [duration(s) for s in (0, 40, 170, 3900)] == ["1 s", "40 s", "3 min", "1 h 5 min"]
