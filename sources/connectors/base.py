"""The connector interface: what every kind of root gives the one indexing pipeline (sources/pipeline/).

A connector lists a root's items and reads an item's bytes on demand;
everything after it (change detection against the stored ``IndexedFile``
rows, the one bytes -> chunks function of sources/reading.py, embedding in
batches, deletions, progress and heartbeat, outcomes, cancel, takeover
after a crash, segments and generations) is the pipeline's, the same for
every connector. Items changed since a marker arrive as a job's paths: a
watcher's events, a git diff, a webhook; ``items(paths=...)`` lists just
those when the connector can (``targeted``), else everything is listed and
the stored markers decide.

A connector is built for one job, with its configuration injected once
(``Connector.__init__``), and is not thread-safe. Pure of Celery; it may
read and write its root's row (a git root records its commit).
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from sources.config import IndexingConfig
from sources.jobs import HandOff
from sources.models import IndexJob, WorkspaceRoot
from sources.walk import Skipped

__all__ = ["KEPT", "Connector", "HandOff", "Item", "Skipped"]

# What ``read`` answers for an item it did not fetch this time (a crawl cut short by a limit, a server error): the
# stored chunks stay, and the next job reads it. A file replaced between listing and reading is kept the same way.
KEPT = "not read by this job: what is stored stays (read by the next job)"


@dataclass(frozen=True, slots=True)
class Item:
    """One item a connector lists: what the pipeline compares with what is stored before it reads anything."""

    path: str  # its stable id in the root, and its citation: a path below the root, or a URL
    # The change marker: equal to the stored one (and the fingerprint current), the item is not read at all. A
    # ``marker`` (an ETag, a commit; stored as IndexedFile.marker) when there is one, else size and mtime.
    size: int = 0
    mtime_ns: int = 0
    marker: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)  # joined to each chunk's metadata (e.g. the commit)
    handle: object = field(default=None, compare=False)  # the connector's own: what ``read`` needs


class Connector:
    """One kind of root. Subclasses implement ``items`` and ``read``; the hooks have do-nothing defaults."""

    kind: ClassVar[str]  # its key in sources/connectors/registry.py, shown in job messages

    def __init__(self, *, root: WorkspaceRoot, job: IndexJob, config: IndexingConfig) -> None:
        self.root = root
        self.job = job
        self.config = config

    @classmethod
    def claims(cls, root: WorkspaceRoot) -> bool:
        """Whether this connector indexes ``root`` (sources/connectors/registry.py asks each in turn)."""
        return False

    # What the pipeline calls, in order.

    def prepare(self) -> str | None:
        """Before anything is listed; a message ends the job succeeded with it (nothing new to read). Raises
        ``HandOff`` when the job belongs on the bulk queue (a rebuild, a big diff)."""
        return None

    @property
    def rebuild(self) -> bool:
        """Write every item into a new generation, flipped when complete (a rewritten git history)."""
        return False

    def open(self) -> None:
        """Acquire what listing and reading need (a pinned directory); ``close`` always follows."""

    def close(self) -> None:
        pass

    def targeted(self) -> bool:
        """Whether ``items`` can list only the job's paths; False: a targeted job lists the whole root."""
        return True

    def items(self, *, paths: Sequence[str], known: Mapping[str, str]) -> Iterator[Item | Skipped]:
        """The root's items (``paths``: only those, or below those directories), and the ones skipped with their
        reasons. ``known``: the stored marker of each item whose stored chunks are current (path ->
        ``Item.marker``): listing one with that marker again keeps it without a read."""
        raise NotImplementedError

    def left_out(self) -> Mapping[str, int]:
        """What the listing left out by design (patterns, size, type), counted by reason, never with paths."""
        return {}

    def reader_name(self, path: str, marker: str) -> str:
        """The name whose suffix picks how an item's bytes are read (sources/reading.py) and joins its fingerprint:
        its path, unless that says nothing (a URL: a web page's comes from the content type its marker keeps)."""
        return path

    def read(self, item: Item) -> bytes | Skipped:
        """The item's bytes now, or why they cannot be read (``KEPT`` or ``REPLACED``: keep what is stored)."""
        raise NotImplementedError

    def renamed_from(self, path: str) -> str | None:
        """The path the item had before, when the change was a rename (its vectors move with it)."""
        return None

    def indexed(self) -> None:
        """The job succeeded: record what the index now reflects (a commit)."""

    def summary(self) -> str:
        """The start of the job's message (e.g. the commit it read)."""
        return ""
