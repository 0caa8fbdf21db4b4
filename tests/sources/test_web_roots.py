"""Web roots (issue 40 item 4): a site served on 127.0.0.1 crawled through the one pipeline and searched by URL.

The server is real (``http.server``, threaded) and counts the bodies it sends: a second crawl of an unchanged site
is answered 304 throughout, and a page removed from the site leaves search after the next crawl.
"""

import functools
import hashlib
import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sources.models import Chunk, IndexedFile, JobStatus, WorkspaceRoot
from tests.conftest import api_client, index_root
from tests.sources.test_admin_console import root_form

pytestmark = pytest.mark.django_db


class _Handler(SimpleHTTPRequestHandler):
    """Files with an ETag (their content's hash) honoured with a 304; each 200 body counted."""

    server: "_Server"

    def send_head(self):  # type: ignore[no-untyped-def]
        file = Path(self.translate_path(self.path))
        if file.is_dir():
            file = file / "index.html"
        if not file.is_file():
            self.send_error(404)
            return None
        body = file.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return None
        self.server.bodies.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", _content_type(file.name))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.end_headers()
        return open(file, "rb")  # noqa: SIM115 - SimpleHTTPRequestHandler copies and closes it

    def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's name
        pass


def _content_type(name: str) -> str:
    if name.endswith("-latin1.txt"):
        return "text/plain; charset=iso-8859-1"
    if name.endswith("-meta.html"):
        return "text/html"  # no charset: the page's <meta> names it
    return "text/plain" if name.endswith(".txt") else "text/html; charset=utf-8"


class _Server(ThreadingHTTPServer):
    bodies: list[str]


@pytest.fixture
def site(tmp_path) -> Iterator[tuple[Path, _Server]]:
    directory = tmp_path / "site"
    (directory / "docs").mkdir(parents=True)
    (directory / "robots.txt").write_text("User-agent: *\nDisallow: /docs/private.html\n")
    pages = {
        "index.html": (
            "Bird guide",
            '<a href="herons.html">Herons</a> <a href="egrets.html">Egrets</a> '
            '<a href="private.html">Private</a> <a href="notes.txt">Notes</a>',
        ),
        "herons.html": ("Herons", "The grey heron stands motionless in shallow water waiting for fish."),
        "egrets.html": ("Egrets", "The little egret has bright yellow feet and a black bill."),
        "private.html": ("Private", "Nothing a crawler may read."),
    }
    for name, (title, text) in pages.items():
        (directory / "docs" / name).write_text(
            f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
        )
    (directory / "docs" / "notes.txt").write_text("Field notes: a bittern booms at dusk in the reed bed.\n")

    server = _Server(("127.0.0.1", 0), functools.partial(_Handler, directory=str(directory)))
    server.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield directory, server
    server.shutdown()
    server.server_close()


@pytest.fixture
def web_root(site, settings) -> WorkspaceRoot:
    _, server = site
    settings.RAG_WEB_ALLOW_PRIVATE = True  # the site is on 127.0.0.1
    url = f"http://127.0.0.1:{server.server_address[1]}/docs/"
    return WorkspaceRoot.objects.create(name="birds", path=url, web_url=url, watch=False, cooldown_seconds=0)


