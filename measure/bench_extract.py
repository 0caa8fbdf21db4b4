"""`rag_bench extract PATH`: how fast documents are extracted, and how much memory one extraction takes.

Every document under PATH (by the suffixes sources/extract/ knows) goes
through the same sandbox a job uses: a child process per file, under the
RAG_EXTRACT_* limits. Peak memory is the largest resident set of any child
(getrusage of the children), so it includes the interpreter and the parser.
"""

import os
import resource
import time
from collections import Counter, defaultdict
from pathlib import Path

from sources.extract import ExtractionRefused, Limits, extractor_for
from sources.extract.sandbox import extract


def extract_bench(path: Path, limits: Limits) -> dict:
    files: list[Path] = []
    for directory, subdirectories, names in os.walk(path):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        files.extend(Path(directory, n) for n in sorted(names) if extractor_for(n) is not None)
    by_kind: Counter[str] = Counter()
    anchors: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    seconds: dict[str, float] = defaultdict(float)
    size = 0
    started = time.perf_counter()
    for file in files:
        extractor = extractor_for(file.name)
        assert extractor is not None
        data = file.read_bytes()
        size += len(data)
        began = time.perf_counter()
        try:
            extracted = extract(extractor.kind, data, limits)
        except ExtractionRefused as exc:
            refused[exc.reason.split(":")[0]] += 1
            continue
        finally:
            seconds[extractor.kind] += time.perf_counter() - began
        by_kind[extractor.kind] += 1
        anchors[extractor.kind] += len(extracted.anchors)
    total = time.perf_counter() - started
    return {
        "files": len(files),
        "bytes": size,
        "seconds": round(total, 3),
        "files_per_s": round(len(files) / total, 1) if total else 0.0,
        "extracted_by_kind": dict(by_kind),
        "refused": dict(refused),
        "pdf_pages": anchors["pdf"],
        "pdf_pages_per_s": round(anchors["pdf"] / seconds["pdf"], 1) if seconds.get("pdf") else 0.0,
        # ru_maxrss is in kilobytes on Linux.
        "peak_child_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
    }
