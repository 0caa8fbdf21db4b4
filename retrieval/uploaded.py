"""Uploaded documents read back for a person: the viewer's extracted text and the original bytes, within scope.

The scope rule is search's (``access.identity.scope_for``): a document is
visible when its Source is enabled and the caller may see it; any other
document answers NotFound worded exactly like one that does not exist. The
text is extracted again from the stored file, by the indexer's extractor in
its sandbox (retrieval/documents.py, cached by the bytes' hash), so its
lines are the lines the chunks cite. Only the bytes uploaded (their SHA-256
is the one recorded) are served.
"""

import hashlib
from dataclasses import dataclass

from access.identity import Identity, scope_for
from kernel.errors import Conflict, InvalidInput, NotFound, Unavailable
from retrieval.config import FilesLimits
from retrieval.documents import document_text
from sources.extract import Anchor, extractor_for
from sources.models import IndexStatus, UploadedDocument


@dataclass(frozen=True, slots=True)
class UploadedText:
    document: UploadedDocument
    text: str  # the extracted text (a text upload: its own text), whose lines the chunks cite
    anchors: tuple[Anchor, ...]  # its pages, slides or sheets; () for a text upload or a document without pages
    extracted: bool  # False: a text upload (.md, .txt), shown as it is
    stale: bool  # replaced or re-indexed since its chunks were made: hits may cite older lines


def uploaded_visible(identity: Identity, document_id: int) -> UploadedDocument:
    """The uploaded document ``document_id`` if the caller may see it; NotFound otherwise, as for a missing id."""
    visible = scope_for(identity).source_ids_sql()
    document = UploadedDocument.objects.filter(pk=document_id, source__in=visible).first()
    if document is None:
        raise NotFound(f"document {document_id} not found")
    return document


def uploaded_original(identity: Identity, document_id: int) -> tuple[UploadedDocument, bytes]:
    """The bytes uploaded, for download; Conflict when the stored file is not those bytes any more."""
    document = uploaded_visible(identity, document_id)
    return document, _stored_bytes(document)


def uploaded_text(identity: Identity, document_id: int, *, limits: FilesLimits) -> UploadedText:
    """The document as the viewer shows it: its extracted text with page anchors; InvalidInput with the
    extractor's reason when the file cannot be extracted (as indexing recorded it)."""
    document = uploaded_visible(identity, document_id)
    raw = _stored_bytes(document)
    stale = document.indexed_at is not None and document.index_status != IndexStatus.INDEXED
    if extractor_for(document.name) is None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{document.name}: not UTF-8 text (byte {exc.start})") from exc
        return UploadedText(document=document, text=text, anchors=(), extracted=False, stale=stale)
    # Uploads are chosen by an administrator and indexed without a secret scan: shown the same way.
    extracted = document_text(document.name, raw, limits=limits.extract, scan_secrets=False)
    if isinstance(extracted, str):
        raise InvalidInput(f"{document.name} cannot be shown: {extracted}", details={"reason": extracted})
    return UploadedText(
        document=document, text=extracted.text, anchors=tuple(extracted.anchors), extracted=True, stale=stale
    )


def _stored_bytes(document: UploadedDocument) -> bytes:
    try:
        with document.file.open("rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise Unavailable(f"{document.name}: the stored file cannot be read ({exc.strerror or exc})") from exc
    if hashlib.sha256(raw).hexdigest() != document.file_sha256:
        raise Conflict(f"{document.name}: the stored file is not the one uploaded (its SHA-256 differs)")
    return raw
