"""`manage.py rag_eval DATASET_DIR`: every retrieval channel scored side by side."""

import json
import time
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from rag_site.errors import ApplicationError
from retrieval.evaluation import beir_load, dataset_evaluate, dataset_index


class Command(BaseCommand):
    help = (
        "Index a BEIR dataset (corpus.jsonl, queries.jsonl, qrels/test.tsv) through the real pipeline and print "
        "nDCG@k, Recall@k, Recall@100 and MRR@k for every channel from one run."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", type=Path, help="Directory of a BEIR-format dataset.")
        parser.add_argument("--k", type=int, default=10, help="Cut-off for nDCG, Recall and MRR (default 10).")
        parser.add_argument("--json", action="store_true", help='Print {"channels": {name: {metric: value}}}.')
        parser.add_argument("--keep", action="store_true", help="Keep the indexed dataset; a re-run then embeds nothing.")

    def handle(self, *args, dataset: Path, k: int, json: bool = False, keep: bool = False, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)  # a fresh var/ has no tables yet
        try:
            data = beir_load(dataset)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        started = time.perf_counter()
        source, embedded = dataset_index(data)
        indexed = time.perf_counter() - started
        try:
            channels = dataset_evaluate(data, source, k=k)
        finally:
            if not keep:
                source.delete()
        report = {
            "dataset": data.name, "documents": len(data.corpus), "queries": len(data.qrels), "k": k,
            "embedded_chunks": embedded, "index_seconds": round(indexed, 1), "channels": channels,
        }
        if json:
            self.stdout.write(_dumps(report))
            return
        self.stdout.write(f"{data.name}: {len(data.corpus)} documents, {len(data.qrels)} judged queries; "
                          f"{embedded} chunks embedded in {indexed:.1f} s")
        metrics = list(next(iter(channels.values())))
        self.stdout.write(f"  {'channel':<15}" + "".join(f"{m:>12}" for m in metrics))
        for name, values in channels.items():
            self.stdout.write(f"  {name:<15}" + "".join(f"{values[m]:>12.3f}" for m in metrics))


def _dumps(data: dict) -> str:
    return json.dumps(data, indent=2)
