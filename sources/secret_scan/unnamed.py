"""A key with neither a name nor a prefix: an AWS secret access key on its own.

An AWS secret access key is 40 characters of base64 (30 random bytes) with
no marker of its own; beside an ``aws_...secret`` name the shapes find it.
Alone (a pasted credentials line, a key in a list), only its shape and its
randomness mark it, and 40-character strings are everywhere: SHA-1 commit
ids (hex), long CamelCase identifiers, paths, the last line of a wrapped
base64 block. So a candidate is a whole token of exactly 40 characters (not
cut out of a longer run, a path, a dotted or dashed name), holds upper case,
lower case and digits (hex fails), changes character class as often as a
random string does and is as random by entropy (identifiers and paths fail),
and is not the tail of a base64 block (PEM certificates, MIME).
"""

import string

from sources.secret_scan.values import placeholder, shannon

LABEL = "AWS secret access key"

KEY_LENGTH = 40
# Measured over 100,000 keys of 30 random bytes: entropy median 4.78 bits per
# character, 0.04% at or below 4.3; class changes (upper/lower/digit/symbol
# between neighbours) median 25, 0.1% below 16. Paths and CamelCase names of 40
# characters score 3.8-4.47 and 5-15 (hipResViewFormatUnsignedBlockCompressed1:
# 4.34 and 13; Users/JohnSmith/Documents/Projects2024/x: 4.27 and 15).
BARE_KEY_ENTROPY = 4.3
BARE_KEY_CLASS_CHANGES = 16

# The scan runs over every file: rather than a regex tried at every position
# (it doubled the whole scan's time over 400 MB of packages), the text's bytes
# are mapped to "k" (a key character) or " " (anything else) and runs of 40
# are found with bytes.find, which skips ahead in C.
_KEY_CHARACTERS = (string.ascii_letters + string.digits + "/+").encode()
_MAP = bytes(ord("k") if byte in _KEY_CHARACTERS else ord(" ") for byte in range(256))
_RUN = b"k" * KEY_LENGTH
# A neighbour that makes the run part of a longer name: a.b, x-y, snake_case, a\path; "=" after is base64 padding.
_JOINED_BEFORE = frozenset(b"_.-\\")
_JOINED_AFTER = frozenset(b"_.-\\=")
_BASE64_LINE_MIN = 60


def bare_key_found(text: str) -> bool:
    data = text.encode("utf-8", "surrogatepass")
    mapped = data.translate(_MAP)
    at = 0
    while (start := mapped.find(_RUN, at)) >= 0:
        end = mapped.find(b" ", start + KEY_LENGTH)
        end = len(mapped) if end < 0 else end
        at = end
        if (
            end - start == KEY_LENGTH
            and (start == 0 or data[start - 1] not in _JOINED_BEFORE)
            and (end == len(data) or data[end] not in _JOINED_AFTER)
            and _random_key(data[start:end].decode("ascii"))
            and not _block_tail(data, start)
        ):
            return True
    return False


def _random_key(candidate: str) -> bool:
    return (
        any(c.isupper() for c in candidate)
        and any(c.islower() for c in candidate)
        and any(c.isdigit() for c in candidate)
        and _class_changes(candidate) >= BARE_KEY_CLASS_CHANGES
        and shannon(candidate) > BARE_KEY_ENTROPY
        and not placeholder(candidate)
    )


def _class_changes(value: str) -> int:
    classes = ["u" if c.isupper() else "l" if c.islower() else "d" if c.isdigit() else "s" for c in value]
    return sum(a != b for a, b in zip(classes, classes[1:], strict=False))


def _block_tail(data: bytes, start: int) -> bool:
    """The token starts its line, and the line above is a full-width base64 line: the end of a wrapped block."""
    line_start = data.rfind(b"\n", 0, start)
    if line_start < 0 or data[line_start + 1 : start].strip():
        return False
    above = data[data.rfind(b"\n", 0, line_start) + 1 : line_start].strip().rstrip(b"=")
    return len(above) >= _BASE64_LINE_MIN and b" " not in above.translate(_MAP)
