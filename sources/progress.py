"""One progress model for index jobs: phase, a share done that never goes back, a rate and the time left.

Pure Python over a job's counters. The worker advances the model at each
heartbeat (``progress_advance``) and stores the result on the job: the
high-water mark and a few recent samples. Every surface (the job page, the
roots list, the overview, the API, ``rag_index --wait``) reads those stored
values through ``progress_read``, so all of them show the same numbers for
the same row, whenever and however often they ask.

The share done weighs the work known so far: each file considered counts
one unit, each chunk embedded ``CHUNK_WEIGHT`` units. Chunks still to come
are extrapolated from those the files read so far produced. An estimate
like that can drop when a file with many chunks turns up, so the share
shown is the highest reached (the mark), never the estimate of the moment.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from kernel.words import counted


class Phase(StrEnum):
    QUEUED = "queued"
    LISTING = "listing"  # walking the root; files found so far, no total yet
    READING = "reading"  # reading, chunking and comparing files
    EMBEDDING = "embedding"  # a batch of chunks is being embedded and stored
    FINISHING = "finishing"  # removing what is gone, switching to a new model's vectors


# A chunk embedded costs about twenty files read: on two CPU cores the default model embeds about 20 chunks/s
# (`rag_bench index`, docs/sources.md), while reading and chunking a changed file takes a few milliseconds and an
# unchanged one (a stat) far less. Only the shape matters: the estimate is clamped and the rate is measured.
CHUNK_WEIGHT = 20
# The rate is measured over about this many seconds of recent samples: long enough to span a few embedding batches
# (one beat every 2 s at most), short enough to follow a change of pace (from unchanged files to changed ones).
RATE_WINDOW_SECONDS = 30.0
MAX_SAMPLES = 32
# A running job never shows 100%: that is kept for the job that succeeded.
RUNNING_CEILING = 0.99


@dataclass(frozen=True, slots=True)
class Counters:
    """What a job has counted so far (IndexJob's fields of the same names)."""

    files_total: int = 0  # while listing: files found so far
    files_seen: int = 0
    chunks_queued: int = 0
    chunks_embedded: int = 0


Sample = tuple[float, int, int]  # (unix time, files_seen, chunks_embedded)


def expected_chunks(counters: Counters) -> float:
    """The chunks the whole job will embed, extrapolated from what the files read so far produced."""
    if not counters.files_seen:
        return float(counters.chunks_queued)
    per_file = counters.chunks_queued / counters.files_seen
    return max(float(counters.chunks_queued), per_file * counters.files_total)


def units_done(counters: Counters) -> float:
    return counters.files_seen + CHUNK_WEIGHT * counters.chunks_embedded


def units_total(counters: Counters) -> float:
    return counters.files_total + CHUNK_WEIGHT * expected_chunks(counters)


def share_estimate(counters: Counters, phase: str) -> float:
    """The share done by this moment's estimate (0 while listing: nothing to divide by yet), at most 0.99."""
    if phase in (Phase.QUEUED, Phase.LISTING, ""):
        return 0.0
    if phase == Phase.FINISHING:
        return RUNNING_CEILING
    total = units_total(counters)
    if not total:
        return 0.0
    return min(units_done(counters) / total, RUNNING_CEILING)


def progress_advance(
    *, mark: float, samples: Sequence[Sequence[float]], counters: Counters, phase: str, now: float
) -> tuple[float, list[Sample]]:
    """The new high-water mark and samples after a heartbeat at ``now`` (unix seconds).

    The first sample is the anchor (the last beat before reading started: the whole job's pace is measured from
    it), the others the recent window.
    """
    mark = max(mark, share_estimate(counters, phase))
    kept: list[Sample] = [(float(t), int(files), int(chunks)) for t, files, chunks in samples]
    if kept and now < kept[-1][0]:
        kept = []  # the clock went back (another host took the job over): start the window again
    kept.append((round(now, 2), counters.files_seen, counters.chunks_embedded))
    if phase in (Phase.QUEUED, Phase.LISTING, ""):
        return round(mark, 4), kept[-1:]  # no pace while listing: the anchor is the last beat before reading
    anchor, window = kept[0], kept[1:]
    # The window keeps one sample older than its span, so the rate covers the whole span.
    while len(window) > 2 and (window[1][0] <= now - RATE_WINDOW_SECONDS or len(window) > MAX_SAMPLES - 1):
        window.pop(0)
    return round(mark, 4), [anchor, *window]


@dataclass(frozen=True, slots=True)
class Rate:
    files_per_second: float
    chunks_per_second: float
    units_per_second: float


def _rate_between(first: Sequence[float], last: Sequence[float]) -> Rate | None:
    (t0, files0, chunks0), (t1, files1, chunks1) = first, last
    span = t1 - t0
    if span < 1.0:
        return None  # two beats a moment apart say nothing about the pace
    files, chunks = (files1 - files0) / span, (chunks1 - chunks0) / span
    return Rate(max(files, 0.0), max(chunks, 0.0), max(files + CHUNK_WEIGHT * chunks, 0.0))


def rate_measure(samples: Sequence[Sequence[float]]) -> Rate | None:
    """Files and chunks per second over the recent window (the samples after the anchor, or the anchor and the one
    sample after it); None with too little to measure."""
    if len(samples) < 2:
        return None
    return _rate_between(samples[1] if len(samples) > 2 else samples[0], samples[-1])


# The time left divides by a blend of the recent pace and the whole job's so far, half each. The recent window
# alone swings with every embedding batch and every stretch of unchanged files (a time left seen jumping from 17 to
# 50 min within 40 s); the whole job's alone would be slow to follow a real change of pace.
RECENT_WEIGHT = 0.5


def eta_rate(samples: Sequence[Sequence[float]]) -> float | None:
    """Work units per second the time left is told from: the recent pace blended with the whole job's so far."""
    recent = rate_measure(samples)
    if recent is None:
        return None
    overall = _rate_between(samples[0], samples[-1])
    if overall is None:
        return recent.units_per_second
    return RECENT_WEIGHT * recent.units_per_second + (1 - RECENT_WEIGHT) * overall.units_per_second


@dataclass(frozen=True, slots=True)
class Progress:
    """What every surface shows of a job's progress."""

    phase: str  # a Phase value, or the outcome's status once the job has ended
    share: float  # 0..1, never lower than before
    percent: int
    rate: float | None  # per second, of ``rate_unit``
    rate_unit: str  # "chunks/s", "files/s" or ""
    eta_seconds: int | None
    summary: str  # "Embedding: 42% · 18.5 chunks/s · about 3 min left"


def progress_read(
    *,
    status: str,
    phase: str,
    mark: float,
    samples: Sequence[Sequence[float]],
    counters: Counters,
) -> Progress:
    """The progress of a job as stored (no clock read here: the same row gives the same answer everywhere)."""
    if status == "succeeded":
        return Progress("succeeded", 1.0, 100, None, "", None, "Done: 100%")
    if status == "queued":
        return Progress(Phase.QUEUED, mark, int(mark * 100), None, "", None, "Queued")
    if status != "running":
        return Progress(status, mark, int(mark * 100), None, "", None, f"Stopped at {int(mark * 100)}%")
    phase = phase or Phase.LISTING
    percent = int(mark * 100)
    if phase == Phase.LISTING:
        found = f": {counted(counters.files_total, 'file')} found so far" if counters.files_total else ""
        return Progress(phase, mark, percent, None, "", None, f"Listing files{found}")
    measured = rate_measure(samples)
    rate, unit, eta = None, "", None
    if measured is not None:
        embedding = counters.chunks_queued > 0 and measured.chunks_per_second > 0
        rate, unit = (measured.chunks_per_second, "chunks/s") if embedding else (measured.files_per_second, "files/s")
        pace = eta_rate(samples)
        if pace and phase != Phase.FINISHING:
            eta = round(max(units_total(counters) - units_done(counters), 0.0) / pace)
    parts = [f"{phase.capitalize()}: {percent}%"]
    if rate is not None:
        parts.append(f"{rate:,.1f} {unit}")
    if eta is not None:
        parts.append(f"about {duration(eta)} left")
    return Progress(phase, mark, percent, rate, unit, eta, " · ".join(parts))


def duration(seconds: int) -> str:
    """A time left in the words a person reads at a glance: "40 s", "3 min", "1 h 5 min"."""
    if seconds < 60:
        return f"{max(seconds, 1)} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


_STEPS = (Phase.QUEUED, Phase.LISTING, Phase.READING, Phase.EMBEDDING, Phase.FINISHING)


def phase_steps(phase: str) -> list[dict[str, str]]:
    """Each phase with its state for a step list: "done", "current" or "" (to come).

    Reading and embedding take turns (a batch is embedded once enough chunks
    wait), so while one is current the other is neither done nor to come: it
    is shown as to come, and marked done only once finishing starts.
    """
    current = _STEPS.index(Phase(phase)) if phase in _STEPS else 0
    steps = []
    for index, step in enumerate(_STEPS):
        if index == current:
            state = "current"
        elif index < current and not (step == Phase.READING and phase == Phase.EMBEDDING):
            state = "done"
        else:
            state = ""
        steps.append({"label": step.capitalize(), "state": state})
    return steps
