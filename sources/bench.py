"""Speed measurements behind `manage.py rag_bench` (pure functions, no timing in tests)."""

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sources.chunking import chunk_text, language_for

# Files the bench reads: text under this size (the indexer's default limit is
# 500 kB; a little more shows the cost of big files without drowning in them).
MAX_FILE_BYTES = 2_000_000
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv", "dist", "build"}


@dataclass
class ChunkBench:
    files: int = 0
    bytes: int = 0
    chunks: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    skipped: int = 0
    by_language: Counter = field(default_factory=Counter)
    files_by_language: Counter = field(default_factory=Counter)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.cpu_seconds if self.cpu_seconds else 0.0

    @property
    def files_per_s(self) -> float:
        return self.files / self.cpu_seconds if self.cpu_seconds else 0.0

    def as_dict(self) -> dict:
        return {
            "files": self.files, "bytes": self.bytes, "chunks": self.chunks, "skipped": self.skipped,
            "seconds": round(self.seconds, 3), "cpu_seconds": round(self.cpu_seconds, 3),
            "mb_per_s": round(self.mb_per_s, 2), "files_per_s": round(self.files_per_s, 1),
            "chunks_by_language": dict(self.by_language.most_common()),
            "files_by_language": dict(self.files_by_language.most_common()),
        }


def text_files(root: Path) -> list[tuple[Path, str]]:
    """Readable UTF-8 text files under ``root`` (read before timing starts)."""
    found = []
    for path in sorted(root.rglob("*")):
        if any(part in _SKIP_DIRS for part in path.relative_to(root).parts) or not path.is_file():
            continue
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            raw = path.read_bytes()
        except OSError:
            continue
        if b"\x00" in raw[:8192]:
            continue
        try:
            found.append((path, raw.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return found


def chunk_bench(root: Path, *, max_chars: int = 1500, overlap: int = 200) -> ChunkBench:
    """Chunk every text file under ``root`` once; CPU time is one core's."""
    files = text_files(root)
    result = ChunkBench()
    wall, cpu = time.perf_counter(), time.process_time()
    for path, text in files:
        chunks = chunk_text(text, str(path), max_chars=max_chars, overlap=overlap)
        language = language_for(str(path))
        result.files += 1
        result.bytes += len(text.encode("utf-8", "surrogatepass"))
        result.chunks += len(chunks)
        result.by_language[language] += len(chunks)
        result.files_by_language[language] += 1
    result.seconds = time.perf_counter() - wall
    result.cpu_seconds = time.process_time() - cpu
    return result
