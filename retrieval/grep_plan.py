"""What a grep pattern needs of a file's text, as trigram-indexable SQL patterns. Pure Python, no Django.

A line matching the pattern holds, for every clause of the plan, at least
one of the clause's literals (an AND of ORs, as Google's codesearch and
zoekt derive from a regex). The plan is conservative: a file without them
cannot match, so the index rules it out; every file it lets through is
checked line by line by RE2 (retrieval/grep.py). A regex is read with
Python's parser (RE2's syntax is close to it); a pattern it cannot read, or
reads with a warning (``[[:alpha:]]``, RE2's own escapes), gets no plan and
is scanned, never guessed at.

A clause is kept only when every literal has three letters or digits in a
row: pg_trgm's GIN index serves such a pattern; a shorter one it can only
scan (``.*``, ``a``, ``==`` have no usable plan). Every clause is a LIKE
pattern over the stored text with its ASCII letters lower-cased
(sources.models.FileText.folded), so letter case aside costs no ILIKE or
``~*``, which fold each candidate's whole text again per query: rechecking
the candidates, LIKE on the folded text ran 5-8 times faster on Django's
source.
"""

import re
import warnings
from dataclasses import dataclass, field
from itertools import product
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]

_MAX_EXACT = 16  # alternatives one sub-pattern may expand to (ab[cd] is 2) before only its clauses are kept
_MAX_CLASS = 4  # characters of a class kept as alternatives ([xy] yes, [a-z] no)
_TRIGRAM = re.compile(r"[^\W_]{3}")  # pg_trgm's words are letters and digits
# Under case-insensitive matching RE2 folds k and s onto non-ASCII letters too (the Kelvin sign, the long s),
# which the folded text keeps as they are: each is any one character in a pattern. A non-ASCII character, which
# the folded text keeps in its case, is any run of characters (its other case may differ in length). A NUL (a
# regex's \x00) is any character: PostgreSQL takes none in a pattern, and no stored text holds one.
_FOLDS_WIDER = frozenset("ksKS")


@dataclass(frozen=True, slots=True)
class GrepPlan:
    """The SQL patterns every file holding a match satisfies: all clauses, one pattern of each."""

    clauses: tuple[tuple[str, ...], ...]  # LIKE patterns over the folded text

    @property
    def indexed(self) -> bool:
        """Whether the index can narrow the files (else they are scanned)."""
        return bool(self.clauses)


def grep_plan(*, pattern: str, regex: bool, case_sensitive: bool) -> GrepPlan:
    """The plan of an RE2 pattern (``regex``) or a literal one; its clauses empty when no trigram narrows it."""
    if not regex:
        return _plan([(pattern,)], insensitive=not case_sensitive)
    parsed = _parsed(pattern)
    if parsed is None:
        return GrepPlan(())
    info = _sequence(list(parsed))
    # A regex may turn case folding on inside itself ((?i)): its literals are always matched ignoring case.
    return _plan(info.required(), insensitive=True)


def sql_pattern(literal: str, *, insensitive: bool) -> str:
    """A LIKE pattern (backslash escapes) matching any folded text (ASCII letters lower-cased) whose text holds
    ``literal``, letter case aside with ``insensitive`` (RE2's folding), else exactly."""
    out = ["%"]
    for char in literal:
        if char == "\x00" or (insensitive and char in _FOLDS_WIDER):
            out.append("_")
        elif not char.isascii() and insensitive:
            if out[-1] != "%":  # a wildcard, not an escaped "\\%"
                out.append("%")
        elif char in "\\%_":
            out.append("\\" + char)
        else:
            out.append(char.lower() if char.isascii() else char)
    return "".join(out) + ("" if out[-1] == "%" else "%")


