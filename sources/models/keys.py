"""The one place a Source's key string is written.

The key is a unique, readable label (admin lists, logs, citations). Code
never parses it: a source's owner is found by its foreign keys
(``Skill.source``, ``Tool.source``, ``WorkspaceRoot.source``,
``Segment.source``, ``UploadedDocument.source``, ``Memory.source`` and ``Source.root``).
Sources no row owns (an evaluation's dataset, a benchmark's corpus) take
theirs from ``unowned_source_key``.
"""

from typing import Literal

from sources.models.documents import UploadedDocument
from sources.models.memories import Memory
from sources.models.roots import Segment, WorkspaceRoot
from sources.models.skills import Skill
from sources.models.tools import Tool


def source_key(owner: Skill | Tool | WorkspaceRoot | Segment | UploadedDocument | Memory) -> str:
    """The ``Source.key`` of what a source stands for: skill:<slug>, tool:<key>, root:<id>[:segment:<id>],
    document:<id>, memory:<id>."""
    if isinstance(owner, Skill):
        return f"skill:{owner.slug}"
    if isinstance(owner, Tool):
        return f"tool:{owner.key}"
    if isinstance(owner, WorkspaceRoot):
        return f"root:{owner.pk}"
    if isinstance(owner, Segment):
        return f"root:{owner.root_id}:segment:{owner.pk}"
    if isinstance(owner, UploadedDocument):
        return f"document:{owner.pk}"
    if isinstance(owner, Memory):
        return f"memory:{owner.pk}"
    raise TypeError(f"no source stands for a {type(owner).__name__}")


def unowned_source_key(kind: Literal["dataset", "bench"], name: str | int) -> str:
    """The ``Source.key`` of a source no row owns: ``dataset:<name>`` (rag_eval's corpus) or ``bench:<chunks>``
    (rag_bench's synthetic corpus)."""
    if kind not in ("dataset", "bench"):
        raise ValueError(f"no unowned source is a {kind!r}")
    return f"{kind}:{name}"
