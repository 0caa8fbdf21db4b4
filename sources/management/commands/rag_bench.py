"""`manage.py rag_bench chunk|index PATH`: chunking and indexing throughput on a real tree."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from rag_site.errors import ApplicationError
from sources.bench import chunk_bench, index_bench


class Command(BaseCommand):
    help = (
        "Benchmarks. `chunk PATH`: chunk every text file under PATH; MB/s, files/s, chunks per language. "
        "`index PATH`: raw encode vs end-to-end indexing throughput on the same chunks, and an unchanged re-verify."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("what", choices=["chunk", "index"], help="What to measure.")
        parser.add_argument("path", type=Path, help="Source tree to chunk.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object instead of a table.")
        parser.add_argument("--max-chars", type=int, default=1500)
        parser.add_argument("--overlap", type=int, default=200)

    def handle(self, *args, what: str, path: Path, json: bool = False, **options) -> None:
        if not path.is_dir():
            raise CommandError(f"{path} is not a directory")
        if what == "index":
            self._index(path, as_json=json)
            return
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


    def _index(self, path: Path, *, as_json: bool) -> None:
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)  # a fresh var/ has no tables yet
        try:
            report = index_bench(path)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        if as_json:
            self.stdout.write(_json(report))
            return
        self.stdout.write(f"indexed {report['files']} files into {report['chunks']} chunks in {report['index_seconds']} s")
        self.stdout.write(f"  raw encode     {report['encode_chunks_per_s']:>8} chunks/s")
        self.stdout.write(f"  end-to-end     {report['index_chunks_per_s']:>8} chunks/s")
        self.stdout.write(f"  ratio          {report['ratio']:>8}   (target >= 0.9)")
        self.stdout.write(f"  re-verify      {report['reverify_seconds']:>8} s, {report['reverify_embedded']} chunks embedded (unchanged tree)")


def _json(data: dict) -> str:
    return json.dumps(data, indent=2)