def search(query: str) -> list[dict]:
    response = api_client().post(
        "/api/v1/search", data=json.dumps({"query": query, "k": 5}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()["hits"]


def test_a_site_is_crawled_cited_by_url_then_recrawled_without_a_body_and_a_removed_page_leaves(site, web_root):
    directory, server = site
    base = web_root.web_url
    first = index_root(web_root, force=False)
    assert first.status == JobStatus.SUCCEEDED, first.message
    assert set(IndexedFile.objects.values_list("path", flat=True)) == {
        base,
        base + "herons.html",
        base + "egrets.html",
        base + "notes.txt",
    }
    assert {error["path"]: error["reason"] for error in first.errors} == {
        base + "private.html": "disallowed by robots.txt"
    }
    hits = search("grey heron standing in shallow water")
    assert hits[0]["path"] == base + "herons.html" and "grey heron" in hits[0]["content"]
    assert Chunk.objects.get(path=base + "herons.html").content.startswith("# Herons")  # the HTML extractor's

    # Unchanged: every page answered 304, no body sent, nothing embedded.
    server.bodies.clear()
    second = index_root(web_root, force=False)
    assert second.status == JobStatus.SUCCEEDED, second.message
    assert [body for body in server.bodies if body != "/robots.txt"] == [], server.bodies
    assert (second.files_unchanged, second.files_changed, second.chunks_embedded) == (4, 0, 0), second.message
    assert "0 fetched, 4 not modified" in second.message

    # A page removed from the site (404) is deleted; an edited one is fetched and embedded again.
    (directory / "docs" / "egrets.html").unlink()
    herons = directory / "docs" / "herons.html"
    herons.write_text(herons.read_text().replace("grey heron", "purple heron"))
    third = index_root(web_root, force=False)
    assert (third.files_changed, third.files_deleted, third.files_unchanged) == (1, 1, 2), third.message
    assert not Chunk.objects.filter(path=base + "egrets.html").exists()
    assert all(hit["path"] != base + "egrets.html" for hit in search("little egret yellow feet"))
    assert "purple heron" in Chunk.objects.get(path=base + "herons.html").content


def test_a_crawl_cut_short_by_a_limit_keeps_the_pages_it_did_not_reach(site, web_root, settings):
    assert index_root(web_root, force=False).status == JobStatus.SUCCEEDED
    settings.RAG_WEB_MAX_PAGES = 1
    cut = index_root(web_root, force=False)
    assert cut.status == JobStatus.SUCCEEDED, cut.message
    assert cut.files_deleted == 0 and IndexedFile.objects.count() == 4, cut.message


def test_a_web_root_refused_its_address_fails_the_job_and_the_admin_form_says_why(web_root, admin_client, settings):
    settings.RAG_WEB_ALLOW_PRIVATE = False
    job = index_root(web_root, force=False)
    assert job.status == JobStatus.FAILED and "127.0.0.1" in job.message, job.message

    form = root_form(Path("/"), name="intranet", path="", web_url=web_root.web_url)
    response = admin_client.post("/admin/sources/workspaceroot/add/", form)
    assert response.status_code == 200
    assert "web_url" in response.context["adminform"].form.errors
    assert not WorkspaceRoot.objects.filter(name="intranet").exists()


def test_a_web_root_saved_in_the_admin_is_its_url_with_nothing_to_watch(site, admin_client, settings):
    _, server = site
    settings.RAG_WEB_ALLOW_PRIVATE = True
    url = f"http://127.0.0.1:{server.server_address[1]}/docs/"
    form = root_form(Path("/"), name="birds", path="", web_url=f" {url} ", watch="on")
    response = admin_client.post("/admin/sources/workspaceroot/add/", form, follow=True)
    assert response.status_code == 200
    root = WorkspaceRoot.objects.get(name="birds")
    assert (root.web_url, root.path, root.watch, root.directory_identity) == (url, url, False, "")


def test_reading_a_web_root_again_fetches_every_page_and_embeds_none(site, web_root):
    """The admin's "read every file again" (the secret scan turned on) forgets the validators too."""
    from sources.roots import root_files_reread

    _, server = site
    assert index_root(web_root, force=False).status == JobStatus.SUCCEEDED
    root_files_reread(root=web_root)
    server.bodies.clear()
    again = index_root(web_root, force=False)
    assert sorted(body for body in server.bodies if body != "/robots.txt") == [
        "/docs/",
        "/docs/egrets.html",
        "/docs/herons.html",
        "/docs/notes.txt",
    ]
    assert (again.files_unchanged, again.chunks_embedded) == (4, 0), again.message


def test_a_page_is_read_in_the_encoding_its_header_or_its_meta_names(site, web_root):
    from sources.connectors.web.links import page_charset, utf8_body

    directory, _ = site
    index = directory / "docs" / "index.html"
    links = '<a href="cafe-latin1.txt">Café</a> <a href="quotes-meta.html">Q</a></body>'
    index.write_text(index.read_text().replace("</body>", links))
    (directory / "docs" / "cafe-latin1.txt").write_bytes("Le café crème du héron.\n".encode("latin-1"))
    (directory / "docs" / "quotes-meta.html").write_bytes(
        b'<!doctype html><html><head><meta charset="windows-1252"><title>Quotes</title></head>'
        b"<body><h1>Quotes</h1><p>The \x93booming\x94 bittern \x96 a heron.</p></body></html>"
    )
    job = index_root(web_root, force=False)
    assert job.status == JobStatus.SUCCEEDED and job.files_failed == 0, (job.message, job.errors)
    base = web_root.web_url
    assert "Le café crème du héron." in Chunk.objects.get(path=base + "cafe-latin1.txt").content
    quotes = Chunk.objects.get(path=base + "quotes-meta.html").content
    assert "The \u201cbooming\u201d bittern \u2013 a heron." in quotes

    # A byte order mark, then the header, then (HTML) a <meta> in the first 1,024 bytes; Latin-1 read as browsers do.
    assert page_charset("\ufeffhi".encode("utf-8"), header="iso-8859-1", html=True) == "utf-8"
    assert page_charset(b"<meta charset=koi8-r>", header="", html=True) == "koi8-r"
    assert page_charset(b"<meta charset=koi8-r>", header="utf-8", html=True) == "utf-8"
    assert page_charset(b"<meta charset=koi8-r>", header="", html=False) == "utf-8"
    assert page_charset(b"x" * 2000 + b"<meta charset=koi8-r>", header="", html=True) == "utf-8"
    assert page_charset(b"", header="no-such-charset", html=False) == "utf-8"
    assert utf8_body(b"\x80 euro", header="ISO-8859-1", html=False) == "\u20ac euro".encode()


# --- Python's documentation (Debian's python3-doc), served by `python -m http.server` ---------------------------

PYTHON_DOCS = Path("/usr/share/doc/python3/html")


@pytest.fixture
def python_docs(tmp_path) -> Iterator[tuple[Path, str]]:
    """A copy of the documentation (a test removes a page), served on 127.0.0.1 by the standard library's server,
    which answers If-Modified-Since with 304 (copy2 keeps the files' times)."""
    if not (PYTHON_DOCS / "index.html").is_file():
        pytest.skip(f"{PYTHON_DOCS} is absent: install Debian's python3-doc (`make browser` does, as root)")
    directory = tmp_path / "python-docs"
    shutil.copytree(PYTHON_DOCS.resolve(), directory)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield directory, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.mark.slow
def test_a_section_of_the_python_documentation_is_indexed_recrawled_without_a_body_and_a_removed_page_leaves(
    python_docs, settings
):
    """Its HOWTOs (20 pages, 2 MB): the whole site (524 pages, 13,206 chunks) goes through the pipeline in
    `rag_bench searchable --site --again` (docs/sources.md has its figures); its vectors take far longer than a
    test may on two cores."""
    directory, url = python_docs
    settings.RAG_WEB_ALLOW_PRIVATE = True
    start = url + "howto/index.html"
    root = WorkspaceRoot.objects.create(name="python", path=start, web_url=start, watch=False, cooldown_seconds=0)

    began = time.monotonic()
    first = index_root(root, force=False)
    first_seconds = time.monotonic() - began
    assert first.status == JobStatus.SUCCEEDED, first.message
    pages = set(IndexedFile.objects.values_list("path", flat=True))
    expected = {url + "howto/" + file.name for file in (directory / "howto").glob("*.html")}
    assert pages == expected, first.message

    began = time.monotonic()
    second = index_root(root, force=False)
    second_seconds = time.monotonic() - began
    assert (second.files_changed, second.chunks_embedded, second.files_unchanged) == (0, 0, 20), second.message
    assert " 0 fetched, " in second.message, second.message

    (directory / "howto" / "sockets.html").unlink()
    third = index_root(root, force=False)
    assert third.files_deleted == 1, third.message
    assert not Chunk.objects.filter(path=url + "howto/sockets.html").exists()
    print(
        f"\npython3-doc HOWTOs through the pipeline: {len(pages)} pages, {first.chunks_embedded} chunks, "
        f"first crawl {first_seconds:.1f} s ({first.message}); second {second_seconds:.1f} s ({second.message}); "
        f"after removing a page: {third.message}"
    )
