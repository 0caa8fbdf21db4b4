"""One citation format for every surface: files by lines, documents by page first."""

import pytest

from kernel.citations import citation_text, pages_label

pytestmark = pytest.mark.unit


def test_a_file_is_cited_by_path_and_lines_and_a_document_by_its_page_first():
    assert citation_text("app.py", 3, 9) == "app.py:3-9"
    assert citation_text("skill:deploy", 1, 4) == "skill:deploy:1-4"
    assert citation_text("report.pdf", 9, 10, anchor="p. 3") == "report.pdf p. 3 (lines 9-10)"


def test_a_range_over_several_pages_names_the_first_and_last_and_other_anchors_are_listed():
    assert pages_label([]) == ""
    assert pages_label(["p. 3"]) == "p. 3"
    assert pages_label(["p. 1", "p. 2", "p. 3"]) == "p. 1-3"
    assert pages_label(["slide 1", "slide 2"]) == "slide 1, slide 2"
