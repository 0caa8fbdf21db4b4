"""`manage.py rag_eval DATASET_DIR`: every retrieval channel scored side by side."""

import json
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from kernel.errors import ApplicationError
from kernel.llm import llm_client
from measure.answers import answers_evaluate
from measure.evaluation import (
    GIBBERISH_QUERIES,
    beir_load,
    code_confidence,
    code_context,
    code_evaluate,
    code_queries_load,
    code_root_index,
    dataset_confidence,
    dataset_context,
    dataset_evaluate,
    dataset_index,
    indexing_notes,
    skipped_take,
)
from retrieval.config import CitedAnswerConfig


class Command(BaseCommand):
    help = (
        "Index a BEIR dataset (corpus.jsonl, queries.jsonl, qrels/test.tsv) through the real pipeline and print "
        "nDCG@k, Recall@k, Recall@100 and MRR@k for every channel from one run."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", type=Path, nargs="?", help="Directory of a BEIR-format dataset.")
        parser.add_argument("--code", type=Path, help="queries.jsonl from make_code_eval.py (code search mode).")
        parser.add_argument("--root", type=Path, help="With --code: the source tree the queries point into.")
        parser.add_argument("--k", type=int, default=10, help="Cut-off for nDCG, Recall and MRR (default 10).")
        parser.add_argument("--json", action="store_true", help='Print {"channels": {name: {metric: value}}}.')
        parser.add_argument(
            "--keep", action="store_true", help="Keep the indexed dataset; a re-run then embeds nothing."
        )
        parser.add_argument(
            "--answers",
            type=int,
            default=20,
            help="With a chat model configured: answer this many judged queries with citations and score them "
            "(citation precision, judged faithfulness); 0: none (default 20).",
        )

    def handle(self, *args, dataset: Path | None, k: int, json: bool = False, keep: bool = False, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)  # a fresh var/ has no tables yet
        if options["code"]:
            return self._code(options["code"], options["root"], k=k, as_json=json, keep=keep)
        if dataset is None:
            raise CommandError("give a BEIR dataset directory, or --code QUERIES --root SRC_DIR")
        try:
            data = beir_load(dataset)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        started = time.perf_counter()
        source, embedded = dataset_index(data)
        indexed = time.perf_counter() - started
        try:
            channels = dataset_evaluate(data, source, k=k)
            context = dataset_context(data, source)
            confidence = dataset_confidence(data, source)
            answers = self._answers(data, source, limit=options["answers"])
        finally:
            if not keep:
                source.delete()
        skipped = skipped_take()
        report = {
            "dataset": data.name,
            "documents": len(data.corpus),
            "queries": len(data.qrels),
            "k": k,
            "embedded_chunks": embedded,
            "index_seconds": round(indexed, 1),
            "channels": channels,
            "context": context,
            "no_good_match": confidence,
            "searches_skipping_work": skipped,
        }
        if answers is not None:
            report["answers"] = answers
        if json:
            self.stdout.write(_dumps(report))
            return
        self.stdout.write(
            f"{data.name}: {len(data.corpus)} documents, {len(data.qrels)} judged queries; "
            f"{embedded} chunks embedded in {indexed:.1f} s"
        )
        self._notes(skipped)
        self._table(channels)
        self._context(context, what="a relevant passage")
        self._confidence(confidence)
        if answers is not None:
            self.stdout.write(
                f"  cited answers ({settings.RAG_LLM_MODEL}) to {answers['answered']} queries "
                f"({answers['failed']} without an answer): citation precision {answers['citation_precision']:.3f} "
                f"over {answers['citations']} citations, faithfulness {answers['faithfulness']:.3f} "
                f"(judged {answers['faithfulness_judged']}), {answers['dropped_markers']} markers naming no source, "
                f"{answers['uncited_numeric_sentences']} sentences with an uncited number"
            )

    def _answers(self, data, source, *, limit: int) -> dict | None:
        """The answer section, when a chat model is configured and answers are asked for."""
        config = CitedAnswerConfig.from_settings()
        if not config.enabled or limit <= 0:
            return None
        queries = [(q, text) for q, text in data.queries.items() if q in data.qrels][:limit]
        client = llm_client(config.llm).with_options(timeout=config.timeout)
        return answers_evaluate(queries=queries, qrels=data.qrels, source=source, config=config, client=lambda: client)

    def _code(self, queries_path: Path, root_dir: Path | None, *, k: int, as_json: bool, keep: bool) -> None:
        if root_dir is None:
            raise CommandError("--code needs --root SRC_DIR")
        try:
            queries = code_queries_load(queries_path, root=root_dir)
            root, job = code_root_index(root_dir)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        try:
            channels = code_evaluate(queries, root, k=k)
            context = code_context(queries, root)
            confidence = code_confidence(queries, root)
        finally:
            if not keep:
                root.delete()
        skipped = skipped_take()
        report = {
            "root": str(root_dir),
            "files": job.files_total,
            "queries": len(queries),
            "k": k,
            "embedded_chunks": job.chunks_embedded,
            "channels": channels,
            "context": context,
            "no_good_match": confidence,
            "searches_skipping_work": skipped,
        }
        if as_json:
            self.stdout.write(_dumps(report))
            return
        self.stdout.write(
            f"{root_dir}: {job.files_total} files, {len(queries)} queries; {job.chunks_embedded} chunks embedded"
        )
        self._notes(skipped)
        self._table(channels)
        self._context(context, what="the function")
        self._confidence(confidence)

    def _confidence(self, confidence: dict) -> None:
        by_floor = confidence["by_floor"].items()
        floors = ", ".join(f"{floor}: {rates['real']:.3f} / {rates['gibberish']:.3f}" for floor, rates in by_floor)
        self.stdout.write(
            f"  no good match (RAG_SEARCH_GOOD_MATCH_SIMILARITY={confidence['floor']:g}): "
            f"{confidence['real_flagged']:.3f} of the real queries, {confidence['gibberish_flagged']:.3f} of "
            f"{GIBBERISH_QUERIES} gibberish ones ({confidence['gibberish_with_a_shared_word']:.3f} of those share a "
            f"word with the corpus); real / gibberish by floor: {floors}"
        )

    def _notes(self, skipped: list[str]) -> None:
        for note in indexing_notes():
            self.stdout.write(f"  ({note})")
        if skipped:
            self.stderr.write(
                f"  warning: {len(skipped)} searches of this run skipped part of their work, so these numbers "
                f"are not the service's (is the machine busy? RAG_SEARCH_STATEMENT_TIMEOUT_MS); the first: {skipped[0]}"
            )

    def _table(self, channels: dict) -> None:
        metrics = list(next(iter(channels.values())))
        self.stdout.write(f"  {'channel':<15}" + "".join(f"{m:>12}" for m in metrics))
        for name, values in channels.items():
            self.stdout.write(f"  {name:<15}" + "".join(f"{values[m]:>12.3f}" for m in metrics))

    def _context(self, context: dict, *, what: str) -> None:
        shares = {
            name: value
            for name, value in context.items()
            if not name.startswith("tokens/") and name not in ("floor", "by_floor")
        }
        ratios = {name.removeprefix("tokens/"): value for name, value in context.items() if name.startswith("tokens/")}
        self.stdout.write(
            f"  /api/v1/context at budgets of 1k, 2k, 4k {settings.RAG_CONTEXT_TOKENIZER} tokens "
            f"(RAG_CONTEXT_MIN_SIMILARITY={context['floor']:g}): "
            f"context = share of queries with {what} inside the text"
            + (
                "; best = with a passage of the query's best grade; recall = share of the relevant passages"
                if any(name.startswith("recall") for name in shares)
                else ""
            )
        )
        self.stdout.write("  " + "".join(f"{name:>13}" for name in shares))
        self.stdout.write("  " + "".join(f"{value:>13.3f}" for value in shares.values()))
        self.stdout.write(
            "  the same texts in other tokenizers, tokens relative to the budget's: "
            + ", ".join(f"{name} {value:.3f}" for name, value in ratios.items())
        )
        by_floor = context["by_floor"]
        columns = list(next(iter(by_floor.values())))
        self.stdout.write(
            "  context by relevance floor (RAG_CONTEXT_MIN_SIMILARITY; empty = share of the real queries "
            f"left with no evidence, gibberish_empty = of {GIBBERISH_QUERIES} gibberish ones)"
        )
        widths = {name: max(13, len(name) + 2) for name in columns}
        self.stdout.write(f"  {'floor':>7}" + "".join(f"{name:>{widths[name]}}" for name in columns))
        for floor, values in by_floor.items():
            self.stdout.write(f"  {floor:>7}" + "".join(f"{values[name]:>{widths[name]}.3f}" for name in columns))


def _dumps(data: dict) -> str:
    return json.dumps(data, indent=2)
