"""`manage.py rag_bench chunk PATH`: chunking throughput on a real tree."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sources.bench import chunk_bench


class Command(BaseCommand):
    help = "Benchmarks. `chunk PATH`: chunk every text file under PATH and report MB/s, files/s, chunks per language."

    def add_arguments(self, parser) -> None:
        parser.add_argument("what", choices=["chunk"], help="What to measure.")
        parser.add_argument("path", type=Path, help="Source tree to chunk.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object instead of a table.")
        parser.add_argument("--max-chars", type=int, default=1500)
        parser.add_argument("--overlap", type=int, default=200)

    def handle(self, *args, what: str, path: Path, json: bool = False, **options) -> None:
        if not path.is_dir():
            raise CommandError(f"{path} is not a directory")
        result = chunk_bench(path, max_chars=options["max_chars"], overlap=options["overlap"])
        if json:
            self.stdout.write(_json(result.as_dict()))
            return
        self.stdout.write(f"chunked {result.files} files, {result.bytes / 1e6:.1f} MB, into {result.chunks} chunks")
        self.stdout.write(f"  {result.mb_per_s:.2f} MB/s and {result.files_per_s:.0f} files/s on one core "
                          f"({result.cpu_seconds:.2f} s CPU, {result.seconds:.2f} s wall)")
        self.stdout.write(f"  {'language':<12} {'files':>7} {'chunks':>8}")
        for language, chunks in result.by_language.most_common():
            self.stdout.write(f"  {language:<12} {result.files_by_language[language]:>7} {chunks:>8}")


def _json(data: dict) -> str:
    return json.dumps(data, indent=2)
