"""Counts in words, for every message a person reads: "1 chunk", "2 chunks", "1 memory", "12,345 files"."""


def counted(n: int, one: str, many: str = "") -> str:
    """``n`` with its noun, singular for exactly one (``many``: the plural when it is not ``one`` + "s")."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"
