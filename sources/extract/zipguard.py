"""The zip-bomb guard: DOCX, PPTX and XLSX are zip files, checked by their directory before any parser opens them."""

import io
import zipfile

from sources.extract.types import ExtractionRefused, Limits

# Office XML compresses 5-30x; 200x holds only for runs of one byte, which is what a bomb is made of.
MAX_RATIO = 200
# Below this many unpacked bytes no ratio can hurt, and a small file full of empty cells may still be real.
RATIO_FROM_BYTES = 16 * 1024 * 1024
MAX_MEMBERS = 10_000


def zip_check(data: bytes, limits: Limits, *, kind: str) -> None:
    """Refuse a container whose declared contents are too large, too compressed, or too many."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ExtractionRefused(f"not a valid {kind} (not a zip file: {exc})") from None
    if len(members) > MAX_MEMBERS:
        raise ExtractionRefused(f"zip bomb guard: {len(members):,} members in one {kind} (limit {MAX_MEMBERS:,})")
    unpacked = sum(m.file_size for m in members)
    packed = sum(m.compress_size for m in members) or 1
    if unpacked > limits.max_unpacked_bytes:
        raise ExtractionRefused(
            f"zip bomb guard: {unpacked:,} bytes unpacked, over the limit of {limits.max_unpacked_bytes:,}"
        )
    if unpacked > RATIO_FROM_BYTES and unpacked / packed > MAX_RATIO:
        raise ExtractionRefused(
            f"zip bomb guard: {unpacked:,} bytes unpacked from {packed:,} "
            f"(ratio {unpacked // packed}, limit {MAX_RATIO})"
        )
