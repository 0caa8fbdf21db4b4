"""Uploaded documents: receive, store, index, replace and delete files of the managed library.

The edges (admin, API) call ``document_upload``; the worker calls
``document_index``. A file is stored once under its content hash
(STORAGES["documents"]); indexing reads it back through the rules every
root's file goes through (sources/reading.py: the secret scan, the NUL
probe, LFS pointers, the extraction stage in a child process under its
limits) and stores the chunks through sources/ingest.py like a skill's. A
file the rules refuse is recorded failed with its reason; nothing else is
lost.

The file is written before its row (the row records the name the storage
chose), so a transaction that rolls back after the write would leave a
file nothing points to. ``upload_batch`` is the transaction the edges open
around their uploads: it deletes, when it rolls back, every file written
inside it.
"""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import PurePosixPath

from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import Storage
from django.db import transaction

from kernel.errors import InvalidInput, NotFound, TooLarge, UnsupportedType
from sources import ingest
from sources.chunking import chunker_identity
from sources.config import IndexingConfig, indexing_config
from sources.extract import EXTRACTORS
from sources.ingest import IndexingError, IndexOutcome, embedding_model_for, fingerprint
from sources.models import Source, UploadedDocument, source_key
from sources.reading import ReadRules, bytes_chunks, extractor_identity
from sources.walk import Skipped

# Documents go through the extraction stage; these text formats go straight to chunking.
TEXT_SUFFIXES = (".md", ".markdown", ".txt", ".rst")
SUPPORTED_SUFFIXES = tuple(sorted(EXTRACTORS)) + TEXT_SUFFIXES


@dataclass(frozen=True, slots=True)
class Upload:
    """One file as it arrived: its name (no directories) and its bytes."""

    name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class UploadResult:
    document: UploadedDocument
    created: bool  # False: the same bytes are already in the library (``document`` is that one)
    replaced: bool = False  # True: ``replace`` got the new file


# The files written inside the innermost open ``upload_batch``: (storage, name) each; None outside one.
_written: ContextVar[list[tuple[Storage, str]] | None] = ContextVar("uploads_written", default=None)


@contextmanager
def upload_batch() -> Iterator[None]:
    """A transaction for one or more ``document_upload`` calls: when it rolls back, the files they stored go too.

    Django runs callbacks on commit only, so the cleanup is this block's: open it as the request's outermost
    transaction (the admin's changeform, the API's upload), where leaving it by an exception means the rows
    were not committed.
    """
    written: list[tuple[Storage, str]] = []
    token = _written.set(written)
    try:
        with transaction.atomic():
            yield
    except BaseException:
        for storage, name in written:
            storage.delete(name)
        raise
    finally:
        _written.reset(token)


def upload_check(name: str, size: int, *, max_bytes: int) -> str:
    """The file's clean name, or the error that refuses it before anything is stored."""
    clean = PurePosixPath(name.replace("\\", "/")).name.strip()
    if not clean or clean in (".", "..") or "\x00" in clean:
        raise InvalidInput(f"the file name {name!r} is not usable")
    suffix = PurePosixPath(clean).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise UnsupportedType(
            f"{clean}: {suffix or 'files without a suffix'} cannot be indexed; "
            f"supported: {' '.join(SUPPORTED_SUFFIXES)}"
        )
    if size > max_bytes:
        raise TooLarge(
            f"{clean} is {size:,} bytes; the limit is RAG_EXTRACT_MAX_FILE_MB={max_bytes // (1024 * 1024)} MB"
        )
    return clean[:255]


def scope_check(*, bot_id: str, client_id: str, channels: str) -> None:
    """InvalidInput naming the field when a bot, client or channel name cannot be stored (the model's validators)."""
    try:
        UploadedDocument(bot_id=bot_id, client_id=client_id, channels=channels).clean_fields(
            exclude=["name", "file", "file_sha256", "source", "size"]
        )
    except ValidationError as exc:
        field, problems = next(iter(exc.message_dict.items()))
        raise InvalidInput(f"{field}: {' '.join(problems)}", details={"field": field}) from None


def document_upload(
    upload: Upload,
    *,
    bot_id: str = "",
    client_id: str = "",
    channels: str = "",
    replace: int | None = None,
    max_bytes: int,
) -> UploadResult:
    """Store one file and its scope, or recognise it as a duplicate; the caller queues indexing (a saved row does).

    ``replace``: the id of a document whose file this one replaces (same row, same scope unless given; its chunks
    are replaced at the next indexing). A duplicate (same bytes, same scope) of another document is not stored
    again; the same bytes in another scope make a document of their own.
    Outside an ``upload_batch`` it opens its own, so a row that is not written leaves no file either.
    """
    if _written.get() is None:
        with upload_batch():
            return document_upload(
                upload,
                bot_id=bot_id,
                client_id=client_id,
                channels=channels,
                replace=replace,
                max_bytes=max_bytes,
            )
    name = upload_check(upload.name, len(upload.data), max_bytes=max_bytes)
    scope_check(bot_id=bot_id, client_id=client_id, channels=channels)
    digest = hashlib.sha256(upload.data).hexdigest()
    duplicate = duplicate_in_scope(
        digest=digest, bot_id=bot_id, client_id=client_id, channels=channels, exclude_pk=replace
    )
    if duplicate is not None:
        return UploadResult(document=duplicate, created=False)
    if replace is not None:
        document = UploadedDocument.objects.filter(pk=replace).first()
        if document is None:
            raise NotFound(f"no uploaded document {replace}")
        old_file = document.file.name
    else:
        document, old_file = UploadedDocument(), ""
    document.name, document.size, document.file_sha256 = name, len(upload.data), digest
    document.bot_id, document.client_id, document.channels = bot_id, client_id, channels
    document.file.save(name, ContentFile(upload.data), save=False)
    written = _written.get()
    assert written is not None  # inside the batch opened above
    written.append((document.file.storage, str(document.file.name)))
    document.save()  # post_save: the source's scope, then the indexing queued after commit
    if old_file and old_file != document.file.name:
        storage = document.file.storage
        transaction.on_commit(lambda: storage.delete(old_file))
    return UploadResult(document=document, created=replace is None, replaced=replace is not None)


