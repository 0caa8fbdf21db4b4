"""chunk_text: every strategy cites exact lines, loses no line, never raises."""

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sources.chunking import chunk_text, front_matter_split, language_for

pytestmark = pytest.mark.unit

SHARED = Path(__file__).resolve().parents[3] / "shared"


def assert_well_formed(text: str, chunks, *, max_chars: int, skip_lines: int = 0) -> None:
    lines = text.split("\n")
    covered: set[int] = set()
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        assert chunk.content.strip(), "empty chunk"
        assert len(chunk.content) <= max_chars
        if "char_start" in chunk.metadata:
            assert chunk.start_line == chunk.end_line
            line = lines[chunk.start_line - 1]
            assert chunk.content == line[chunk.metadata["char_start"] : chunk.metadata["char_end"]]
        else:
            assert chunk.content == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    for number, line in enumerate(lines, start=1):
        if number > skip_lines and line.strip():
            assert number in covered, f"line {number} {line[:60]!r} is in no chunk"


any_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=400)
prose_lines = st.one_of(
    st.sampled_from(["", "A sentence ends here.", "Another one!", "no end", "\t tabbed", "x" * 300, "\r", "a\x00b"]),
    any_text,
)
python_lines = st.sampled_from(
    [
        "import os",
        "",
        "# a comment",
        "@decorator",
        "def f(a, b):",
        "    return a + b",
        "class C(Base):",
        '    """Doc."""',
        "    x = 1",
        "    def m(self):",
        "        pass",
        "    @property",
        "async def g():",
        "    await h()",
        "if __name__ == '__main__':",
        "    main()",
        "def broken(:",
        "    " + "y = 1; " * 40,
    ]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(prose_lines, max_size=80), st.integers(min_value=50, max_value=1500), st.integers(0, 400))
def test_plain_text_windows_are_exact_and_complete(lines, max_chars, overlap):
    text = "\n".join(lines)
    chunks = chunk_text(text, "notes.txt", max_chars=max_chars, overlap=overlap)
    assert_well_formed(text, chunks, max_chars=max_chars)
    assert chunk_text(text, "notes.txt", max_chars=max_chars, overlap=overlap) == chunks


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(python_lines, max_size=120), st.integers(min_value=80, max_value=1500))
def test_python_chunks_are_exact_and_complete(lines, max_chars):
    text = "\n".join(lines)
    chunks = chunk_text(text, "module.py", max_chars=max_chars)
    assert_well_formed(text, chunks, max_chars=max_chars)
    assert chunk_text(text, "module.py", max_chars=max_chars) == chunks


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(st.sampled_from(["# H", "## H2", "```", "", "- item", "text.", "---"]), any_text), max_size=60),
    st.integers(min_value=50, max_value=1500),
)
def test_markdown_chunks_are_exact_and_complete(lines, max_chars):
    text = "\n".join(lines)
    chunks = chunk_text(text, "doc.md", max_chars=max_chars)
    front = front_matter_split(text.split("\n")).line_count
    assert_well_formed(text, chunks, max_chars=max_chars, skip_lines=front)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n\t",
        "x" * 2_000_000,
        "a\r\nb\r\n" * 2000,
        "\x00" * 5000,
        "((((" * 10_000,
        "[" * 50_000,
        "{" * 50_000 + "}" * 50_000,
        "مرحبا 世界 " * 3000,
        "def f(:\n" * 500,
    ],
)
@pytest.mark.parametrize("path", ["a.txt", "a.py", "a.md", "a.json", "a.yaml", "a.toml", "a.ts", "a.go", "a.ipynb"])
def test_hostile_input_never_raises(text, path):
    chunks = chunk_text(text, path)
    if not path.endswith(".ipynb"):
        assert_well_formed(text, chunks, max_chars=1500)


def test_crlf_keeps_its_carriage_returns_in_exact_content():
    text = "def f():\r\n    return 1\r\n\r\ndef g():\r\n    return 2\r\n"
    chunks = chunk_text(text, "m.py")
    assert [c.symbol for c in chunks] == ["f", "g"]
    assert chunks[0].content == "def f():\r\n    return 1\r"


