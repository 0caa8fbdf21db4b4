"""Uploads on a real Celery worker: uploaded through the API, indexed by the worker, found within scope, deleted."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sources.models import Chunk
from tests import documents
from tests.conftest import api_client, running_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def listed(client) -> dict[str, dict]:
    return {d["name"]: d for d in client.get("/api/v1/documents").json()}


def settled(client) -> dict[str, dict] | None:
    rows = listed(client)
    return rows if rows and all(d["index_status"] in ("indexed", "failed") for d in rows.values()) else None


def hit_paths(client, query: str) -> list[tuple[str, str]]:
    response = client.post("/api/v1/search", data=json.dumps({"query": query, "k": 5}), content_type="application/json")
    assert response.status_code == 200, response.content
    return [(hit["path"], hit["symbol"]) for hit in response.json()["hits"]]


def test_documents_uploaded_through_the_api_are_indexed_by_the_worker_and_found_by_their_bot_only(manage_client):
    with running_worker("upload-worker"):
        response = manage_client.post(
            "/api/v1/documents",
            data={
                "file": [
                    SimpleUploadedFile("report.pdf", documents.report_pdf()),
                    SimpleUploadedFile("locked.pdf", documents.encrypted_pdf()),
                ],
                "bot_id": "b1",
            },
        )
        assert response.status_code == 201, response.content
        done = wait_for(lambda: settled(manage_client), what="both documents indexed or failed")
    assert done["report.pdf"]["index_status"] == "indexed", done["report.pdf"]["last_error"]
    assert done["locked.pdf"]["index_status"] == "failed"
    assert "locked.pdf: encrypted PDF" in done["locked.pdf"]["last_error"]

    assert hit_paths(api_client(name="bot one", bot_id="b1"), documents.PAGE_THREE_PHRASE)[0] == ("report.pdf", "p. 3")
    assert "report.pdf" not in [
        p for p, _ in hit_paths(api_client(name="bot two", bot_id="b2"), documents.PAGE_THREE_PHRASE)
    ]

    assert manage_client.delete(f"/api/v1/documents/{done['report.pdf']['id']}").status_code == 204
    assert not Chunk.objects.exists()
    assert list(listed(manage_client)) == ["locked.pdf"]
