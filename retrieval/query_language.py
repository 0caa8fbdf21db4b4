"""The query language every surface speaks (the page, ``/api/v1/search``, MCP), parsed once, here.

As zoekt's and GitHub's code search spell it:

- words: searched as ever (lexical and meaning);
- ``"exact text"``: a hit must hold these characters, letter case aside; alone, it finds lines like grep;
- ``sym:NAME``: the code that defines ``NAME`` (``ChangeList.get_filters`` too);
- ``re:PATTERN``: lines matching an RE2 regex, like grep; the pattern runs to the end of the query, spaces
  included, so filters go before it (``lang:python re:def \\w+_filters``);
- ``file:GLOB`` / ``path:GLOB``: the hit's path matches the glob (``*.py``, ``docs/**``), or holds the text when
  it has no ``*``, ``?`` or ``[``; letter case aside;
- ``lang:NAME``, ``kind:KIND``, ``root:NAME``: the hit's language, kind of source, workspace root;
- ``-word``, ``-"some text"``: leave out hits whose text or path holds it; ``-file:GLOB`` and ``-lang:NAME``
  leave out those paths and languages.

A filter given twice widens (``lang:go lang:rust``: either); different filters narrow (all must hold). A word
followed by a colon that is no operator (``std::vector``, ``http://x``) is a word, and so is an operator with
nothing after it (``Error: file: not found``, or ``lang:`` while it is being typed). Django-free: what a filter
means (which kinds exist, which roots one may see) is decided by the search that runs the query
(retrieval/querying.py).
"""

import enum
import fnmatch
import re
from dataclasses import dataclass

from kernel.errors import InvalidInput

# Operators whose value is one token (or a quoted phrase): what each fills.
_FILTERS = {"file": "paths", "path": "paths", "lang": "languages", "kind": "kinds", "root": "roots", "sym": "symbol"}
# Those that a leading "-" turns into an exclusion.
_NEGATABLE = {"file": "excluded_paths", "path": "excluded_paths", "lang": "excluded_languages"}
# One token: an optional "-", an optional operator, then a quoted phrase or a run of non-spaces.
_TOKEN = re.compile(r'(?P<neg>-)?(?:(?P<op>[a-z]+):)?(?:"(?P<phrase>[^"]*)"|(?P<word>\S+))')


class Form(enum.StrEnum):
    """How a query is answered: ranked chunks (``search``, ``symbol``) or matching lines (``grep``)."""

    SEARCH = "search"
    SYMBOL = "symbol"
    GREP = "grep"


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """A query's free words and its filters; ``text`` is what was typed."""

    text: str
    words: tuple[str, ...] = ()
    exact: tuple[str, ...] = ()
    symbol: str = ""
    regex: str = ""
    paths: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    excluded_paths: tuple[str, ...] = ()
    excluded_languages: tuple[str, ...] = ()
    # The words and phrases in the order typed: what the channels search (word order matters to the embedding).
    searched: tuple[str, ...] = ()

    @property
    def form(self) -> Form:
        """``re:`` and a lone ``"exact text"`` find lines; ``sym:`` definitions; anything else a search."""
        if self.regex:
            return Form.GREP
        if self.symbol:
            return Form.SYMBOL
        if len(self.exact) == 1 and not self.words:
            return Form.GREP
        return Form.SEARCH

    @property
    def search_text(self) -> str:
        """What the channels search: the words and the exact phrases (a chunk holding a phrase holds its words), in
        the order typed."""
        return " ".join(self.searched)

    @property
    def narrows_hits(self) -> bool:
        """Whether some filter is checked on each hit (so a search must look past its first ``k``)."""
        return bool(
            self.exact
            or self.paths
            or self.languages
            or self.excluded
            or self.excluded_paths
            or self.excluded_languages
        )


