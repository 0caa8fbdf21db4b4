from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """One retrievable piece of a document.

    ``content`` is exactly lines ``start_line..end_line`` (1-based, inclusive)
    of the input, so a citation ``path:start-end`` shows what was retrieved.
    """

    content: str
    context_prefix: str
    language: str
    symbol: str
    start_line: int
    end_line: int
    metadata: dict[str, Any] = field(default_factory=dict)
