"""Each extraction in a child process under a time limit and an address-space limit.

A parser fed a hostile file can loop, allocate without end, or crash in C
code (lxml, zlib). In a child, any of these ends that file only: the child is
killed at the time limit, RLIMIT_AS turns a runaway allocation into a
MemoryError (or a kill), and the job names the file with the reason while the
rest of the root is indexed. A fresh interpreter per file, not a fork: Celery's
prefork workers are daemonic and may not fork pools, and a fresh process holds
no database connection or secret of the parent (its environment is emptied).
"""

import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

from sources.extract.types import Anchor, Extracted, ExtractionRefused, Limits

# The directory holding the ``sources`` package: the child imports it from there and nothing from the environment.
_PROJECT = str(Path(__file__).resolve().parents[2])
# Nothing of the parent's environment (no DATABASE_URL, no keys). One BLAS thread: numpy, imported by openpyxl when
# present, reserves buffers per core, and 100 MB of address space was not enough for them on 2 cores.
_CHILD_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
}
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from sources.extract.child import main; main()"


def extract(kind: str, data: bytes, limits: Limits) -> Extracted:
    """The document's text and anchors, or ExtractionRefused with the reason (also for a timeout or a crash)."""
    header = json.dumps({"kind": kind, "max_pages": limits.max_pages, "max_unpacked": limits.max_unpacked_bytes})
    request = struct.pack(">I", len(header)) + header.encode() + data
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _CHILD, _PROJECT, str(limits.max_memory_mb), str(int(limits.timeout_seconds))],
            input=request,
            capture_output=True,
            timeout=limits.timeout_seconds,
            env=_CHILD_ENV,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ExtractionRefused(
            f"extraction took longer than {limits.timeout_seconds:g} s (RAG_EXTRACT_TIMEOUT_SECONDS)"
        ) from None
    if done.returncode != 0:
        raise ExtractionRefused(_crash(done.returncode, done.stderr, limits))
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        raise ExtractionRefused("extraction crashed (unreadable answer from the child process)") from None
    if "refused" in answer:
        raise ExtractionRefused(answer["refused"])
    return Extracted(answer["text"], [Anchor(a[0], a[1], a[2]) for a in answer["anchors"]])


def _crash(code: int, stderr: bytes, limits: Limits) -> str:
    if code in (-signal.SIGKILL, -signal.SIGXCPU):
        return f"extraction killed (over {limits.timeout_seconds:g} s of CPU or {limits.max_memory_mb} MB)"
    if b"MemoryError" in stderr:
        return f"extraction ran out of memory (limit {limits.max_memory_mb} MB, RAG_EXTRACT_MAX_MEMORY_MB)"
    if code < 0:
        return f"extraction crashed (signal {-code})"
    last = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
    return f"extraction failed: {last[0][:300]}"
