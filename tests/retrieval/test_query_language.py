import pytest

from kernel.errors import InvalidInput
from retrieval.query_language import Form, ParsedQuery, path_matches, query_parse, text_kept

pytestmark = pytest.mark.unit


def test_plain_words_are_a_search_of_those_words():
    query = query_parse("  how do I roll back a release ")
    assert query.form == Form.SEARCH and query.words == ("how", "do", "I", "roll", "back", "a", "release")
    assert query.search_text == "how do I roll back a release" and not query.narrows_hits


def test_every_operator_fills_its_filter():
    query = query_parse('rollback "exact thing" file:*.py path:docs/** lang:Python kind:document root:django -test')
    assert query == ParsedQuery(
        text='rollback "exact thing" file:*.py path:docs/** lang:Python kind:document root:django -test',
        words=("rollback",),
        exact=("exact thing",),
        paths=("*.py", "docs/**"),
        languages=("python",),  # languages and kinds are lower-case names; roots and paths keep their case
        kinds=("document",),
        roots=("django",),
        excluded=("test",),
        searched=("rollback", "exact thing"),
    )
    assert query.form == Form.SEARCH and query.search_text == "rollback exact thing" and query.narrows_hits


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("sym:F", Form.SYMBOL),
        ("sym:ChangeList.get_filters", Form.SYMBOL),
        (r"re:def \w+_filters", Form.GREP),
        ('"F() per name"', Form.GREP),  # a lone phrase finds lines, as the page always did
        ('"F() per name" lang:python', Form.GREP),
        ('"exact" words', Form.SEARCH),  # with words: chunks that hold the phrase
        ('"one" "two"', Form.SEARCH),
        ("F", Form.SEARCH),
    ],
)
def test_the_form_says_how_a_query_is_answered(text, form):
    assert query_parse(text).form == form


def test_a_regex_runs_to_the_end_of_the_query_with_its_spaces_and_quotes():
    query = query_parse('lang:python re:def \\w+ "x" -y')
    assert query.regex == 'def \\w+ "x" -y' and query.languages == ("python",) and not query.excluded


def test_words_and_phrases_are_searched_in_the_order_typed():
    assert query_parse('what does "F()" mean  here').search_text == "what does F() mean here"


def test_exclusions_of_words_phrases_paths_and_languages():
    query = query_parse('deploy -staging -"old api" -file:tests/** -path:vendor -lang:CSS')
    assert query.words == ("deploy",) and query.excluded == ("staging", "old api")
    assert query.excluded_paths == ("tests/**", "vendor") and query.excluded_languages == ("css",)
    assert query.search_text == "deploy"  # what is left out is never searched for


@pytest.mark.parametrize(
    "text", ["std::vector", "http://example.com/x", "note:", "C++", "--verbose", "a-b", "file:", "lang:", "re:"]
)
def test_what_is_no_operator_stays_a_word(text):
    query = query_parse(text)
    assert query.words == (text,) and query.form == Form.SEARCH and not query.excluded


def test_an_operator_with_nothing_after_it_is_a_word_of_a_sentence():
    query = query_parse("Error: file: not found")
    assert query.words == ("Error:", "file:", "not", "found") and not query.paths


def test_a_filter_given_twice_keeps_both_once():
    assert query_parse("x lang:go lang:rust lang:go").languages == ("go", "rust")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('x lang:""', "lang: needs a value"),
        ('sym:""', "sym: needs a value"),
        ("-kind:skill x", "-kind: cannot be negated"),
        ("-root:a x", "-root: cannot be negated"),
        ("-sym:a", "-sym: cannot be negated"),
        ("-re:a", "-re: cannot be negated"),
        ("sym:a sym:b", "sym: takes one name"),
        ("sym:a re:b", "re: and sym: cannot be combined"),
    ],
)
def test_what_cannot_run_is_refused_with_a_reason(text, message):
    with pytest.raises(InvalidInput, match=message) as refused:
        query_parse(text)
    assert refused.value.details["field"] == "query"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "admin/views.py", True),  # "*" crosses "/", as grep's glob
        ("*.py", "admin/views.pyc", False),
        ("docs/**", "docs/api/search.md", True),
        ("docs/*", "src/docs/x.md", False),  # a glob matches the whole path
        ("views", "admin/views.py", True),  # without glob characters: a piece of the path
        ("VIEWS", "admin/views.py", True),
        ("*.PY", "admin/views.py", True),
    ],
)
def test_path_filters_are_globs_or_pieces_of_the_path_letter_case_aside(pattern, path, matches):
    assert path_matches(pattern, path) is matches


def test_a_hit_is_kept_when_it_passes_every_filter():
    query = query_parse('"Roll Back" deploy file:*.md -staging -lang:css')
    assert text_kept(query, text="To roll back a deploy, revert the tag.", path="docs/ops.md", language="markdown")
    assert not text_kept(query, text="To roll out a deploy.", path="docs/ops.md", language="markdown")  # no phrase
    assert not text_kept(query, text="Roll back staging first.", path="docs/ops.md", language="markdown")
    assert not text_kept(query, text="roll back", path="staging/ops.md", language="markdown")  # excluded by path
    assert not text_kept(query, text="roll back", path="ops.py", language="python")  # not *.md
    css = query_parse('"roll back" -lang:css')
    assert not text_kept(css, text="roll back", path="a.css", language="CSS")


def test_words_are_required_only_when_asked():
    query = query_parse("admin sym:get_queryset")
    assert text_kept(query, text="def get_queryset(self): ...", path="x.py", language="python")
    definition, commented = "def get_queryset(self): ...", "# admin\ndef get_queryset(self):"
    assert not text_kept(query, text=definition, path="x.py", language="python", words_required=True)
    assert text_kept(query, text=commented, path="x.py", language="python", words_required=True)
