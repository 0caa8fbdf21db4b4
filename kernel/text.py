"""Text no part of the product accepts: shared by the request middleware and the API schemas."""

import re

# NUL and the other C0 control characters (and DEL); tab, newline and carriage
# return are text. PostgreSQL refuses NUL in text, so without this a NUL in
# a URL became a 500 naming the database.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def control_characters_message(value: str, where: str) -> str | None:
    """Why ``value`` is refused, or None when it holds no control character."""
    found = CONTROL.search(value)
    if found is None:
        return None
    return (
        f"{where} contains a control character (U+{ord(found.group()):04X}); NUL and control characters are not allowed"
    )
