"""The child process of sandbox.py: limits first, then one extraction; the answer as JSON on stdout."""

import json
import resource
import struct
import sys

from sources.extract.run import extract_kind
from sources.extract.types import ExtractionRefused, Limits


def main() -> None:
    memory_mb, cpu_seconds = int(sys.argv[2]), int(sys.argv[3])
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # The parent's wall-clock timeout is the limit; this one also holds if the parent dies first.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds + 1, cpu_seconds + 2))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    request = sys.stdin.buffer.read()
    (size,) = struct.unpack(">I", request[:4])
    header = json.loads(request[4 : 4 + size])
    data = request[4 + size :]
    limits = Limits(max_pages=header["max_pages"], max_unpacked_bytes=header["max_unpacked"], max_memory_mb=memory_mb)
    try:
        extracted = extract_kind(header["kind"], data, limits)
        answer = {"text": extracted.text, "anchors": [[a.label, a.start_line, a.end_line] for a in extracted.anchors]}
    except ExtractionRefused as refused:
        answer = {"refused": refused.reason}
    except MemoryError:
        answer = {"refused": f"extraction ran out of memory (limit {memory_mb} MB, RAG_EXTRACT_MAX_MEMORY_MB)"}
    except RecursionError:
        answer = {"refused": "extraction failed: nesting too deep"}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
