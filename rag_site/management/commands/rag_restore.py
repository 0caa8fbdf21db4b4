"""`manage.py rag_restore PATH [--force]`: replace the database's contents with a backup's, after checking it."""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from rag_site.backup.config import backup_config, code_migrations
from rag_site.backup.errors import BackupError
from rag_site.backup.services import backup_restore, embedding_exports_ready


class Command(BaseCommand):
    help = (
        "Restore a backup made by rag_backup. Refuses a damaged backup, one from a newer rag-site, and a database "
        "that holds data unless --force. Stop the web and workers first."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="A directory written by rag_backup.")
        parser.add_argument("--force", action="store_true", help="Replace a database that holds data.")
        parser.add_argument("--database", default="default", help="The Django database alias (default: default).")
        parser.add_argument(
            "--no-warm-up",
            action="store_true",
            help="Do not export the embedding models' ONNX files now (the first search after the restore does).",
        )

    def handle(self, *args, path: Path, force: bool, database: str, no_warm_up: bool, **options) -> None:
        config = backup_config(database)
        connections.close_all()  # this process's own connection must not hold the tables the restore drops
        started = time.perf_counter()
        try:
            report = backup_restore(
                source=path.resolve(),
                database=config.database,
                known_migrations=code_migrations(),
                force=force,
                bin_dir=config.bin_dir,
                documents_dir=config.documents_dir,
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from exc
        seconds = time.perf_counter() - started
        manifest = report.manifest
        self.stdout.write(f"restored {path} (rag-site {manifest.version}, {manifest.created_at}) in {seconds:.1f} s")
        for label, count in report.counts.items():
            self.stdout.write(f"  {label}: {count}")
        if report.pending:
            self.stdout.write(f"the backup predates {len(report.pending)} migrations: run `manage.py migrate`")
        if not no_warm_up:
            # Here, not in the web: the web starts serving at once and must not wait for a model.
            for line in embedding_exports_ready(manifest.embedding_models):
                self.stdout.write(line)
