"""The content scan: does a text hold a credential, and which detector says so.

Pure Python (no Django): the walker runs it on every file it reads. A file
that holds a credential is kept out of the index; the reason names the
detector, never the secret.
"""

from sources.secret_scan.assignments import (
    HIGH_ENTROPY,
    LITERALS,
    PASSWORD,
    URL,
    URL_LITERALS,
    assignment_found,
    url_credentials_found,
)
from sources.secret_scan.shapes import SHAPES
from sources.secret_scan.unnamed import LABEL as BARE_KEY
from sources.secret_scan.unnamed import bare_key_found

# Every reason the scan can give: detector names only, never a matched value.
DETECTOR_LABELS = frozenset({shape.label for shape in SHAPES} | {URL, PASSWORD, BARE_KEY, *HIGH_ENTROPY.values()})


def secret_found(text: str) -> str | None:
    """What kind of key or credential the text contains, or None."""
    lowered = text.lower()
    for shape in SHAPES:
        haystack = lowered if shape.nocase else text
        if any(literal in haystack for literal in shape.literals) and shape.found(text):
            return shape.label
    if any(literal in text for literal in URL_LITERALS) and url_credentials_found(text):
        return URL
    if any(literal in lowered for literal in LITERALS) and (found := assignment_found(text, lowered)):
        return found
    # Last: a key with no name around it, found by its shape alone.
    return BARE_KEY if bare_key_found(text) else None