PYTHON = '''"""Module doc."""
import os

CONSTANT = 1


# Explains f.
@cache
@other(arg=1)
def f(x):
    return x


class Small:
    """Small doc."""

    def method(self):
        return 1


if __name__ == "__main__":
    f(1)
'''


def test_python_definitions_carry_decorators_comments_and_symbols():
    chunks = chunk_text(PYTHON, "m.py")
    spans = [(c.symbol, c.start_line, c.end_line) for c in chunks]
    assert spans == [("", 1, 4), ("f", 7, 11), ("Small", 14, 18), ("", 21, 22)]
    assert chunks[1].content.startswith("# Explains f.\n@cache")


def test_a_large_python_class_splits_into_header_and_methods():
    methods = "\n".join(f"    def m{i}(self):\n        return {'value' * 40!r}\n" for i in range(12))
    text = 'class Big:\n    """Doc."""\n    limit = 3\n\n' + methods
    chunks = chunk_text(text, "big.py", max_chars=600)
    assert chunks[0].symbol == "Big" and chunks[0].content.startswith("class Big:")
    assert [c.symbol for c in chunks[1:4]] == ["Big.m0", "Big.m1", "Big.m2"]
    assert_well_formed(text, chunks, max_chars=600)


def test_an_oversized_function_is_windowed_and_keeps_its_symbol():
    body = "\n".join(f"    total += {i}  # step {i}" for i in range(300))
    text = f"def long():\n    total = 0\n{body}\n    return total\n"
    chunks = chunk_text(text, "long.py", max_chars=800)
    assert len(chunks) > 3 and {c.symbol for c in chunks} == {"long"}
    assert_well_formed(text, chunks, max_chars=800)


def test_a_python_syntax_error_falls_back_to_the_window():
    chunks = chunk_text("def broken(:\n    pass\n", "b.py")
    assert [(c.symbol, c.start_line, c.end_line) for c in chunks] == [("", 1, 2)]


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        (
            "a.ts",
            (
                "import x from 'y';\n\n// Adds.\nexport const add = (a: number) => a + 1;\n\n"
                "export class Thing {\n  run(): void {}\n}\n\ninterface Shape { area(): number }\n"
            ),
            [("", 1, 1), ("add", 3, 4), ("Thing", 6, 8), ("Shape", 10, 10)],
        ),
        (
            "a.jsx",
            "const App = function () {\n  return <div/>;\n};\nfunction Other() { return null; }\n",
            [("App", 1, 3), ("Other", 4, 4)],
        ),
        (
            "a.go",
            (
                "package main\n\n// Start runs.\nfunc (s *Server) Start() error {\n\treturn nil\n}\n\n"
                "type Server struct{}\n"
            ),
            [("", 1, 1), ("Server.Start", 3, 6), ("Server", 8, 8)],
        ),
        (
            "a.rs",
            (
                "use std::fmt;\n\n/// Doc.\n#[derive(Debug)]\npub struct P { x: i32 }\n\n"
                "impl P {\n    fn new() -> P { P { x: 1 } }\n}\n"
            ),
            [("", 1, 1), ("P", 3, 5), ("P", 7, 9)],
        ),
        ("A.java", "package a;\n\n/** Doc. */\npublic class A {\n  void run() {}\n}\n", [("", 1, 1), ("A", 3, 6)]),
        ("a.c", "#include <stdio.h>\n\n/* Entry. */\nint main(void) {\n  return 0;\n}\n", [("", 1, 1), ("main", 3, 6)]),
        ("a.rb", "# Greets.\ndef hello\n  puts 'hi'\nend\n\nclass K\nend\n", [("hello", 1, 4), ("K", 6, 7)]),
    ],
)
def test_tree_sitter_languages_get_symbols_and_line_ranges(path, text, expected):
    chunks = chunk_text(text, path)
    assert [(c.symbol, c.start_line, c.end_line) for c in chunks] == expected
    assert chunks[0].language == language_for(path)


