"""Which Celery queue each piece of work goes to: the one table, and the one rule for index jobs.

Two queues, each with its own worker process (`make run` and compose start
both): ``interactive`` for what a person waits for (a skill, tool or memory
saved, a job that touches a few given text files, the recovery sweep) and
``bulk`` for what takes long (a root's full walk, forced rebuilds, model
swaps, the periodic re-verify of every skill, and anything that runs the
extraction stage: an uploaded document, a job for a few paths among which a
PDF or Office file). A save never waits behind a big job or behind one
hostile PDF (up to RAG_EXTRACT_TIMEOUT_SECONDS of extraction), and a big job
never starves for a stream of saves.

Nothing here imports Django or Celery: the settings build CELERY_TASK_ROUTES
from ``TASK_QUEUES`` before the apps load (rag_site/settings/runtime.py).
"""

from typing import TYPE_CHECKING

from sources.extract import extractor_for

if TYPE_CHECKING:
    from sources.models import IndexJob

INTERACTIVE = "interactive"
BULK = "bulk"
QUEUES = (INTERACTIVE, BULK)

# item kind (sources/items.py) -> queue: where ``tasks.item_enqueue`` sends a kind's ``item_index_task``.
ITEM_QUEUES: dict[str, str] = {
    "skill": INTERACTIVE,
    "tool": INTERACTIVE,
    # An upload is extracted in a sandbox for up to RAG_EXTRACT_TIMEOUT_SECONDS: one hostile PDF held the single
    # interactive worker for the full 60 s, and a memory written a second later waited as long.
    "document": BULK,
    # A bot that remembers something recalls it in its next turn: seconds, never behind a bulk job.
    "memory": INTERACTIVE,
}

# task name -> queue. A task not named here goes to BULK (CELERY_TASK_DEFAULT_QUEUE): unknown work is
# assumed big, so it can only ever slow the bulk worker, never a save.
TASK_QUEUES: dict[str, str] = {
    # Sent with its kind's queue (ITEM_QUEUES); this is only where a message sent without one would go.
    "sources.tasks.item_index_task": BULK,
    # The per-kind tasks before item_index_task, kept for messages a broker still held at the upgrade.
    **{f"sources.tasks.{kind}_index_task": queue for kind, queue in ITEM_QUEUES.items()},
    # The sweep and the scheduled re-verify only look at rows and queue work: quick, and the sweep must run
    # while a bulk job holds the bulk worker (it is what hands on a job whose worker died).
    "sources.tasks.jobs_reap_task": INTERACTIVE,
    "sources.tasks.root_reverify_task": INTERACTIVE,
    # Only asks again for a git root's fetch job once the running one has ended.
    "sources.tasks.root_push_retry_task": INTERACTIVE,
    # Queues every skill, tool and document: after a model swap, each is re-embedded (sent with BULK below).
    "sources.tasks.skills_reverify_task": BULK,
    # Per job, by job_queue(): this is only where a message sent without one would go.
    "sources.tasks.root_index_task": BULK,
    # Helpers with a job's vector batches (sources/pipeline/vectors.py): every bulk process may take a share.
    "sources.tasks.vectors_batch_task": BULK,
}


def task_routes() -> dict[str, dict[str, str]]:
    """CELERY_TASK_ROUTES: ``TASK_QUEUES`` in Celery's shape."""
    return {name: {"queue": queue} for name, queue in TASK_QUEUES.items()}


# Jobs of a git root that begin with a fetch (sources/git_roots.py): "push" from its webhook, "fetch" from its
# schedule. Interactive, like a targeted job: a push usually touches a few files, and one that needs a rebuild, or
# whose diff holds a document to extract, is handed to the bulk queue once the fetch shows it.
GIT_FETCH_TRIGGERS = ("push", "fetch")


def job_targeted(job: "IndexJob") -> bool:
    """Whether the job reads only the paths it names (``IndexJob.paths``: a watched change), not the whole root."""
    return bool(job.paths)


def job_extracts(job: "IndexJob") -> bool:
    """Whether a targeted job names a document the extraction stage reads (PDF, Office, CSV, HTML)."""
    return any(extractor_for(path) for path in job.paths or ())


def job_queue(job: "IndexJob") -> str:
    """The queue of an index job: a targeted job or a git fetch is interactive; a full walk (forced or not), or a
    targeted job with a document to extract, is bulk."""
    if job_targeted(job):
        return BULK if job_extracts(job) else INTERACTIVE
    return INTERACTIVE if job.trigger in GIT_FETCH_TRIGGERS else BULK
