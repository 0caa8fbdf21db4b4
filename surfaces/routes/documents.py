"""The managed document library over the API: upload, list, delete (the documents' permissions, within grants)."""

from ninja import File, Form, Router
from ninja.files import UploadedFile
from ninja.responses import Status

from access.auth import MANAGE_AUTH, manage_required
from access.managing import row_managed, rows_managed, scope_writable, shared_writable
from access.rights import Right
from retrieval.schemas import API_ERRORS, ErrorOut
from sources import uploads
from sources.config import document_max_bytes
from sources.models import UploadedDocument
from surfaces.schemas import DocumentOut

router = Router(tags=["documents"])
ERRORS = {**API_ERRORS, 404: ErrorOut, 413: ErrorOut, 415: ErrorOut}


@router.post("/documents", response={201: list[DocumentOut], 200: list[DocumentOut], **ERRORS}, auth=MANAGE_AUTH)
def documents_upload(
    request,
    file: list[UploadedFile] = File(...),
    bot_id: str = Form(""),
    client_id: str = Form(""),
    channels: str = Form(""),
):
    """Upload one or more files (multipart, each as ``file``) into the library with one scope; each is indexed by
    the worker. 201 when any file is new, 200 when every one is a duplicate (``duplicate_of`` names the document
    with the same bytes in the same scope; another scope's copy is never named). A file over
    RAG_EXTRACT_MAX_FILE_MB is refused (413), an unsupported type (415), and then none of the files is stored. A
    file the extractor refuses is stored and shows ``failed`` with its reason.

    Needs sources.add_uploadeddocument (a person: for bots, clients and channels their grants cover, naming some of
    each their grants name: no channel is every channel) or a manage key; a shared document (no bot, client or
    channel) needs access.write_shared or a manage key besides."""
    identity = manage_required(request, Right.ADD_DOCUMENTS)
    max_bytes = document_max_bytes()
    uploads.scope_check(bot_id=bot_id, client_id=client_id, channels=channels)
    scope_writable(identity, bot_id=bot_id, client_id=client_id, channels=channels)
    for part in file:  # every file checked before any is stored: a refusal loses nothing and keeps nothing
        uploads.upload_check(part.name or "", part.size or 0, max_bytes=max_bytes)
    results = []
    with uploads.upload_batch():  # one transaction: a failure keeps no row and no file of the batch
        for part in file:
            result = uploads.document_upload(
                uploads.Upload(part.name or "", part.read()),
                bot_id=bot_id,
                client_id=client_id,
                channels=channels,
                max_bytes=max_bytes,
            )
            # Read by DocumentOut: which document these bytes already are (None: stored now).
            result.document.duplicate_of = None if result.created else result.document.pk  # type: ignore[attr-defined]
            results.append(result)
    return Status(201 if any(r.created for r in results) else 200, [r.document for r in results])


@router.get("/documents", response={200: list[DocumentOut], **ERRORS}, auth=MANAGE_AUTH)
def documents_list(request):
    """The uploaded documents with their scope and indexing status. Needs sources.view_uploadeddocument (a person:
    the documents their grants cover) or a manage key (every document)."""
    documents = UploadedDocument.objects.order_by("name", "pk")
    return list(rows_managed(request.auth, documents, right=Right.VIEW_DOCUMENTS, source_path="source"))


@router.delete("/documents/{document_id}", response={204: None, **ERRORS}, auth=MANAGE_AUTH)
def document_delete(request, document_id: int):
    """Delete the document, its chunks and its stored file. Needs sources.delete_uploadeddocument (a person: a
    document their grants cover, others 404; a shared one needs access.write_shared besides) or a manage key."""
    document = row_managed(
        request.auth,
        UploadedDocument.objects.all(),
        document_id,
        right=Right.DELETE_DOCUMENTS,
        source_path="source",
        what="uploaded document",
    )
    shared_writable(request.auth, bot_id=document.bot_id, client_id=document.client_id, channels=document.channels)
    document.delete()
    return Status(204, None)
