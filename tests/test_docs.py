"""The README stays a front door and the manual in docs/ holds together: every link lands somewhere real."""

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README_MAX_LINES = 200

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`]*`")
# [text](target) and ![alt](target); the text may wrap onto the next line.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", flags=re.MULTILINE)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def prose(text: str) -> str:
    """The text without code: a `[x](y)` inside a code block or span is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading counts by its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        anchor, repeat = base, 0
        while anchor in found:  # GitHub numbers a repeated heading's anchor: name, name-1, name-2
            repeat += 1
            anchor = f"{base}-{repeat}"
        found.add(anchor)
    return found


def links(path: Path) -> list[str]:
    return [
        unquote(target)
        for target in LINK.findall(prose(path.read_text(encoding="utf-8")))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto: leave the repository
    ]


def test_slugs_follow_github():
    assert slug("MCP server (`/mcp`)") == "mcp-server-mcp"
    assert slug("Processes of `make run`") == "processes-of-make-run"
    assert slug("Django, HTTPS and headers") == "django-https-and-headers"
    assert slug("Chunking and indexing: `rag_bench chunk`, `rag_bench index`") == (
        "chunking-and-indexing-rag_bench-chunk-rag_bench-index"
    )


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the detail into docs/"


@pytest.mark.parametrize("page", pages(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page):
    broken = []
    for target in links(page):
        file_part, _, anchor = target.partition("#")
        destination = (page.parent / file_part).resolve() if file_part else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {destination.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_every_docs_page_is_linked_from_the_index():
    index = DOCS / "index.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for target in links(index)}
    unlinked = [str(page.relative_to(ROOT)) for page in DOCS.rglob("*.md") if page != index and page not in linked]
    assert not unlinked, f"docs/index.md links to none of {unlinked}"


def test_the_demo_skills_call_the_api_with_a_key_and_name_the_default_fusion():
    """The demo skills are the first thing a new user searches: their examples must work as written."""
    from rag_site.settings_registry import SETTINGS

    demo = ROOT / "rag_site" / "demo_skills"
    calls = [
        block
        for skill in demo.glob("*.md")
        for block in re.findall(r"```.*?```", skill.read_text(), flags=re.DOTALL)
        if "curl" in block and "/api/v1/" in block
    ]
    assert calls and all("Authorization: Bearer" in call for call in calls)  # every call needs a key
    searching = (demo / "searching.md").read_text()
    assert SETTINGS["RAG_FUSION"].default == "convex" and "weighted fusion" in searching
    assert "Reciprocal Rank Fusion merges" not in searching