def test_a_language_without_grammar_uses_the_regex_fallback(monkeypatch):
    from sources.chunking import treesitter

    monkeypatch.setitem(treesitter._parsers, "go", None)
    chunks = chunk_text("package main\n\nfunc main() {\n}\n\nfunc other() {\n}\n", "a.go")
    assert [(c.symbol, c.start_line, c.end_line) for c in chunks] == [("", 1, 1), ("main", 3, 4), ("other", 6, 7)]


def test_large_json_splits_by_top_level_key():
    data = {"alpha": {"x": list(range(200))}, "beta": "b" * 900, "gamma": [{"k": i} for i in range(50)]}
    text = json.dumps(data, indent=2)
    chunks = chunk_text(text, "d.json", max_chars=1500)
    assert {c.symbol for c in chunks} >= {"alpha", "beta", "gamma"}
    assert_well_formed(text, chunks, max_chars=1500)
    small = chunk_text('{"a": 1}', "s.json")
    assert [(c.symbol, c.start_line) for c in small] == [("", 1)]


def test_yaml_and_toml_split_by_top_level_key():
    yaml_text = "\n".join(f"key{i}:\n  - {'v' * 60}\n  - {'w' * 60}" for i in range(20))
    chunks = chunk_text(yaml_text, "c.yaml", max_chars=400)
    assert chunks[0].symbol == "key0" and chunks[-1].symbol == "key19"
    toml_text = 'title = "x"\n\n[server]\nport = 80\n' + "".join(
        f'\n[table{i}]\nvalue = "{"z" * 80}"\n' for i in range(10)
    )
    chunks = chunk_text(toml_text, "c.toml", max_chars=300)
    assert [c.symbol for c in chunks[:3]] == ["title", "server", "table0"]


def test_invalid_data_falls_back_to_the_window():
    chunks = chunk_text('{"a": [1, 2,,, \n' * 200, "bad.json")
    assert chunks and all(c.symbol == "" for c in chunks)


def test_notebook_cells_are_chunks_with_lines_in_the_json():
    notebook = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "Some text."]},
            {
                "cell_type": "code",
                "metadata": {},
                "source": ["import os\n", "print(os.getcwd())"],
                "outputs": [{"output_type": "stream", "text": ["/secret/output\n"]}],
                "execution_count": 1,
            },
            {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": 2},
        ],
        "metadata": {"kernelspec": {"language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    text = json.dumps(notebook, indent=1)
    chunks = chunk_text(text, "n.ipynb")
    assert [c.content for c in chunks] == ["# Title\nSome text.", "import os\nprint(os.getcwd())", "x = 1"]
    assert [c.metadata["cell_type"] for c in chunks] == ["markdown", "code", "code"]
    lines = text.split("\n")
    for chunk in chunks:
        cited = "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert json.dumps(chunk.content.split("\n")[0])[1:-5] in cited
    assert all("/secret/output" not in c.content for c in chunks)


def installed(package: str) -> Path:
    return Path(__import__(package).__file__).parent


@pytest.mark.parametrize(
    "root", [installed("django"), installed("celery"), SHARED / "seeds"], ids=["django", "celery", "seeds"]
)
def test_a_real_tree_chunks_without_exception(root):
    if root.name == "seeds" and not root.is_dir():
        pytest.skip("../shared/seeds is not beside the checkout")  # as the quality ratchet does for ../shared/eval
    files = chunks = 0
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix in (".pyc", ".mo", ".so") or path.stat().st_size > 2_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        result = chunk_text(text, str(path))
        files += 1
        chunks += len(result)
        if path.suffix != ".ipynb":
            front = front_matter_split(text.split("\n")).line_count if language_for(str(path)) == "markdown" else 0
            assert_well_formed(text, result, max_chars=1500, skip_lines=front)
    assert files > (0 if root.name == "seeds" else 100) and chunks >= files
