"""A rolled-back upload leaves no file behind: the stored original goes with the row that was never committed."""

import hashlib
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError

from sources import uploads
from sources.models import UploadedDocument
from surfaces.admin.documents import UploadedDocumentAdmin
from tests import documents

pytestmark = pytest.mark.django_db

LIMIT = 50 * 1024 * 1024
CSV = documents.CSV.encode()


def stored_files() -> set[str]:
    """Every file under the documents storage (STORAGES["documents"], below this run's RAG_VAR_DIR)."""
    location = Path(storages["documents"].location)
    return {str(p.relative_to(location)) for p in location.rglob("*") if p.is_file()}


@pytest.fixture(autouse=True)
def before() -> set[str]:
    """What earlier tests of the run left in the storage (their rows rolled back with them, not their files)."""
    return stored_files()


def new_files(before: set[str], data: bytes | None = None) -> list[str]:
    """Files this test stored; only those of ``data``'s bytes if given."""
    digest = hashlib.sha256(data).hexdigest() if data is not None else ""
    return sorted(
        name for name in stored_files() - before if name.startswith(f"{digest[:2]}/{digest}/" if data else "")
    )


@pytest.fixture
def second_save_fails(monkeypatch):
    """The second document's row cannot be written (as when the database goes away mid-request)."""
    real, calls = uploads.document_source_sync, []

    def flaky(document, **kwargs):
        calls.append(document.name)
        if len(calls) == 2:
            raise OperationalError("server closed the connection unexpectedly")
        return real(document, **kwargs)

    monkeypatch.setattr(uploads, "document_source_sync", flaky)


def test_a_batch_that_rolls_back_after_its_files_were_stored_leaves_none_of_them(before):
    with pytest.raises(RuntimeError):
        with uploads.upload_batch():
            uploads.document_upload(uploads.Upload("report.pdf", documents.report_pdf()), max_bytes=LIMIT)
            assert new_files(before)  # written before the row, inside the transaction
            raise RuntimeError("a later step of the same request fails")
    assert new_files(before) == [] and not UploadedDocument.objects.exists()


def test_a_single_upload_whose_row_fails_leaves_no_file(before, second_save_fails):
    uploads.document_upload(uploads.Upload("cities.csv", CSV), max_bytes=LIMIT)
    with pytest.raises(OperationalError):
        uploads.document_upload(uploads.Upload("report.pdf", documents.report_pdf()), max_bytes=LIMIT)
    assert new_files(before, documents.report_pdf()) == [] and len(new_files(before, CSV)) == 1


def test_an_api_upload_whose_second_file_fails_keeps_neither_row_nor_file(before, manage_client, second_save_fails):
    manage_client.raise_request_exception = False
    response = manage_client.post(
        "/api/v1/documents",
        data={
            "file": [SimpleUploadedFile("cities.csv", CSV), SimpleUploadedFile("report.pdf", documents.report_pdf())]
        },
    )
    assert response.status_code >= 500
    assert not UploadedDocument.objects.exists()
    assert new_files(before) == []


def test_an_admin_upload_that_fails_after_storing_its_files_keeps_none_of_them(before, admin_client, monkeypatch):
    def broken_log(*args, **kwargs):
        raise RuntimeError("the admin's log entry cannot be written")

    # The admin logs the addition after save_model stored the files, inside the same transaction.
    monkeypatch.setattr(UploadedDocumentAdmin, "log_addition", broken_log)
    with pytest.raises(RuntimeError):
        admin_client.post(
            "/admin/sources/uploadeddocument/add/",
            {
                "upload": [
                    SimpleUploadedFile("cities.csv", CSV),
                    SimpleUploadedFile("deck.pptx", documents.deck_pptx()),
                ],
                "enabled": "on",
                "bot_id": "",
                "client_id": "",
                "channels": "",
            },
        )
    assert not UploadedDocument.objects.exists()
    assert new_files(before) == []


def test_a_committed_batch_keeps_its_files(before):
    with uploads.upload_batch():
        uploads.document_upload(uploads.Upload("cities.csv", CSV), max_bytes=LIMIT)
    assert len(new_files(before, CSV)) == 1
