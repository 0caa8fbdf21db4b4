"""The viewer: a whole skill or file as it is now, highlighted, with line anchors for citations.

``/view/skill/<slug>#L12-L20`` and ``/view/file/<root>/<path>#L12-L40``: the
search page links every hit's citation here. Scope applies exactly as in
the API (a file or skill the person may not see is "not found", like one
that does not exist); files are read with indexing's own safety checks.

A document (PDF, Office, CSV, an HTML page) shows its extracted text, the
lines its chunks cite, with a marker heading each page, slide or sheet
(``#p-3``); ``/download/file/<root>/<path>`` serves its original bytes
under the same scope check, as an attachment no browser renders. An uploaded
document (sources/uploads.py) opens the same way at ``/view/document/<id>``
and downloads at ``/download/document/<id>``.
"""

import json
from collections.abc import Sequence
from pathlib import PurePosixPath

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import escape
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import MarkdownLexer

from access.identity import identity_for_user
from kernel.errors import ApplicationError, Conflict, InvalidInput, NotFound, Unavailable, http_status
from retrieval.config import FilesLimits
from retrieval.files import file_current, file_lines, file_original
from retrieval.highlight import highlight_css, lexer_for
from retrieval.uploaded import uploaded_original, uploaded_text
from sources.extract import Anchor
from sources.git_roots import permalink
from sources.models import source_key
from surfaces.selectors import file_commit, skill_readable

# Types a browser may be told for a download (with nosniff and as an attachment, none is rendered in the page); any
# other document, HTML included, is opaque bytes.
_DOWNLOAD_TYPES = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}
_OPAQUE = "application/octet-stream"
# Pygments' names of the lexers whose lines are prose, wrapped in the viewer.
PROSE_LEXERS = frozenset({"Markdown", "Text only", "reStructuredText"})


def view_skill(request, slug: str):
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        skill = skill_readable(identity_for_user(request.user), slug)
    except NotFound as exc:
        return _not_found(request, exc)
    return _page(
        request,
        title=skill.title or (skill.source.title if skill.source is not None else "") or slug,
        subtitle="skill",
        text=skill.body,
        lexer=MarkdownLexer(stripnl=False),
        cite=source_key(skill),  # as its hits cite it: skill:<slug>:<lines>
    )


def view_file(request, root: str, path: str):
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        file, current = file_current(
            identity_for_user(request.user), root=root, path=path, limits=FilesLimits.from_settings()
        )
    except ApplicationError as exc:  # not found, or refused (a root no longer its directory, a hard link)
        return _not_found(request, exc)
    # A document's extracted text is markdown-like (headings, lists, tables), whatever its suffix.
    lexer = MarkdownLexer(stripnl=False) if current.document else lexer_for(path)
    stale = (current.size, current.mtime_ns) != (file.size, file.mtime_ns)
    commit, template = file_commit(root_id=file.root.id, path=path)
    return _page(
        request,
        title=path,
        subtitle=f"{file.root.name} · {'document, extracted text' if current.document else lexer.name}",
        text=current.text,
        lexer=lexer,
        cite=path,
        stale=stale,
        pages=current.anchors if current.document else None,
        download=reverse("download-file", args=[file.root.id, path]) if current.document else "",
        commit=commit,
        permalink=permalink(template, commit=commit, path=path, start=1, end=len(file_lines(current.text))),
    )


def view_document(request, document_id: int):
    """An uploaded document as its extracted text, with its page markers and the download of its original."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        shown = uploaded_text(identity_for_user(request.user), document_id, limits=FilesLimits.from_settings())
    except ApplicationError as exc:
        return _not_found(request, exc)
    name = shown.document.name
    return _page(
        request,
        title=name,
        subtitle="uploaded document, extracted text" if shown.extracted else "uploaded document",
        text=shown.text,
        lexer=MarkdownLexer(stripnl=False) if shown.extracted else lexer_for(name),
        cite=name,  # as its hits cite it: the document's name, then its page and lines
        stale=shown.stale,
        pages=shown.anchors if shown.extracted else None,
        download=reverse("download-document", args=[document_id]),
    )


def download_file(request, root: str, path: str):
    """The original document, only to a person who may see it; never rendered by the browser."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        file, raw = file_original(
            identity_for_user(request.user), root=root, path=path, limits=FilesLimits.from_settings()
        )
    except ApplicationError as exc:
        return _not_found(request, exc)
    return _attachment(raw, PurePosixPath(path).name)


def download_document(request, document_id: int):
    """The uploaded original, only to a person who may see the document; never rendered by the browser."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        document, raw = uploaded_original(identity_for_user(request.user), document_id)
    except ApplicationError as exc:
        return _not_found(request, exc)
    return _attachment(raw, document.name)


def _attachment(raw: bytes, name: str) -> HttpResponse:
    response = HttpResponse(raw, content_type=_DOWNLOAD_TYPES.get(PurePosixPath(name).suffix.lower(), _OPAQUE))
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    response["X-Content-Type-Options"] = "nosniff"
    # The bytes are a person's document: no shared cache keeps them.
    response["Cache-Control"] = "private, no-store"
    return response


def _page(
    request,
    *,
    title: str,
    subtitle: str,
    text: str,
    lexer,
    cite: str,
    stale: bool = False,
    pages: Sequence[Anchor] | None = None,
    download: str = "",
    commit: str = "",
    permalink: str = "",
):
    code = highlight(text, lexer, HtmlFormatter(linenos="inline", linespans="L", wrapcode=True))
    if pages is not None:
        code = _page_markers(code, pages)
    # Prose (a skill, a document's extracted text, markdown or plain text) wraps its long lines: a PDF's paragraph is
    # one line, cut off at the screen's edge. Code keeps its lines whole and scrolls sideways, as an editor shows it.
    prose = pages is not None or lexer.name in PROSE_LEXERS
    return render(
        request,
        "retrieval/view.html",
        {
            "title": title,
            "subtitle": subtitle,
            "code": code,
            "prose": prose,
            "cite": cite,
            "lines": len(file_lines(text)),
            "stale": stale,
            "highlight_css": highlight_css(),
            "download": download,
            "commit": commit,
            "permalink": permalink,
            # What "Copy citation" needs to cite a range by its pages, as every surface does (static/js/viewer.js).
            "pages": json.dumps([[a.label, a.start_line, a.end_line] for a in pages]) if pages else "",
        },
    )


def _page_markers(code: str, anchors: Sequence[Anchor]) -> str:
    """A marker line before the first line of each page, slide or sheet: not a numbered line, so every line keeps the
    number its citations give it; its id (``p-3``, ``slide-2``, ``sheet-sales``) is a link target."""
    for anchor in anchors:
        line = f'<span id="L-{anchor.start_line}">'
        marker = (
            f'<span class="page-marker" id="{slugify(anchor.label)}" role="separator">{escape(anchor.label)}</span>'
        )
        code = code.replace(line, marker + line, 1)
    return code


def _not_found(request, exc: ApplicationError):
    # A file found but refused keeps the API's status (a root no longer its directory: 409; a hard link: 422); an
    # address that names nothing readable (a bad path too) is simply not found.
    refused = isinstance(exc, (Conflict, InvalidInput, Unavailable))
    return render(
        request,
        "retrieval/view.html",
        {"title": "Cannot be shown" if refused else "Not found", "error": exc.message},
        status=http_status(exc) if refused else 404,
    )
