"""Whether a search reads a finished index: the sources in its scope that are still being indexed.

Minutes after a first start the demo skills are still queued, and a search that found nothing said "Try other
words" when the words were fine and the index was not ready. Every surface that runs a query (the page, the API's
``warnings``, MCP) now says how many sources are still on their way.

A root counts while its first index is queued or running (before that nothing of it is searchable), or while a
running job is reading files that changed; a re-verify or a git fetch that finds nothing new changes nothing one
can find and does not count. A skill, tool or uploaded document counts until its chunks are written.
"""

from django.db.models import Exists, OuterRef, Q

from access.scope import Scope
from sources.models import IndexJob, IndexStatus, JobStatus, Skill, Source, Tool, UploadedDocument

_WAITING = (IndexStatus.PENDING, IndexStatus.QUEUED, IndexStatus.RUNNING)
_ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)


def sources_indexing_count(scope: Scope) -> int:
    """The sources ``scope`` may see whose chunks are not all written yet (two short queries' worth of work)."""
    jobs = IndexJob.objects.filter(root_id=OuterRef("root_id"))
    first_index = Exists(jobs.filter(status__in=_ACTIVE)) & ~Exists(jobs.filter(status=JobStatus.SUCCEEDED))
    changing = Exists(jobs.filter(status=JobStatus.RUNNING, files_changed__gt=0))
    busy = Q(root__isnull=False) & Q(first_index | changing)
    # Each kind's own check only for its sources: a corpus of many memories asks nothing of them per search.
    for kind, model in ((Source.Kind.SKILL, Skill), (Source.Kind.TOOL, Tool), (Source.Kind.DOCUMENT, UploadedDocument)):
        waiting = Exists(model.objects.filter(source_id=OuterRef("pk"), index_status__in=_WAITING))
        busy = busy | (Q(kind=kind) & Q(waiting))
    return Source.objects.filter(scope.source_filter()).filter(busy).count()


def indexing_warning(count: int) -> str:
    """ "2 sources are still being indexed; results may be incomplete" ("" for none)."""
    if not count:
        return ""
    return f"{count:,} source{'s are' if count != 1 else ' is'} still being indexed; results may be incomplete"
