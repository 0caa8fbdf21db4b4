"""A corpus of documents the tests make themselves: good ones of every format, and hostile ones."""

import functools
import io
import zipfile
from pathlib import Path

PAGE_THREE_PHRASE = "the quarterly heron migration exceeded forecasts"


def _pdf_string(text: str) -> bytes:
    return b"(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)").encode("latin-1") + b")"


def _pdf_table(rows: list[list[str]], *, top: int) -> list[bytes]:
    """A ruled table below ``top``: each cell a stroked rectangle with its text inside, as word processors draw it."""
    width, height, parts = 120, 20, []
    for r, row in enumerate(rows):
        y = top - (r + 1) * height
        for c, cell in enumerate(row):
            x = 72 + c * width
            parts.append(b"%d %d %d %d re S" % (x, y, width, height))
            parts.append(b"BT /F1 12 Tf %d %d Td %s Tj ET" % (x + 4, y + 6, _pdf_string(cell)))
    return parts


def pdf_make(
    pages: list[list[str]], *, image_only: bool = False, tables: dict[int, list[list[str]]] | None = None
) -> bytes:
    """A minimal PDF written by hand: one Helvetica line per string, or (image_only) pages holding only an image;
    ``tables``: a ruled table drawn below the lines of the page with that index."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in once the page tree's number is known
    tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    image = add(
        b"<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray /BitsPerComponent 8 "
        b"/Length 4 >>\nstream\n\x00\xff\xff\x00\nendstream"
    )
    kids = []
    for lines in pages:
        if image_only:
            stream = b"q 200 0 0 200 100 400 cm /Im1 Do Q"
        else:
            parts = [b"BT /F1 12 Tf 72 720 Td 14 TL"]
            for line in lines:
                parts.append(_pdf_string(line) + b" Tj T*")
            parts.append(b"ET")
            if tables and len(kids) in tables:
                parts.extend(_pdf_table(tables[len(kids)], top=720 - 14 * len(lines)))
            stream = b"\n".join(parts)
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 %d 0 R >> /XObject << /Im1 %d 0 R >> >> >>" % (tree, content, font, image)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % tree
    objects[tree - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, catalog, xref)
    return bytes(out)


def report_pdf() -> bytes:
    return pdf_make(
        [
            ["Annual report", "Summary of the year for the board."],
            ["Revenue by region"],
            ["Wildlife notes", f"In spring {PAGE_THREE_PHRASE} by a wide margin."],
        ],
        tables={1: [["Region", "Revenue", "Units"], ["North", "1200", "40"], ["South", "900", "31"]]},
    )


def encrypted_pdf() -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=io.BytesIO(report_pdf()))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@functools.cache  # python-docx, -pptx and openpyxl stamp the time: one bytes per run, so a copy is a duplicate
def spec_docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Deployment guide", level=1)
    document.add_paragraph("How the service is rolled out.")
    document.add_heading("Rollback", level=2)
    document.add_paragraph("Revert the release tag and redeploy the previous image.")
    document.add_paragraph("Check the health endpoint", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for row, values in zip(table.rows, [("Step", "Owner"), ("Rollback drill", "Platform team")], strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@functools.cache  # stamped with the time, like spec_docx
def deck_pptx() -> bytes:
    import pptx

    presentation = pptx.Presentation()
    for title, body in [("Roadmap", "Ship the search page"), ("Risks", "Latency of the reranker")]:
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = body
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


@functools.cache  # stamped with the time, like spec_docx
def budget_xlsx() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    costs = workbook.active
    costs.title = "Costs"
    costs.append(["Item", "Amount"])
    costs.append(["GPU hours", 420])
    staff = workbook.create_sheet("Staff")
    staff.append(["Name", "Role"])
    staff.append(["Ada", "Search engineer"])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def bomb_docx() -> bytes:
    """A zip of 64 MB of zeros named like a Word file (about 60 KB on disk)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w") as member:
            block = b"\x00" * (1 << 20)
            for _ in range(64):
                member.write(block)
    return out.getvalue()


CSV = "city,population\nLisbon,545000\nPorto,232000\n"
HTML = (
    "<!doctype html><html><head><title>Wiki</title><style>p{}</style></head><body>"
    "<h1>Onboarding</h1><p>Welcome to the team.</p><h2>Accounts</h2><ul><li>Request a laptop</li>"
    "<li>Join the chat</li></ul><table><tr><th>System</th><th>Owner</th></tr><tr><td>Billing</td><td>Finance</td>"
    "</tr></table><script>alert('x')</script></body></html>"
)

GOOD = ("report.pdf", "spec.docx", "deck.pptx", "budget.xlsx", "cities.csv", "wiki.html")
BAD = {
    "locked.pdf": "encrypted PDF",
    "scan.pdf": "no text layer: needs OCR",
    "bomb.docx": "zip bomb guard",
    "truncated.pdf": "PDF",
}


def corpus_make(directory: Path) -> None:
    """Every document of the corpus, good and bad, written into ``directory``."""
    report = report_pdf()
    files = {
        "report.pdf": report,
        "spec.docx": spec_docx(),
        "deck.pptx": deck_pptx(),
        "budget.xlsx": budget_xlsx(),
        "cities.csv": CSV.encode(),
        "wiki.html": HTML.encode(),
        "locked.pdf": encrypted_pdf(),
        "scan.pdf": pdf_make([[], []], image_only=True),
        "bomb.docx": bomb_docx(),
        "truncated.pdf": report[: len(report) // 3],
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
