"""A document's extracted text at read time: what read, grep and the viewer serve instead of its raw bytes.

The text is extracted again from the file on disk, by the indexer's own
extractor in its sandbox (time, memory and page limits), not stored at
index time. Measured on this machine (2 cores): a 3-page PDF takes 0.21 s,
a 200-page one (430 KB, 320,000 characters) 0.79 s, most of it the child
interpreter starting. Storing the text instead would keep a second copy of
every document beside its chunks, in a new column, for files that are
read far less often than they are searched. Re-extracting also keeps one
truth: the same bytes through the same extractor give the same lines the
chunks cite, and a file changed since indexing is reported stale like any
other. A small cache keyed by the bytes' hash and the extractor's identity
spares a person paging through the viewer, or a grep run twice, the child
process.
"""

import hashlib
import threading
from collections import OrderedDict

from sources.extract import Extracted, ExtractionRefused, Limits, extractor_for
from sources.extract.html import html_document
from sources.extract.sandbox import extract
from sources.sensitive import secret_found

# Characters of extracted text kept per process: about 20 large reports; an entry larger than this is not kept.
CACHE_CHARS = 8_000_000
_cache: OrderedDict[tuple[str, str], Extracted] = OrderedDict()
_cache_chars = 0
_lock = threading.Lock()


def is_document(path: str, raw: bytes) -> bool:
    """Whether indexing extracted this file (as sources/roots.py decides): an HTML fragment or template is text."""
    extractor = extractor_for(path)
    return extractor is not None and (extractor.kind != "html" or html_document(raw))


def document_text(path: str, raw: bytes, *, limits: Limits, scan_secrets: bool) -> Extracted | str:
    """The document's extracted text and its anchors, or why it cannot be served (the indexer's reasons)."""
    extractor = extractor_for(path)
    assert extractor is not None  # callers ask is_document first
    key = (hashlib.sha256(raw).hexdigest(), extractor.identity)
    extracted = _cached(key)
    if extracted is None:
        try:
            extracted = extract(extractor.kind, raw, limits)
        except ExtractionRefused as refused:
            return refused.reason
        _keep(key, extracted)
    if scan_secrets and (secret := secret_found(extracted.text)):
        return f"contains a secret ({secret})"
    return extracted


def _cached(key: tuple[str, str]) -> Extracted | None:
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
        return found


def _keep(key: tuple[str, str], extracted: Extracted) -> None:
    global _cache_chars
    size = len(extracted.text)
    if size > CACHE_CHARS:
        return
    with _lock:
        if key in _cache:
            return
        _cache[key] = extracted
        _cache_chars += size
        while _cache_chars > CACHE_CHARS:
            _, dropped = _cache.popitem(last=False)
            _cache_chars -= len(dropped.text)