def query_parse(text: str) -> ParsedQuery:
    """``text`` as words and filters; ``InvalidInput`` (422) for what cannot be run: an empty quoted value, ``sym:``
    twice, a negated ``kind:``, ``root:``, ``sym:`` or ``re:``."""
    text = text.strip()
    fields: dict[str, list[str]] = {}
    symbol = ""
    regex: str | None = None
    searched: list[str] = []
    for token in _TOKEN.finditer(text):
        negated, op, phrase, word = token["neg"], token["op"], token["phrase"], token["word"]
        value = phrase if phrase is not None else word
        if op == "re":
            if negated:
                raise InvalidInput("-re: cannot be negated; leave lines out with -word", details={"field": "query"})
            # A regex holds spaces and quotes: the pattern is the rest of the query.
            regex = text[token.start() + len("re:") :].strip()
            if not regex:
                raise InvalidInput(f"re: needs a pattern, e.g. {_EXAMPLES['re']}", details={"field": "query"})
            break
        if negated and value.startswith("-"):
            negated, value = None, token.group(0)  # --verbose: an option's name, not an exclusion
        if op is not None and op not in _FILTERS:
            # Not an operator (``std::vector``, ``note:``): the token is a word, as typed.
            op, value = None, token.group(0).removeprefix("-") if negated else token.group(0)
        if op is None:
            if negated and not value.strip():
                continue  # a lone "-" (or -"") leaves nothing out
            if negated:
                fields.setdefault("excluded", []).append(value)
            elif phrase is not None:
                if phrase.strip():
                    fields.setdefault("exact", []).append(phrase)
                    searched.append(phrase)
            else:
                fields.setdefault("words", []).append(value)
                searched.append(value)
            continue
        if not value.strip():
            raise InvalidInput(f"{op}: needs a value, e.g. {_EXAMPLES[op]}", details={"field": "query"})
        if negated:
            if op not in _NEGATABLE:
                raise InvalidInput(
                    f'-{op}: cannot be negated; only words, "exact text", -file:, -path: and -lang: can',
                    details={"field": "query"},
                )
            fields.setdefault(_NEGATABLE[op], []).append(_folded(op, value))
        elif op == "sym":
            if symbol and symbol != value:
                raise InvalidInput("sym: takes one name; the query has two", details={"field": "query"})
            symbol = value
        else:
            fields.setdefault(_FILTERS[op], []).append(_folded(op, value))
    if regex is not None and symbol:
        raise InvalidInput(
            "re: and sym: cannot be combined: one finds lines, the other definitions", details={"field": "query"}
        )
    return ParsedQuery(
        text=text,
        symbol=symbol,
        regex=regex or "",
        searched=tuple(searched),
        **{name: tuple(dict.fromkeys(values)) for name, values in fields.items()},
    )


def words_only(text: str) -> ParsedQuery:
    """``text`` as words alone, no filter read into it: what an evaluation's natural-language queries are (a quote or
    a ``-`` in a docstring is no operator there)."""
    return ParsedQuery(text=text, words=(text,), searched=(text,))


_EXAMPLES = {
    "file": "file:*.py",
    "path": "path:docs/**",
    "lang": "lang:python",
    "kind": "kind:document",
    "root": "root:django",
    "sym": "sym:get_queryset",
    "re": "re:def \\w+_queryset",
}


def _folded(op: str, value: str) -> str:
    # Kinds and languages are lower-case names; a root's name and a path keep their case (matched case-aside later).
    return value.lower() if op in ("kind", "lang") else value


_GLOB_CHARACTERS = re.compile(r"[*?\[]")


def path_matches(pattern: str, path: str) -> bool:
    """A glob (``*.py``, ``docs/**``; ``*`` crosses ``/``, as grep's ``glob``) matches the whole path, letter case
    aside; a pattern with no ``*``, ``?`` or ``[`` is a piece of it (``file:views`` finds ``admin/views.py``)."""
    if _GLOB_CHARACTERS.search(pattern):
        return fnmatch.fnmatchcase(path.casefold(), pattern.casefold())
    return pattern.casefold() in path.casefold()


def text_kept(query: ParsedQuery, *, text: str, path: str, language: str, words_required: bool = False) -> bool:
    """Whether a hit (a chunk, or a line found by grep) passes ``query``'s filters: every exact phrase (and with
    ``words_required`` every word) in its text, no excluded text in its text or path, its path and language among
    those asked for and not among those left out. Letter case aside throughout."""
    folded, folded_path, folded_language = text.casefold(), path.casefold(), language.casefold()
    required = (*query.exact, *query.words) if words_required else query.exact
    if any(piece.casefold() not in folded for piece in required):
        return False
    if any(piece.casefold() in folded or piece.casefold() in folded_path for piece in query.excluded):
        return False
    if query.paths and not any(path_matches(pattern, path) for pattern in query.paths):
        return False
    if any(path_matches(pattern, path) for pattern in query.excluded_paths):
        return False
    if query.languages and folded_language not in query.languages:
        return False
    return folded_language not in query.excluded_languages
