"""What an index job's row says, for every surface: its progress (sources/progress.py) and its outcome
(sources/outcomes.py), read from the stored fields only, so the job page, the roots list, the overview, the API
and ``rag_index --wait`` show the same numbers for the same row."""

from dataclasses import dataclass

from kernel.words import counted
from sources.models import IndexJob, JobStatus
from sources.outcomes import JobFacts, Outcome, job_outcome
from sources.progress import Counters, Progress, progress_read


def job_facts(job: IndexJob, *, status: str | None = None) -> JobFacts:
    """The stored counters an outcome is told from (``status``: the one the job is about to get, else its own)."""
    return JobFacts(
        status=status or job.status,
        message=job.message,
        targeted=bool(job.paths),
        # Only a job its connector ended before listing succeeds without a phase (sources/pipeline/run.py).
        up_to_date=(status or job.status) == JobStatus.SUCCEEDED and not job.phase,
        files_total=job.files_total,
        files_seen=job.files_seen,
        files_changed=job.files_changed,
        files_unchanged=job.files_unchanged,
        files_skipped=job.files_skipped,
        files_failed=job.files_failed,
        files_deleted=job.files_deleted,
        chunks_embedded=job.chunks_embedded,
        chunks_deleted=job.chunks_deleted,
        chunks_undescribed=job.chunks_undescribed,
        left_out=job.left_out,
        skipped_by_reason=job.skipped_by_reason,
        failed_by_reason=job.failed_by_reason,
    )


def job_progress_read(job: IndexJob) -> Progress:
    return progress_read(
        status=job.status,
        phase=job.phase,
        mark=job.progress_mark,
        samples=job.progress_samples,
        counters=Counters(job.files_total, job.files_seen, job.chunks_queued, job.chunks_embedded),
    )


def job_outcome_read(job: IndexJob) -> Outcome | None:
    """What a finished job did (None while it is queued or running)."""
    return job_outcome(job_facts(job))


@dataclass(frozen=True, slots=True)
class Searchable:
    """How much of a job's work search can already find: by words (written words first) and by meaning (embedded)."""

    files_by_words: int  # files written this run or unchanged since the last one
    files_total: int
    chunks_by_words: int  # chunks written this run
    chunks_by_meaning: int  # of the chunks this run embeds, those with their vector
    chunks_to_embed: int

    @property
    def text(self) -> str:
        words = f"Searchable by words: {self.files_by_words:,} of {counted(self.files_total, 'file')}"
        if self.chunks_by_words:
            words += f" ({counted(self.chunks_by_words, 'chunk')} written)"
        if not self.chunks_to_embed:
            return words
        return f"{words} · by meaning: {self.chunks_by_meaning:,} of {counted(self.chunks_to_embed, 'chunk')}"


def job_searchable(job: IndexJob) -> Searchable:
    return Searchable(
        files_by_words=job.files_changed + job.files_unchanged,
        files_total=job.files_total,
        chunks_by_words=job.chunks_written,
        chunks_by_meaning=job.chunks_embedded,
        chunks_to_embed=max(job.chunks_queued, job.chunks_embedded),
    )