def duplicate_in_scope(
    *, digest: str, bot_id: str, client_id: str, channels: str, exclude_pk: int | None = None
) -> UploadedDocument | None:
    """The first document with these bytes and exactly this scope (channels in any order), or None.

    Only the same scope counts: a copy another bot, client or channel set holds is not the uploader's to be told
    about (its id would reveal that the bytes exist there), and a shared copy is not the bot's own to edit.
    """
    wanted = UploadedDocument(bot_id=bot_id, client_id=client_id, channels=channels).scope_fields
    same = UploadedDocument.objects.filter(file_sha256=digest, bot_id=bot_id, client_id=client_id).order_by("pk")
    if exclude_pk is not None:
        same = same.exclude(pk=exclude_pk)  # the document's own file again is a replacement, not a duplicate
    return next((document for document in same if document.scope_fields == wanted), None)


def document_source_sync(document: UploadedDocument, *, title: str | None = None) -> Source:
    """The document's Source row, created when it is saved; enabled and scope follow the document at once."""
    source = document.source
    if source is None:
        source, _ = Source.objects.get_or_create(key=source_key(document), defaults={"kind": Source.Kind.DOCUMENT})
        UploadedDocument.objects.filter(pk=document.pk).update(source=source)
        document.source = source
    changes = {"enabled": document.enabled, "key": source_key(document), "title": title or document.name}
    changes.update(document.scope_fields)
    Source.objects.filter(pk=source.pk).update(**changes)
    for field, value in changes.items():
        setattr(source, field, value)
    return source


def document_index(
    *, document_id: int, force: bool = False, config: IndexingConfig | None = None
) -> IndexOutcome | None:
    """Extract, chunk, embed and store one uploaded document; a no-op when its fingerprint is unchanged.

    None when the document was deleted after queueing. A file the extractor
    refuses (encrypted, no text layer, a zip bomb, too many pages) raises
    IndexingError with that reason, and the document keeps its previous chunks.
    """
    config = config or indexing_config()
    document = UploadedDocument.objects.filter(pk=document_id).first()
    if document is None:
        return None
    model = embedding_model_for(config=config.embedding)
    digest = document.file_sha256
    extractor = extractor_identity(document.name)
    chunker = chunker_identity(document.name, document=bool(extractor))
    print_ = fingerprint(
        content=digest, model=model.spec.identity, config=config.ingest, chunker=chunker, extractor=extractor
    )
    if not force and print_ == document.fingerprint:
        ingest.item_unchanged(UploadedDocument, document_id)
        return IndexOutcome(skipped=True)
    ingest.item_running(UploadedDocument, document_id)
    try:
        with document.file.open("rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise IndexingError(f"{document.name}: the stored file cannot be read ({exc.strerror or exc})") from exc
    if hashlib.sha256(raw).hexdigest() != digest:
        raise IndexingError(f"{document.name}: the stored file is not the one uploaded (its SHA-256 differs)")
    # The rules of every root's files: the secret scan always (a library has no switch for it), the upload limit.
    rules = ReadRules(
        max_chars=config.ingest.max_chars,
        overlap=config.ingest.overlap,
        limits=config.extract,
        max_text_bytes=config.max_document_bytes,
    )
    read = bytes_chunks(raw, document.name, rules)
    if isinstance(read, Skipped):
        raise IndexingError(f"{document.name}: {read.reason}")
    text, chunks = read[1].text, read[1].chunks
    if not chunks:
        raise IndexingError(f"{document.name}: no text to index")
    source = document_source_sync(document)
    stored = ingest.Document(
        source=source,
        generation=source.active_generation,
        path=document.name,
        chunks=chunks,
        model=model,
        chunker=chunker,
        content_hash=digest,
        fingerprint=print_,
        text=text if config.ingest.contextual else "",
    )
    deleted = ingest.item_store(UploadedDocument, document_id, stored, config=config)
    if deleted is None:
        return None
    return IndexOutcome(skipped=False, chunks_embedded=len(chunks), chunks_deleted=deleted)


def document_index_failed(*, document_id: int, reason: str) -> None:
    ingest.item_failed(UploadedDocument, document_id, reason)


def document_delete_source(*, document_id: int) -> None:
    """Its source and, by cascade, its chunks; read from the database (the caller's copy may predate indexing)."""
    Source.objects.filter(uploadeddocument__pk=document_id).delete()


def document_delete_file(document: UploadedDocument) -> None:
    """The stored original goes once the row's deletion is committed (a rolled-back delete keeps it)."""
    if document.file.name:
        storage, name = document.file.storage, document.file.name
        transaction.on_commit(lambda: storage.delete(name))
