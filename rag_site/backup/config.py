"""The backup edge's config builder: the only module of rag_site/backup/ that reads settings."""

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connections
from django.db.migrations.loader import MigrationLoader

from rag_site.backup.pgtools import Database


@dataclass(frozen=True)
class BackupConfig:
    database: Database
    bin_dir: str
    documents_dir: Path | None
    directory: Path
    hours: int
    keep: int


def backup_config(alias: str = "default") -> BackupConfig:
    documents: str | None = settings.STORAGES.get("documents", {}).get("OPTIONS", {}).get("location")  # type: ignore[attr-defined]
    return BackupConfig(
        database=Database.from_settings(connections[alias].settings_dict),
        bin_dir=settings.RAG_PG_BIN_DIR,
        documents_dir=Path(documents) if documents else None,
        directory=settings.RAG_BACKUP_DIR,
        hours=settings.RAG_BACKUP_HOURS,
        keep=settings.RAG_BACKUP_KEEP,
    )


def code_migrations() -> dict[str, set[str]]:
    """app label -> names of the migrations this code has on disk."""
    known: dict[str, set[str]] = {}
    for app, name in MigrationLoader(None, ignore_no_migrations=True).disk_migrations:
        known.setdefault(app, set()).add(name)
    return known
