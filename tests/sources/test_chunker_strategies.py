"""A version per chunking strategy (issue 40 item 3): each path's chunker identity, and what a bump reaches."""

from dataclasses import replace

import pytest

from sources.chunking import STRATEGIES, chunk_text, chunker_identity, chunker_reads, language_for, strategy_identity
from sources.chunking.strategies import MAX_CHARS, OVERLAP, strategy_for
from sources.chunking.treesitter import LANGUAGES
from sources.extract import EXTRACTORS

pytestmark = pytest.mark.unit

FAMILIES = {
    "markdown": ["README.md", "guide.markdown", "page.mdx", "notes.mdown", "UPPER.MD"],
    "code-python": ["app.py", "stubs.pyi"],
    "notebook": ["analysis.ipynb"],
    "structured": ["package.json", "compose.yaml", "ci.yml", "pyproject.toml"],
    "window": ["notes.txt", "Makefile", "index.rst", "data.log", "page.html", ".env.example"],
}


def head(identity: str) -> str:
    return identity.split("+")[0].split(":")[0]


@pytest.mark.parametrize(("strategy", "path"), [(s, p) for s, paths in FAMILIES.items() for p in paths])
def test_each_suffix_family_maps_to_its_strategy(strategy, path):
    assert head(chunker_identity(path)) == strategy
    assert chunker_identity(path) == strategy_identity(strategy)


@pytest.mark.parametrize("suffix", sorted(LANGUAGES))
def test_each_tree_sitter_suffix_has_its_grammars_own_strategy(suffix):
    identity = chunker_identity(f"src/main{suffix}")
    assert identity == f"code-{LANGUAGES[suffix]}:1+code:1+window:1"


@pytest.mark.parametrize("suffix", sorted(EXTRACTORS))
def test_an_extracted_document_is_chunked_as_a_document_whatever_its_suffix(suffix):
    assert chunker_identity(f"report{suffix}", document=True) == "document:1+markdown:1+window:1"
    assert chunker_identity("notes.md", document=True) == chunker_identity(f"report{suffix}", document=True)


def test_every_language_chunk_text_dispatches_on_has_a_registered_strategy():
    languages = {language_for(p) for paths in FAMILIES.values() for p in paths} | set(LANGUAGES.values())
    assert {strategy_for(language) for language in languages} <= set(STRATEGIES)
    for strategy in STRATEGIES.values():
        assert set(strategy.uses) <= set(STRATEGIES)


def test_an_identity_names_the_strategy_first_then_those_it_runs_each_once():
    assert strategy_identity("window") == "window:1"
    assert strategy_identity("markdown") == "markdown:1+window:1"
    assert strategy_identity("document") == "document:1+markdown:1+window:1"
    assert strategy_identity("skill") == "skill:1+markdown:1+window:1"
    assert strategy_identity("whole") == "whole:1"
    # An HTML fragment a root reads as text goes through the window, which the document identity holds.
    assert strategy_identity("window") in chunker_identity("page.html", document=True).split("+")


def test_a_strategy_reads_only_the_chunk_settings_it_is_run_with():
    assert chunker_reads(chunker_identity("a.md")) == (MAX_CHARS, OVERLAP)
    assert chunker_reads(chunker_identity("a.pdf", document=True)) == (MAX_CHARS, OVERLAP)
    assert chunker_reads(strategy_identity("skill")) == (MAX_CHARS,)  # markdown at its own overlap
    assert chunker_reads(strategy_identity("whole")) == ()  # a tool or memory: one chunk as written


def test_a_new_markdown_version_changes_what_runs_markdown_and_nothing_else(monkeypatch):
    paths = [p for paths in FAMILIES.values() for p in paths] + ["main.go", "lib.rs"]
    before = {p: chunker_identity(p) for p in paths} | {
        "<document>": chunker_identity("a.pdf", document=True),
        "<skill>": strategy_identity("skill"),
        "<whole>": strategy_identity("whole"),
    }
    monkeypatch.setitem(STRATEGIES, "markdown", replace(STRATEGIES["markdown"], version=2))
    after = {p: chunker_identity(p) for p in paths} | {
        "<document>": chunker_identity("a.pdf", document=True),
        "<skill>": strategy_identity("skill"),
        "<whole>": strategy_identity("whole"),
    }
    changed = {p for p in before if before[p] != after[p]}
    assert changed == set(FAMILIES["markdown"]) | {"<document>", "<skill>"}
    assert after["README.md"] == "markdown:2+window:1"


def test_a_new_window_version_reaches_every_strategy_that_falls_back_to_it(monkeypatch):
    monkeypatch.setitem(STRATEGIES, "window", replace(STRATEGIES["window"], version=2))
    for name in STRATEGIES:
        assert ("window:2" in strategy_identity(name).split("+")) == (name != "whole")


def test_a_new_version_for_one_grammar_leaves_the_other_languages_alone(monkeypatch):
    go = chunker_identity("main.go")
    rust = chunker_identity("lib.rs")
    monkeypatch.setitem(STRATEGIES, "code-go", replace(STRATEGIES["code-go"], version=2))
    assert chunker_identity("main.go") != go and chunker_identity("lib.rs") == rust


def test_the_chunk_language_agrees_with_the_strategy_named():
    """The identity names what chunk_text runs: markdown files come out as markdown, Go as go, text as text."""
    for path, language in [("a.md", "markdown"), ("a.py", "python"), ("a.go", "go"), ("a.txt", "text")]:
        text = "# T\n\nbody\n" if language == "markdown" else "x = 1\n"
        if language == "go":
            text = "package main\n\nfunc main() {}\n"
        assert {c.language for c in chunk_text(text, path)} == {language}
        assert head(chunker_identity(path)) == strategy_for(language)
