"""The manifest beside a dump: what the backup holds, read in the dump's own snapshot, and the dump's checksum."""

import hashlib
import json
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from psycopg import Cursor, sql

from rag_site.backup.errors import BackupError

MANIFEST_NAME = "manifest.json"
DUMP_NAME = "database.dump"
FORMAT = 1

# The tables a person would recognise their data by (app label, model): counted into the manifest, compared
# after a restore, and the test of whether a database "holds data".
MAIN_MODELS: tuple[tuple[str, str], ...] = (
    ("auth", "User"),
    ("access", "ApiKey"),
    ("access", "AccessGrant"),
    ("sources", "EmbeddingModel"),
    ("sources", "Skill"),
    ("sources", "Tool"),
    ("sources", "WorkspaceRoot"),
    ("sources", "IndexedFile"),
    ("sources", "UploadedDocument"),
    ("sources", "Source"),
    ("sources", "Chunk"),
    ("sources", "IndexJob"),
)


def main_tables() -> dict[str, str]:
    """label ("sources.Chunk") -> table name, from the models, so a renamed table is followed."""
    from django.apps import apps

    return {f"{app}.{model}": apps.get_model(app, model)._meta.db_table for app, model in MAIN_MODELS}


@dataclass
class Manifest:
    version: str
    created_at: str
    server_version: str
    migrations: dict[str, list[str]]
    embedding_models: list[dict[str, Any]]
    counts: dict[str, int]
    dump_sha256: str = ""
    dump_bytes: int = 0
    documents: list[str] = field(default_factory=list)
    format: int = FORMAT
    product: str = "rag-site"

    def write(self, directory: Path) -> None:
        (directory / MANIFEST_NAME).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, directory: Path) -> "Manifest":
        path = directory / MANIFEST_NAME
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise BackupError(f"{directory} is not a rag-site backup: it has no {MANIFEST_NAME}") from None
        except (OSError, ValueError) as exc:
            raise BackupError(f"{path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or data.get("product") != "rag-site":
            raise BackupError(f"{path} is not a rag-site manifest")
        if data.get("format") != FORMAT:
            raise BackupError(f"{path} has format {data.get('format')!r}; this rag-site reads format {FORMAT}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise BackupError(f"{path} is malformed: {exc}") from exc


def product_version() -> str:
    try:
        return metadata.version("rag-site")
    except metadata.PackageNotFoundError:
        return "unknown"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def table_counts(cursor: Cursor) -> dict[str, int]:
    """Rows per main table; a table that does not exist yet (a database never migrated) counts 0."""
    counts = {}
    for label, table in main_tables().items():
        row = cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
        if row and row[0]:
            counted = cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
            counts[label] = counted[0] if counted else 0
        else:
            counts[label] = 0
    return counts


def applied_migrations(cursor: Cursor) -> dict[str, list[str]]:
    if not _exists(cursor, "django_migrations"):
        return {}
    applied: dict[str, list[str]] = {}
    for app, name in cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, name"):
        applied.setdefault(app, []).append(name)
    return applied


def embedding_models(cursor: Cursor) -> list[dict[str, Any]]:
    from sources.models import EmbeddingModel

    table = EmbeddingModel._meta.db_table
    if not _exists(cursor, table):
        return []
    query = sql.SQL("SELECT provider, name, dimensions, normalized FROM {} ORDER BY id").format(sql.Identifier(table))
    return [
        {"provider": provider, "name": name, "dimensions": dimensions, "normalized": normalized}
        for provider, name, dimensions, normalized in cursor.execute(query)
    ]


def _exists(cursor: Cursor, table: str) -> bool:
    row = cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
    return bool(row and row[0])
