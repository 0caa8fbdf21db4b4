"""Uploads (issue 24 item 4): a managed library of documents, scoped like skills, indexed by the worker's path."""

import hashlib
import json
import os
from pathlib import Path

import pytest
from django.core.files.storage import storages

from sources import uploads
from sources.ingest import IndexingError
from sources.models import Chunk, IndexStatus, Source, UploadedDocument
from tests import documents
from tests.conftest import api_client

pytestmark = pytest.mark.django_db

LIMIT = 50 * 1024 * 1024


def stored_files(data: bytes) -> list[Path]:
    """The files kept for these bytes (the storage is STORAGES["documents"], under this test run's RAG_VAR_DIR)."""
    digest = hashlib.sha256(data).hexdigest()
    return [p for p in (Path(storages["documents"].location) / digest[:2] / digest).glob("*") if p.is_file()]


def upload(name: str, data: bytes, **scope) -> uploads.UploadResult:
    return uploads.document_upload(uploads.Upload(name, data), max_bytes=LIMIT, **scope)


def index(document: UploadedDocument):
    """What the worker's task runs for the document (sources.tasks.document_index_task)."""
    return uploads.document_index(document_id=document.pk)


def search(client, query: str) -> list[dict]:
    response = client.post("/api/v1/search", data=json.dumps({"query": query, "k": 5}), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()["hits"]


def test_an_uploaded_pdf_is_found_cited_at_page_three_by_its_bot_only():
    document = upload("report.pdf", documents.report_pdf(), bot_id="b1").document
    outcome = index(document)
    assert outcome.chunks_embedded == 3
    document.refresh_from_db()
    assert document.index_status == IndexStatus.INDEXED and document.source.kind == Source.Kind.DOCUMENT

    hits = search(api_client(name="bot one", bot_id="b1"), documents.PAGE_THREE_PHRASE)
    assert (hits[0]["path"], hits[0]["symbol"]) == ("report.pdf", "p. 3")
    assert documents.PAGE_THREE_PHRASE in hits[0]["content"]
    other = search(api_client(name="bot two", bot_id="b2"), documents.PAGE_THREE_PHRASE)
    assert all(hit["path"] != "report.pdf" for hit in other)


def test_the_same_bytes_uploaded_again_are_recognised_as_a_duplicate_and_stored_once():
    first = upload("spec.docx", documents.spec_docx())
    again = upload("copy-of-spec.docx", documents.spec_docx())
    assert first.created and not again.created
    assert again.document.pk == first.document.pk
    assert UploadedDocument.objects.count() == 1
    assert [p.name for p in stored_files(documents.spec_docx())] == ["spec.docx"]


def test_the_same_bytes_in_another_scope_are_a_separate_document():
    """Issue 39: a duplicate is one the uploader's scope holds; another scope's copy is neither reused nor named."""
    first = upload("spec.docx", documents.spec_docx(), bot_id="alpha", channels="ops dev")
    for scope in ({"bot_id": "beta"}, {}, {"bot_id": "alpha"}, {"bot_id": "alpha", "client_id": "c1"}):
        result = upload("spec.docx", documents.spec_docx(), **scope)
        assert result.created and result.document.pk != first.document.pk
        assert (result.document.bot_id, result.document.client_id) == (
            scope.get("bot_id", ""),
            scope.get("client_id", ""),
        )
    again = upload("spec-copy.docx", documents.spec_docx(), bot_id="alpha", channels="dev ops")  # the same channels
    assert not again.created and again.document.pk == first.document.pk
    assert UploadedDocument.objects.count() == 5


def test_a_replaced_file_replaces_the_chunks_of_the_same_document():
    document = upload("notes.md", b"# Notes\n\nThe otter colony moved north.\n").document
    index(document)
    replaced = uploads.document_upload(
        uploads.Upload("notes.md", b"# Notes\n\nThe badger sett flooded in spring.\n"),
        replace=document.pk,
        max_bytes=LIMIT,
    )
    assert replaced.replaced and replaced.document.pk == document.pk
    index(replaced.document)
    text = " ".join(Chunk.objects.filter(source__uploadeddocument=document).values_list("content", flat=True))
    assert "badger" in text and "otter" not in text


def test_an_unchanged_document_is_skipped_and_an_upgraded_extractor_re_extracts_it(monkeypatch):
    from sources.extract import EXTRACTORS, Extractor

    document = upload("report.pdf", documents.report_pdf()).document
    index(document)
    assert index(document).skipped  # the re-verify's pass: fingerprint equal, the file is not even read
    monkeypatch.setitem(EXTRACTORS, ".pdf", Extractor("pdf", "pypdf", 99))  # as if pypdf were upgraded
    outcome = index(document)
    assert not outcome.skipped and outcome.chunks_embedded == 3 and outcome.chunks_deleted == 3


def test_deleting_a_document_removes_its_chunks_and_its_stored_file(django_capture_on_commit_callbacks):
    document = upload("cities.csv", documents.CSV.encode()).document
    index(document)
    stored = storages["documents"].path(document.file.name)
    assert Chunk.objects.filter(source__uploadeddocument=document).exists()
    with django_capture_on_commit_callbacks(execute=True):
        document.delete()
    assert not Chunk.objects.exists() and not Source.objects.filter(kind=Source.Kind.DOCUMENT).exists()
    assert not os.path.exists(stored)


def test_a_file_the_extractor_refuses_is_recorded_failed_with_its_reason():
    from sources.tasks import document_index_task

    document = upload("locked.pdf", documents.encrypted_pdf()).document
    answer = document_index_task.apply(args=[document.pk]).get()
    assert answer["status"] == "failed"
    document.refresh_from_db()
    assert document.index_status == IndexStatus.FAILED
    assert "locked.pdf" in document.last_error and "encrypted PDF" in document.last_error
    assert not Chunk.objects.exists()


def test_an_unsupported_type_and_an_oversized_file_are_refused_before_anything_is_stored():
    from kernel.errors import TooLarge, UnsupportedType

    with pytest.raises(UnsupportedType, match=r"\.exe"):
        upload("setup.exe", b"MZ")
    with pytest.raises(TooLarge, match="RAG_EXTRACT_MAX_FILE_MB"):
        uploads.document_upload(uploads.Upload("big.txt", b"x" * 2048), max_bytes=1024)
    assert not UploadedDocument.objects.exists() and not stored_files(b"x" * 2048)


# The API.


def post_files(client, *files: tuple[str, bytes], **fields):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = {"file": [SimpleUploadedFile(name, content) for name, content in files], **fields}
    return client.post("/api/v1/documents", data=data)


def test_the_api_uploads_several_files_lists_them_and_deletes_one(manage_client, django_capture_on_commit_callbacks):
    response = post_files(
        manage_client, ("cities.csv", documents.CSV.encode()), ("wiki.html", documents.HTML.encode()), bot_id="b1"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert [(d["name"], d["duplicate_of"], d["bot_id"]) for d in body] == [
        ("cities.csv", None, "b1"),
        ("wiki.html", None, "b1"),
    ]
    again = post_files(manage_client, ("cities-again.csv", documents.CSV.encode()), bot_id="b1")
    assert again.status_code == 200 and again.json()[0]["duplicate_of"] == body[0]["id"]

    listed = manage_client.get("/api/v1/documents").json()
    assert [d["name"] for d in listed] == ["cities.csv", "wiki.html"]
    assert listed[0]["index_status"] in ("queued", "pending")

    with django_capture_on_commit_callbacks(execute=False):
        assert manage_client.delete(f"/api/v1/documents/{body[0]['id']}").status_code == 204
    assert manage_client.delete(f"/api/v1/documents/{body[0]['id']}").status_code == 404
    assert [d["name"] for d in manage_client.get("/api/v1/documents").json()] == ["wiki.html"]


def test_keys_of_two_bots_uploading_the_same_bytes_each_get_their_own_document():
    """The answer to bot beta's upload says nothing about bot alpha's document with the same bytes (issue 39)."""
    alpha = api_client(name="alpha operator", bot_id="alpha", can_manage=True)
    beta = api_client(name="beta operator", bot_id="beta", can_manage=True)
    first = post_files(alpha, ("cities.csv", documents.CSV.encode()), bot_id="alpha")
    assert first.status_code == 201
    alpha_id = first.json()[0]["id"]

    second = post_files(beta, ("cities.csv", documents.CSV.encode()), bot_id="beta")
    assert second.status_code == 201, second.content
    [answer] = second.json()
    assert answer["duplicate_of"] is None and answer["id"] != alpha_id and answer["bot_id"] == "beta"
    # No field names alpha's document (compared as values: its id as a substring would also match a timestamp).
    assert alpha_id not in [value for field, value in answer.items() if field != "id"]
    assert sorted(UploadedDocument.objects.values_list("bot_id", flat=True)) == ["alpha", "beta"]


def test_the_api_refuses_an_unsupported_type_with_415_and_an_oversized_file_with_413(manage_client, settings):
    unsupported = post_files(manage_client, ("setup.exe", b"MZ"))
    assert unsupported.status_code == 415 and "setup.exe" in unsupported.json()["error"]
    settings.RAG_EXTRACT_MAX_FILE_MB = 1
    big = post_files(manage_client, ("big.txt", b"x" * (1024 * 1024 + 1)))
    assert big.status_code == 413 and "RAG_EXTRACT_MAX_FILE_MB=1" in big.json()["error"]
    bad_scope = post_files(manage_client, ("cities.csv", documents.CSV.encode()), bot_id="two words")
    assert bad_scope.status_code == 422 and "bot_id" in bad_scope.json()["error"]
    assert not UploadedDocument.objects.exists()


def test_the_api_refuses_uploads_without_the_manage_permission(key_client):
    assert post_files(key_client, ("cities.csv", documents.CSV.encode())).status_code == 403
    assert key_client.get("/api/v1/documents").status_code == 403


# The admin.


def test_the_admin_uploads_several_files_at_once_with_one_scope(admin_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    form = admin_client.get("/admin/sources/uploadeddocument/add/").content.decode()
    assert 'type="file"' in form and "multiple" in form
    response = admin_client.post(
        "/admin/sources/uploadeddocument/add/",
        {
            "upload": [
                SimpleUploadedFile("cities.csv", documents.CSV.encode()),
                SimpleUploadedFile("deck.pptx", documents.deck_pptx()),
            ],
            "enabled": "on",
            "bot_id": "b1",
            "client_id": "",
            "channels": "ops",
        },
        follow=True,
    )
    assert response.status_code == 200
    rows = list(UploadedDocument.objects.order_by("name").values_list("name", "bot_id", "channels", "index_status"))
    assert rows == [("cities.csv", "b1", "ops", "queued"), ("deck.pptx", "b1", "ops", "queued")]
    assert Source.objects.get(uploadeddocument__name="deck.pptx").channels == ["ops"]


def test_the_admin_refuses_an_unsupported_file_and_keeps_none_of_the_batch(admin_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = admin_client.post(
        "/admin/sources/uploadeddocument/add/",
        {"upload": [SimpleUploadedFile("cities.csv", b"a,b\n1,2\n"), SimpleUploadedFile("setup.exe", b"MZ")]},
    )
    assert response.status_code == 200  # the form again, with the reason
    assert "setup.exe: .exe cannot be indexed" in response.content.decode()
    assert not UploadedDocument.objects.exists()


def test_the_admin_shows_a_failed_document_with_its_reason(admin_client):
    document = upload("locked.pdf", documents.encrypted_pdf()).document
    uploads.document_index_failed(document_id=document.pk, reason="locked.pdf: encrypted PDF")
    listing = admin_client.get("/admin/sources/uploadeddocument/").content.decode()
    assert "Failed" in listing and "locked.pdf: encrypted PDF" in listing
    page = admin_client.get(f"/admin/sources/uploadeddocument/{document.pk}/change/").content.decode()
    assert "encrypted PDF" in page and document.file_sha256 in page


def test_the_api_takes_a_file_larger_than_the_json_body_limit(manage_client, settings):
    """DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) bounds JSON bodies, not files: RAG_EXTRACT_MAX_FILE_MB does."""
    big = b"# Notes\n\n" + b"The long ledger of the lighthouse keeper.\n" * 80_000  # about 3.4 MB
    assert len(big) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = post_files(manage_client, ("ledger.md", big))
    assert response.status_code == 201, response.content
    assert response.json()[0]["size"] == len(big)


def test_a_file_chosen_on_a_documents_admin_page_replaces_its_file_and_keeps_its_row_and_scope(admin_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    document = upload("notes.md", b"# Notes\n\nThe otter colony moved north.\n", bot_id="b1").document
    response = admin_client.post(
        f"/admin/sources/uploadeddocument/{document.pk}/change/",
        {
            "upload": [SimpleUploadedFile("notes-v2.md", b"# Notes\n\nThe badger sett flooded.\n")],
            "enabled": "on",
            "bot_id": "b1",
            "client_id": "",
            "channels": "",
        },
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    document.refresh_from_db()
    assert (document.name, document.bot_id, UploadedDocument.objects.count()) == ("notes-v2.md", "b1", 1)
    index(document)
    assert "badger" in Chunk.objects.get(source__uploadeddocument=document).content


def test_an_uploaded_file_holding_a_private_key_is_refused_with_the_reason(admin_client, manage_client):
    """The rules every root's file goes through (sources/reading.py) read uploads too: the secret scan first."""
    from sources.tasks import item_index_task

    notes = "# Deploy\n\nThe pelican host key:\n\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n"
    document = upload("deploy.md", notes.encode()).document
    answer = item_index_task.apply(args=["document", document.pk]).get()
    assert answer["status"] == "failed"
    document.refresh_from_db()
    assert document.index_status == IndexStatus.FAILED
    assert document.last_error == "deploy.md: contains a secret (private key header)"
    assert not Chunk.objects.exists()

    listing = admin_client.get("/admin/sources/uploadeddocument/").content.decode()
    assert "Failed" in listing and "contains a secret (private key header)" in listing
    (listed,) = manage_client.get("/api/v1/documents").json()
    assert listed["index_status"] == "failed" and "contains a secret (private key header)" in listed["last_error"]


def test_an_uploaded_html_fragment_is_read_as_text_and_binary_text_is_refused():
    fragment = upload("nav.html", b"<div class='nav'>{% block menu %}Pelican menu{% endblock %}</div>\n").document
    assert index(fragment).chunks_embedded == 1
    assert "Pelican menu" in Chunk.objects.get(source=fragment.source).content
    binary = upload("notes.txt", b"text\x00with a NUL").document
    with pytest.raises(IndexingError, match=r"notes\.txt: binary file \(NUL bytes\)"):
        index(binary)
