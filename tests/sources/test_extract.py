"""The extraction stage on a corpus the tests generate: what each document yields, in the sandbox's child process."""

import pytest

from sources.extract import EXTRACTORS, Limits, extractor_for
from sources.extract.chunks import document_chunks
from sources.extract.sandbox import extract
from sources.extract.types import ExtractionRefused
from tests import documents

pytestmark = pytest.mark.unit


def run(name: str, data: bytes, limits: Limits | None = None):
    extractor = extractor_for(name)
    assert extractor is not None
    return extract(extractor.kind, data, limits or Limits())


def test_a_pdf_yields_the_text_of_each_page_anchored_by_page():
    extracted = run("report.pdf", documents.report_pdf())
    assert [a.label for a in extracted.anchors] == ["p. 1", "p. 2", "p. 3"]
    lines = extracted.text.split("\n")
    page_three = extracted.anchors[2]
    assert documents.PAGE_THREE_PHRASE in "\n".join(lines[page_three.start_line - 1 : page_three.end_line])
    page_two = lines[extracted.anchors[1].start_line - 1 : extracted.anchors[1].end_line]
    # The ruled table comes out as a markdown table, in its place below the page's heading.
    assert page_two == [
        "Revenue by region",
        "",
        "| Region | Revenue | Units |",
        "|---|---|---|",
        "| North | 1200 | 40 |",
        "| South | 900 | 31 |",
    ]


def test_a_pdf_page_without_ruled_lines_is_read_by_pypdf_alone():
    pages = [["Plain text", "Region Revenue Units", "North 1200 40"]]
    extracted = run("plain.pdf", documents.pdf_make(pages))
    assert extracted.text == "Plain text\nRegion Revenue Units\nNorth 1200 40\n"


def test_chunks_of_a_pdf_never_span_pages_and_cite_theirs():
    extracted = run("report.pdf", documents.report_pdf())
    chunks = document_chunks(extracted, "docs/report.pdf", max_chars=1500, overlap=200)
    assert [c.symbol for c in chunks] == ["p. 1", "p. 2", "p. 3"]
    third = chunks[2]
    assert third.context_prefix == "report.pdf > p. 3"
    assert documents.PAGE_THREE_PHRASE in third.content
    lines = extracted.text.split("\n")
    assert third.content == "\n".join(lines[third.start_line - 1 : third.end_line])
    assert third.metadata["anchor"] == "p. 3"


def test_a_docx_yields_markdown_headings_lists_and_tables():
    extracted = run("spec.docx", documents.spec_docx())
    assert "# Deployment guide\n" in extracted.text and "## Rollback\n" in extracted.text
    assert "- Check the health endpoint" in extracted.text
    assert "| Step | Owner |\n|---|---|\n| Rollback drill | Platform team |" in extracted.text
    chunks = document_chunks(extracted, "spec.docx", max_chars=1500, overlap=200)
    assert any(c.context_prefix == "spec.docx > # Deployment guide > ## Rollback" for c in chunks)


def test_a_pptx_yields_one_anchor_per_slide():
    extracted = run("deck.pptx", documents.deck_pptx())
    assert [a.label for a in extracted.anchors] == ["slide 1", "slide 2"]
    chunks = document_chunks(extracted, "deck.pptx", max_chars=1500, overlap=200)
    assert [(c.symbol, "Latency of the reranker" in c.content) for c in chunks] == [
        ("slide 1", False),
        ("slide 2", True),
    ]


def test_an_xlsx_yields_a_table_per_sheet():
    extracted = run("budget.xlsx", documents.budget_xlsx())
    assert [a.label for a in extracted.anchors] == ["sheet Costs", "sheet Staff"]
    assert "| GPU hours | 420 |" in extracted.text and "| Ada | Search engineer |" in extracted.text


def test_a_long_table_repeats_its_header_in_every_block():
    rows = "id,name\n" + "".join(f"{i},item {i}\n" for i in range(100))
    extracted = run("items.csv", rows.encode())
    assert extracted.text.count("| id | name |") == 3  # 40 + 40 + 20 rows


def test_csv_and_html_become_markdown():
    assert "| Lisbon | 545000 |" in run("cities.csv", documents.CSV.encode()).text
    html = run("wiki.html", documents.HTML.encode()).text
    assert "# Onboarding" in html and "## Accounts" in html and "- Request a laptop\n- Join the chat\n" in html
    assert "| Billing | Finance |" in html
    assert "alert" not in html and "p{}" not in html  # scripts and styles are not text


@pytest.mark.parametrize(
    ("name", "make", "reason"),
    [
        ("locked.pdf", documents.encrypted_pdf, "encrypted PDF: needs a password"),
        ("scan.pdf", lambda: documents.pdf_make([[], []], image_only=True), "no text layer: needs OCR"),
        ("bomb.docx", documents.bomb_docx, "zip bomb guard"),
        ("truncated.pdf", lambda: documents.report_pdf()[:700], "unreadable PDF"),
        ("fake.xlsx", lambda: b"not a zip at all", "not a valid XLSX"),
    ],
)
def test_hostile_or_unreadable_files_are_refused_with_a_reason(name, make, reason):
    with pytest.raises(ExtractionRefused) as refused:
        run(name, make())
    assert reason in refused.value.reason


def test_a_pdf_over_the_page_cap_is_refused_before_extraction():
    with pytest.raises(ExtractionRefused, match="3 pages, over the limit of 2"):
        run("report.pdf", documents.report_pdf(), Limits(max_pages=2))


def test_an_extraction_over_its_memory_limit_fails_alone():
    rows = ("a,b\n" + "x,y\n" * 5_000_000).encode()  # 20 MB of CSV: its rows take several times that
    with pytest.raises(ExtractionRefused, match=r"ran out of memory \(limit 64 MB"):
        run("big.csv", rows, Limits(max_memory_mb=64))
    assert run("cities.csv", documents.CSV.encode(), Limits(max_memory_mb=64)).text  # the same limit reads a real one


def test_an_extraction_over_its_time_limit_is_stopped():
    rows = "a,b\n" + "x,y\n" * 3_000_000  # about 12 MB: takes seconds to tabulate
    with pytest.raises(ExtractionRefused, match="longer than 0.2 s"):
        run("big.csv", rows.encode(), Limits(timeout_seconds=0.2))


def test_every_extractor_has_an_identity_naming_its_library_version():
    identities = {suffix: e.identity for suffix, e in EXTRACTORS.items()}
    assert identities[".pdf"].startswith("pdf:pypdf-") and identities[".csv"] == "csv:stdlib:1"
    assert extractor_for("notes.md") is None and extractor_for("REPORT.PDF") is EXTRACTORS[".pdf"]