def _plan(clauses: list[tuple[str, ...]], *, insensitive: bool) -> GrepPlan:
    kept = []
    for clause in clauses:
        likes = tuple(sorted({sql_pattern(literal, insensitive=insensitive) for literal in clause}))
        if likes and all(_TRIGRAM.search(like) for like in likes):
            kept.append(likes)
    return GrepPlan(tuple(sorted(set(kept))))


def _parsed(pattern: str) -> list | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. "possible nested set": RE2 reads [[:alpha:]] another way
            return list(sre_parse.parse(pattern))
    except (re.error, Warning, RecursionError, OverflowError, ValueError):
        return None


@dataclass(slots=True)
class _Info:
    """What one sub-pattern tells: ``exact``, the strings it matches (None: too many or unknown); ``clauses``,
    literals one of which every match holds."""

    exact: set[str] | None
    clauses: list[tuple[str, ...]] = field(default_factory=list)

    def required(self) -> list[tuple[str, ...]]:
        clauses = list(self.clauses)
        if self.exact is not None and "" not in self.exact:
            clauses.append(tuple(self.exact))
        return clauses


_ANY = _Info(None)  # one unknown character, or anything


def _sequence(items: list) -> _Info:
    """A concatenation: runs of exactly known parts grow together ("def get_"), an unknown part ends a run."""
    clauses: list[tuple[str, ...]] = []
    run: set[str] = {""}  # the strings the current run of known parts matches
    known = True
    for op, arg in items:
        node = _node(op, arg)
        clauses += node.clauses
        if node.exact is None:
            clauses += _Info(run).required()
            run, known = {""}, False
        elif len(run) * len(node.exact) <= _MAX_EXACT:
            run = {a + b for a, b in product(run, node.exact)}
        else:
            clauses += _Info(run).required()
            run, known = set(node.exact), False
    if known:
        return _Info(run, clauses)
    return _Info(None, clauses + _Info(run).required())


def _node(op, arg) -> _Info:
    if op is sre.LITERAL:
        return _Info({chr(arg)})
    if op is sre.AT:
        return _Info({""})  # an anchor is zero-width
    if op is sre.SUBPATTERN:
        return _sequence(list(arg[-1]))
    if op is sre.BRANCH:
        return _either([_sequence(list(branch)) for branch in arg[1]])
    if op is sre.IN:
        return _class(arg)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)):
        low, high, item = arg
        return _repeat(_sequence(list(item)), low, high)
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return _sequence(list(arg))
    return _ANY  # ANY, NOT_LITERAL, CATEGORY and whatever else: nothing known


def _class(items: list) -> _Info:
    if len(items) <= _MAX_CLASS and all(op is sre.LITERAL for op, _ in items):
        return _Info({chr(code) for _, code in items})
    return _ANY


def _either(branches: list[_Info]) -> _Info:
    if all(b.exact is not None for b in branches):
        union: set[str] = set().union(*(b.exact for b in branches if b.exact is not None))
        if len(union) <= _MAX_EXACT:
            return _Info(union)
    # (A1 and A2) or (B1 and B2) implies (A1 or B1): one clause of each branch, the longest-literal one, joined.
    best = []
    for branch in branches:
        clauses = [c for c in branch.required() if c]
        if not clauses:
            return _ANY  # a branch that requires nothing: the alternation requires nothing
        best.append(max(clauses, key=lambda clause: min(len(literal) for literal in clause)))
    return _Info(None, [tuple(sorted({literal for clause in best for literal in clause}))])


def _repeat(item: _Info, low: int, high: int) -> _Info:
    if low == 0:
        return _ANY  # may match nothing, or anything: requires nothing
    if item.exact is not None and len(item.exact) ** min(low, 8) <= _MAX_EXACT and low <= 64:
        repeated = {"".join(parts) for parts in product(sorted(item.exact), repeat=low)}
        if low == high:
            return _Info(repeated, list(item.clauses))
        return _Info(None, list(item.clauses) + ([tuple(repeated)] if "" not in repeated else []))
    return _Info(None, item.required())
