"""The literals a grep pattern requires (retrieval/grep_plan.py): pure, no database.

The plan must never rule out a file RE2 would match in: each test line RE2
matches satisfies every clause, as PostgreSQL's LIKE would judge it.
"""

import re

import pytest
import re2

from retrieval.grep_plan import grep_plan, sql_pattern


def sql_matches(pattern: str, text: str) -> bool:
    """PostgreSQL's LIKE (backslash escapes) over the folded text: ASCII letters lower-cased, as FileText.folded."""
    folded = "".join(char.lower() if char.isascii() else char for char in text)
    like, parts, i = pattern, [], 0
    while i < len(like):
        char = like[i]
        if char == "\\":
            parts.append(re.escape(like[i + 1]))
            i += 2
            continue
        parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
        i += 1
    return re.fullmatch("".join(parts), folded, re.DOTALL) is not None


def test_a_literal_is_one_clause_and_case_folding_partners_are_any_character():
    plan = grep_plan(pattern="Cannot resolve keyword", regex=False, case_sensitive=False)
    assert plan.clauses == (("%cannot re_olve _eyword%",),)
    exact = grep_plan(pattern="50%_Off", regex=False, case_sensitive=True)
    assert exact.clauses == (("%50\\%\\_off%",),)
    # A non-ASCII letter's other case may differ in length: any run of characters, unless case matters.
    assert grep_plan(pattern="Übermut", regex=False, case_sensitive=False).clauses == (("%bermut%",),)
    assert grep_plan(pattern="Übermut", regex=False, case_sensitive=True).clauses == (("%Übermut%",),)


def test_a_regex_requires_the_literals_around_its_unknown_parts():
    assert grep_plan(pattern=r"def get_\w*queryset", regex=True, case_sensitive=False).clauses == (
        ("%def get\\_%",),
        ("%query_et%",),
    )
    # A regex's literals are matched ignoring case: it may turn case folding on inside itself.
    assert grep_plan(pattern=r"TODO|FIXME", regex=True, case_sensitive=True).clauses == (("%fixme%", "%todo%"),)
    assert grep_plan(pattern=r"ab[cd]ef", regex=True, case_sensitive=True).clauses == (("%abcef%", "%abdef%"),)
    assert grep_plan(pattern=r"x{3}", regex=True, case_sensitive=True).clauses == (("%xxx%",),)


@pytest.mark.parametrize(
    "pattern",
    [".*", "a", "==", r"abx*cd", r"(foo|x)y?", r"[[:alpha:]]oops", r"\pLfoo", r"\Qfoo\E", r"(?U)foo+"],
)
def test_a_pattern_without_three_known_letters_in_a_row_or_one_python_reads_otherwise_has_no_plan(pattern):
    assert not grep_plan(pattern=pattern, regex=True, case_sensitive=False).indexed


LINES = [
    "def get_queryset(self):",
    "    def get_QuerySet_for(self, request):",
    "raise FieldError('Cannot resolve keyword %r into field.')",
    "CANNOT RESOLVE KEYWORD",
    "Cannot reſolve \u212aeyword",  # the long s and the Kelvin sign fold onto s and k
    "TODO: fix; FIXME later",
    "abxxxcd abcd abdef",
    "xxxx yyy",
    "naïve café",
    "",
]
PATTERNS = [
    ("Cannot resolve keyword", False),
    ("def get_", False),
    ("naïve", False),
    ("CAFÉ", False),
    (r"def get_\w*queryset", True),
    (r"(?i)get_queryset", True),
    (r"TODO|FIXME", True),
    (r"ab(x+)?cd", True),
    (r"ab[cd]ef", True),
    (r"x{3,}", True),
    (r"^\s*def \w+\(", True),
    (r"(Cannot|Can't) resolve", True),
    (r"caf[eé]", True),
]


@pytest.mark.parametrize(("pattern", "regex"), PATTERNS)
@pytest.mark.parametrize("case_sensitive", [False, True])
def test_every_line_re2_matches_satisfies_every_clause(pattern, regex, case_sensitive):
    options = re2.Options()
    options.case_sensitive, options.literal = case_sensitive, not regex
    compiled = re2.compile(pattern, options)
    plan = grep_plan(pattern=pattern, regex=regex, case_sensitive=case_sensitive)
    matched = [line for line in LINES if compiled.search(line)]
    for line in matched:
        for clause in plan.clauses:
            assert any(sql_matches(sql, line) for sql in clause), (line, clause)


def test_a_nul_in_a_regex_is_any_character_in_sql_which_takes_none():
    assert grep_plan(pattern=r"\x00abc", regex=True, case_sensitive=True).clauses == (("%_abc%",),)


def test_sql_patterns_escape_what_is_special_to_them():
    assert sql_pattern("100%_\\", insensitive=False) == "%100\\%\\_\\\\%"
    assert sql_pattern("A.b(c)*%", insensitive=True) == "%a.b(c)*\\%%"


TEXTS = [
    "",
    "\n",
    "def get_queryset(self):\r\n    return x\r\n\r\n",
    "naïve café\nCannot reſolve keyword\n\nTODO end",
    "a\n\n\nab\nabc\n",
    "xxx yyy\nabxxxcd\n\n",
]


@pytest.mark.parametrize(
    ("pattern", "regex"),
    [*PATTERNS, ("", True), ("^", True), ("$", True), (r"^$", True), (r"\s*$", True), (r"[^x]+", True), ("a", False)],
)
@pytest.mark.parametrize("text", TEXTS)
def test_the_whole_file_scan_finds_exactly_the_lines_each_line_tried_finds(pattern, regex, text):
    from retrieval.grep import _lines_each, _lines_scanned, grep_matcher

    matcher = grep_matcher(pattern=pattern, regex=regex, case_sensitive=False)
    assert matcher.scan is not None
    assert list(_lines_scanned(text, matcher)) == list(_lines_each(text, matcher))
