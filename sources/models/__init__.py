"""Knowledge sources and the one chunk table they all index into.

One module per kind of record; everything is importable from here.
"""

from sources.models.base import SCOPE_NAME, EmbeddingModel, Indexed, IndexStatus, Scoped, Source, words
from sources.models.chunks import (
    COMMIT_KEY,
    DESCRIPTION_KEY,
    IDENTIFIER_CAMEL,
    IDENTIFIER_SEPARATORS,
    Chunk,
    ChunkDescription,
)
from sources.models.documents import UploadedDocument
from sources.models.keys import source_key, unowned_source_key
from sources.models.memories import Memory, MemoryStatus, memory_status_filter
from sources.models.roots import (
    ACTIVE_JOB_STATUSES,
    DEFAULT_EXCLUDE_DIRS,
    DEFAULT_INCLUDE,
    IndexedFile,
    IndexJob,
    JobStatus,
    Segment,
    VectorBatch,
    WorkspaceRoot,
)
from sources.models.skills import Skill
from sources.models.texts import FileText
from sources.models.tools import Tool

__all__ = [
    "ACTIVE_JOB_STATUSES",
    "DEFAULT_EXCLUDE_DIRS",
    "COMMIT_KEY",
    "DESCRIPTION_KEY",
    "DEFAULT_INCLUDE",
    "IDENTIFIER_CAMEL",
    "IDENTIFIER_SEPARATORS",
    "SCOPE_NAME",
    "Chunk",
    "ChunkDescription",
    "EmbeddingModel",
    "FileText",
    "IndexJob",
    "IndexStatus",
    "Indexed",
    "IndexedFile",
    "JobStatus",
    "Memory",
    "MemoryStatus",
    "Scoped",
    "Segment",
    "Skill",
    "Source",
    "Tool",
    "VectorBatch",
    "UploadedDocument",
    "WorkspaceRoot",
    "memory_status_filter",
    "source_key",
    "unowned_source_key",
    "words",
]
