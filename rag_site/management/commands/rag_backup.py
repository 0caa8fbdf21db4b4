"""`manage.py rag_backup PATH`: the whole database (pg_dump -Fc) and uploaded documents, with a manifest."""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from rag_site.backup.config import backup_config
from rag_site.backup.errors import BackupError
from rag_site.backup.services import backup_create


class Command(BaseCommand):
    help = "Back up the database into the new directory PATH (database.dump, manifest.json, documents/)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="A directory that does not exist yet (or is empty).")
        parser.add_argument("--database", default="default", help="The Django database alias (default: default).")

    def handle(self, *args, path: Path, database: str, **options) -> None:
        config = backup_config(database)
        started = time.perf_counter()
        try:
            manifest = backup_create(
                target=path.resolve(),
                database=config.database,
                bin_dir=config.bin_dir,
                documents_dir=config.documents_dir,
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        seconds = time.perf_counter() - started
        self.stdout.write(f"backed up to {path} in {seconds:.1f} s: dump {manifest.dump_bytes / 1e6:.1f} MB")
        for label, count in manifest.counts.items():
            self.stdout.write(f"  {label}: {count}")
