import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sources.chunking import markdown_chunk

pytestmark = pytest.mark.unit


def cited(text: str, chunk) -> str:
    return "\n".join(text.split("\n")[chunk.start_line - 1 : chunk.end_line])


def test_headings_become_the_context_prefix():
    text = "# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n### On Linux\n\napt.\n\n## Use\n\nGo.\n"
    chunks = markdown_chunk(text).chunks
    assert [c.context_prefix for c in chunks] == [
        "# Guide",
        "# Guide > ## Install",
        "# Guide > ## Install > ### On Linux",
        "# Guide > ## Use",
    ]
    assert chunks[2].content == "### On Linux\n\napt."
    assert (chunks[2].start_line, chunks[2].end_line) == (9, 11)


def test_headings_inside_fenced_code_are_not_headings():
    text = "# Real\n\n```bash\n# not a heading\n## nor this\n```\n\nafter\n"
    chunks = markdown_chunk(text).chunks
    assert len(chunks) == 1
    assert chunks[0].context_prefix == "# Real"
    assert "# not a heading" in chunks[0].content


def test_text_before_the_first_heading_is_its_own_chunk():
    chunks = markdown_chunk("Preamble line.\n\n# First\n\nBody.\n").chunks
    assert chunks[0].content == "Preamble line."
    assert chunks[0].context_prefix == ""
    assert chunks[1].context_prefix == "# First"


def test_oversized_sections_split_at_paragraph_boundaries():
    paragraphs = [f"Paragraph {i}. " + "word " * 50 for i in range(10)]
    text = "# Big\n\n" + "\n\n".join(paragraphs) + "\n"
    chunks = markdown_chunk(text, max_chars=700).chunks
    assert len(chunks) > 1
    assert all(len(c.content) <= 700 for c in chunks)
    assert all(c.context_prefix == "# Big" for c in chunks)
    # Every paragraph lands whole in exactly one chunk.
    for paragraph in paragraphs:
        assert sum(paragraph.strip() in c.content for c in chunks) == 1


def test_empty_and_blank_documents_have_no_chunks():
    assert markdown_chunk("").chunks == []
    assert markdown_chunk("  \n\n\t\n").chunks == []


def test_front_matter_is_metadata_not_content():
    document = markdown_chunk("---\nname: Deploy\ntags: [ops]\n---\n# Deploy\n\nSteps.\n")
    assert document.front_matter.data == {"name": "Deploy", "tags": ["ops"]}
    assert all("tags:" not in c.content for c in document.chunks)
    assert document.chunks[0].start_line == 5


def test_malformed_front_matter_is_reported_not_raised():
    document = markdown_chunk("---\nname: [unclosed\n---\nBody\n")
    assert "not valid YAML" in document.front_matter.error


def test_a_bare_heading_opens_the_next_section_so_no_line_is_lost():
    chunks = markdown_chunk("# Guide\n\n## Install\n\nRun it.\n").chunks
    assert len(chunks) == 1
    assert chunks[0].content.startswith("# Guide")
    assert chunks[0].context_prefix == "# Guide > ## Install"


markdown_lines = st.one_of(
    st.sampled_from(["# Title", "## Section", "### Sub", "", "```", "- item", "> quote", "---", "text"]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"]), max_size=120),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(markdown_lines, max_size=60), st.integers(min_value=80, max_value=2000))
def test_chunks_cite_exact_lines_and_keep_every_line(lines, max_chars):
    text = "\n".join(lines)
    document = markdown_chunk(text, max_chars=max_chars)
    covered = set()
    for chunk in document.chunks:
        if "char_start" in chunk.metadata:
            continue  # a window inside one long line: checked in test_chunking
        assert chunk.content == cited(text, chunk)
        assert chunk.content.strip()
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    body_start = document.front_matter.line_count
    for number, line in enumerate(text.split("\n"), start=1):
        if number > body_start and line.strip():
            assert number in covered, f"line {number} {line!r} is in no chunk"
    assert markdown_chunk(text, max_chars=max_chars) == document
