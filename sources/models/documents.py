"""Uploaded documents: files kept in a managed library (not a workspace root), one source each."""

from django.core.files.storage import Storage, storages
from django.db import models

from sources.models.base import Indexed, Scoped


def documents_storage() -> Storage:
    """The ``documents`` storage of STORAGES (a directory under RAG_VAR_DIR unless configured otherwise).

    A callable, so a deployment can point STORAGES["documents"] at any Django storage backend without a migration.
    """
    return storages["documents"]


def upload_path(instance: "UploadedDocument", filename: str) -> str:
    # Named by content: two documents never write over each other's file, and the original name stays on the row.
    return f"{instance.file_sha256[:2]}/{instance.file_sha256}/{filename}"


class DocumentFileField(models.FileField):
    """A FileField whose storage and naming stay out of migrations: they are configuration, not schema, and a
    migration may not import live code (tests/test_migrations_pure.py)."""

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        kwargs.pop("storage", None)
        kwargs["upload_to"] = ""  # what a FileField without one says
        return name, "django.db.models.FileField", args, kwargs


class UploadedDocument(Scoped, Indexed):
    name = models.CharField(max_length=255, help_text="The uploaded file's name; its suffix chooses the extractor.")
    file = DocumentFileField(storage=documents_storage, upload_to=upload_path, max_length=512, editable=False)
    size = models.PositiveBigIntegerField(default=0, editable=False)
    file_sha256 = models.CharField(
        max_length=64, db_index=True, editable=False, help_text="SHA-256 of the uploaded bytes: finds duplicates."
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["name", "pk"]
        verbose_name = "uploaded document"

    def __str__(self) -> str:
        return self.name
