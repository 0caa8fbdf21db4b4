"""The viewer: a whole skill or file as it is now, highlighted, with line anchors for citations.

``/view/skill/<slug>#L12-L20`` and ``/view/file/<root>/<path>#L12-L40``: the
search page links every hit's citation here. Scope applies exactly as in
the API (a file or skill the person may not see is "not found", like one
that does not exist); files are read with indexing's own safety checks.
"""

from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import MarkdownLexer

from access.identity import identity_for_user
from kernel.errors import ApplicationError, Conflict, InvalidInput, NotFound, Unavailable, http_status
from retrieval.files import file_current, file_lines
from retrieval.highlight import highlight_css, lexer_for
from sources.models import source_key
from surfaces.selectors import skill_readable


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
        file, current = file_current(identity_for_user(request.user), root=root, path=path)
    except ApplicationError as exc:  # not found, or refused (a root no longer its directory, a hard link)
        return _not_found(request, exc)
    lexer = lexer_for(path)
    stale = (current.size, current.mtime_ns) != (file.size, file.mtime_ns)
    return _page(
        request,
        title=path,
        subtitle=f"{file.root.name} · {lexer.name}",
        text=current.text,
        lexer=lexer,
        cite=path,
        stale=stale,
    )


def _page(request, *, title: str, subtitle: str, text: str, lexer, cite: str, stale: bool = False):
    code = highlight(text, lexer, HtmlFormatter(linenos="inline", linespans="L", wrapcode=True))
    return render(
        request,
        "retrieval/view.html",
        {
            "title": title,
            "subtitle": subtitle,
            "code": code,
            "cite": cite,
            "lines": len(file_lines(text)),
            "stale": stale,
            "highlight_css": highlight_css(),
        },
    )


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
