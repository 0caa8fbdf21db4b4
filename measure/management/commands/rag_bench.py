"""`manage.py rag_bench chunk|index PATH` and `rag_bench search --chunks N`: speed, measured by the project itself."""

import json
from collections.abc import Callable
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from kernel.errors import ApplicationError
from measure.bench_index import ENCODERS, Hardware, chunk_bench, index_bench, vectors_bench
from measure.bench_slowloris import slowloris_arguments, slowloris_command


class Command(BaseCommand):
    help = (
        "Benchmarks. `chunk PATH`: chunk every text file under PATH; MB/s, files/s, chunks per language. "
        "`index PATH`: raw encode vs end-to-end indexing throughput on the same chunks, and an unchanged re-verify. "
        "`search --chunks N`: latency, throughput and accuracy of the search API over HTTP on an N-chunk corpus. "
        "`login-flood`: search latency alone and beside clients posting wrong passwords to the login pages. "
        "`slowloris --url URL`: health probes beside connections trickling headers or a body. "
        "`extract PATH`: every document under PATH through the extraction sandbox; PDF pages/s, peak memory. "
        "`freshness`: seconds from a change in a watched root to search (edit, create, rename, delete), a git push "
        "of 10 files through the webhook and one with no new commit, idle and "
        "beside a bulk job, and a skill saved meanwhile. "
        "`answers`: search latency alone and beside --streams streamed answers from a slow fake chat model. "
        "`searchable PATH`: seconds from saving a root on PATH to its first file and to all of it searchable by "
        "words, and to all of it by meaning. "
        "`grep PATH` (or `grep --root NAME`, or `grep --chunks N`: the search bench's package files making N "
        "chunks, copied under var/bench): /api/v1/grep against ripgrep over the same files, identical (file, "
        "line) sets per pattern, and p50/p95 at --clients. "
        "`vectors PATH`: the local model's vectors on --device (cuda) against PyTorch fp32 on the CPU, per chunk."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "what",
            choices=[
                "chunk",
                "index",
                "search",
                "login-flood",
                "slowloris",
                "extract",
                "freshness",
                "answers",
                "searchable",
                "grep",
                "vectors",
            ],
            help="What to measure.",
        )
        parser.add_argument("path", type=Path, nargs="?", help="chunk, index, extract, searchable: the source tree.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object instead of a table.")
        parser.add_argument("--max-chars", type=int, default=1500)
        parser.add_argument("--overlap", type=int, default=200)
        parser.add_argument(
            "--encoder",
            choices=ENCODERS,
            default="model",
            help="index: the model RAG_EMBEDDING_MODEL names, or an instant stand-in that answers each text a "
            "random unit vector at once (measures everything around the encoder).",
        )
        search = parser.add_argument_group("search")
        search.add_argument("--chunks", type=int, help="Corpus size (built once, reused while it stays this size).")
        search.add_argument("--clients", default="1,16", help="Concurrent clients, comma-separated (default 1,16).")
        search.add_argument("--seconds", type=float, default=10.0, help="Per mode and client count (default 10).")
        search.add_argument("--modes", default="hybrid,lexical,vector", help="Search modes, comma-separated.")
        search.add_argument(
            "--contention",
            action="store_true",
            help="Also: one client's p95 idle and beside 4 clients sending the worst-case query.",
        )
        search.add_argument(
            "--explain", action="store_true", help="Also: EXPLAIN ANALYZE of the worst-case lexical query."
        )
        search.add_argument(
            "--replica-outage",
            action="store_true",
            help="Also: 8 clients search while the embedded replica is stopped (needs RAG_EMBEDDED_REPLICAS=1).",
        )
        search.add_argument(
            "--embedded",
            type=int,
            help="Chunks embedded with the real model (default 3000; the rest get mixtures of their vectors).",
        )
        search.add_argument("--seed", type=int, default=0)
        search.add_argument(
            "--url", default="", help="A running server to measure instead of starting one (needs --key)."
        )
        search.add_argument("--key", default="", help="With --url: an API key of bot rag-bench with no rate limit.")
        search.add_argument(
            "--yes",
            action="store_true",
            help="Allow writing the corpus to a database other than this checkout's embedded one.",
        )
        search.add_argument("--drop", action="store_true", help="Delete the bench corpus and stop.")
        search.add_argument(
            "--ef-sweep",
            default="",
            help="HNSW recall@10 at each of these hnsw.ef_search values too, comma-separated (e.g. 40,100,200,400).",
        )
        search.add_argument(
            "--build-only", action="store_true", help="Build (or reuse) the corpus, report its build and disk, stop."
        )
        flood = parser.add_argument_group("login-flood (also --seconds, --url, --yes, --seed; --modes: the first)")
        flood.add_argument("--flooders", type=int, default=16, help="Clients posting wrong passwords (default 16).")
        flood.add_argument("--searchers", type=int, default=1, help="Clients searching meanwhile (default 1).")
        slowloris_arguments(parser)
        answers = parser.add_argument_group("answers (also --chunks, default 2000, --seconds, --searchers, --seed)")
        answers.add_argument("--streams", type=int, default=8, help="Streamed answers kept open (default 8).")
        answers.add_argument(
            "--first-token", type=float, default=3.0, help="The fake model's silence before it writes (default 3 s)."
        )
        answers.add_argument("--pace", type=float, default=0.25, help="Seconds between its deltas (default 0.25).")
        searchable = parser.add_argument_group("searchable (also --concurrency, --yes)")
        searchable.add_argument(
            "--until",
            choices=["words", "meaning"],
            default="meaning",
            help="Stop once all is searchable by words (then a minute more, for the embedding pace), or by meaning.",
        )
        searchable.add_argument(
            "--site",
            action="store_true",
            help="PATH is a web site's directory (e.g. /usr/share/doc/python3/html): serve a copy on 127.0.0.1 and "
            "index it as a web root from its index.html.",
        )
        searchable.add_argument(
            "--again",
            action="store_true",
            help="With --site: then crawl it again unchanged (page bodies sent) and after removing a page (gone?).",
        )
        index = parser.add_argument_group("index")
        index.add_argument(
            "--processes",
            type=int,
            default=1,
            help="Processes embedding the job's vector batches: this one and N-1 bulk workers it starts (default 1).",
        )
        index.add_argument(
            "--threads", type=int, default=0, help="Threads per process (RAG_TORCH_THREADS; default 0: one per core)."
        )
        index.add_argument("--device", default="", help="RAG_EMBEDDING_DEVICE for the run (cpu, cuda, auto).")
        index.add_argument(
            "--no-raw", action="store_true", help="Skip the raw encode of every chunk before the end-to-end run."
        )
        vectors = parser.add_argument_group("vectors (also --device, default cuda)")
        vectors.add_argument("--count", type=int, default=1000, help="Chunks of PATH compared (default 1000).")
        grep = parser.add_argument_group("grep (also --clients, --seconds, --chunks)")
        grep.add_argument("--root", default="", help="An indexed root to measure instead of PATH's stored texts.")
        fresh = parser.add_argument_group("freshness")
        fresh.add_argument("--rounds", type=int, default=20, help="Changes of each kind per phase (default 20).")
        fresh.add_argument(
            "--bulk-files", type=int, default=3000, help="Files of the bulk root indexed beside (default 3000)."
        )
        fresh.add_argument(
            "--concurrency", type=int, help="Worker processes (default RAG_WORKER_CONCURRENCY, as make run)."
        )

    def handle(self, *args, what: str, path: Path | None, json: bool = False, **options) -> None:
        if what == "search":
            self._search(as_json=json, **options)
            return
        if what == "slowloris":
            slowloris_command(self, as_json=json, **options)
            return
        if what == "freshness":
            self._freshness(as_json=json, **options)
            return
        if what == "answers":
            self._answers(as_json=json, **options)
            return
        if what == "grep":
            self._grep(path, as_json=json, **options)
            return
        if what == "login-flood":
            from measure.bench_login_flood import login_flood_command

            login_flood_command(self, as_json=json, **options)
            return
        if path is None:
            raise CommandError(f"rag_bench {what} needs a PATH")
        if not path.is_dir():
            raise CommandError(f"{path} is not a directory")
        if what == "index":
            self._index(
                path,
                as_json=json,
                hardware=Hardware(
                    processes=options["processes"],
                    threads=options["threads"],
                    device=options["device"],
                    raw=not options["no_raw"],
                    encoder=options["encoder"],
                ),
            )
            return
        if what == "vectors":
            self._vectors(path, as_json=json, count=options["count"], device=options["device"] or "cuda")
            return
        if what == "searchable":
            self._searchable(path, as_json=json, **options)
            return
        if what == "extract":
            self._extract(path, as_json=json)
            return
        result = chunk_bench(path, max_chars=options["max_chars"], overlap=options["overlap"])
        if json:
            self.stdout.write(_json(result.as_dict()))
            return
        self.stdout.write(f"chunked {result.files} files, {result.bytes / 1e6:.1f} MB, into {result.chunks} chunks")
        self.stdout.write(
            f"  {result.mb_per_s:.2f} MB/s and {result.files_per_s:.0f} files/s on one core "
            f"({result.cpu_seconds:.2f} s CPU, {result.seconds:.2f} s wall)"
        )
        self.stdout.write(f"  {'language':<12} {'files':>7} {'chunks':>8}")
        for language, chunks in result.by_language.most_common():
            self.stdout.write(f"  {language:<12} {result.files_by_language[language]:>7} {chunks:>8}")

    def _searchable(
        self,
        path: Path,
        *,
        as_json: bool,
        until: str,
        site: bool,
        again: bool,
        concurrency: int | None,
        yes: bool,
        **_,
    ) -> None:
        from django.conf import settings

        from measure.bench_searchable import searchable_bench, searchable_table

        _bench_database(yes=yes, leaves="a root named bench-searchable")
        try:
            report = searchable_bench(
                path,
                concurrency=concurrency or settings.RAG_WORKER_CONCURRENCY,
                until=until,
                site=site,
                again=again,
                log=lambda line: self.stderr.write(line),
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if as_json:
            self.stdout.write(_json(report))
            return
        self.stdout.write("time to searchable (wall clock, on whatever else this machine is doing)")
        for line in searchable_table(report):
            self.stdout.write(line)
        for step, crawl in report.get("again", {}).items():
            gone = f"; {crawl['removed']} still searchable: {crawl['removed_searchable']}" if "removed" in crawl else ""
            self.stdout.write(
                f"  crawled again, {step}: searchable by words in {crawl['seconds']} s, "
                f"{crawl['page_bodies_sent']} page bodies sent {crawl['bodies_sent_for']}; {crawl['crawl']}{gone}"
            )

    def _answers(self, *, as_json: bool, **options) -> None:
        from django.core.management import call_command

        from measure.bench_answers import AnswersBenchOptions, answers_bench
        from measure.bench_search import database_is_embedded

        call_command("migrate", interactive=False, verbosity=0)
        if not options["yes"] and not database_is_embedded():
            raise CommandError(
                "this database is not this checkout's embedded one (var/postgres); pass --yes to go ahead"
            )
        try:
            bench = AnswersBenchOptions(
                chunks=options["chunks"] or 2000,
                streams=options["streams"],
                searchers=options["searchers"],
                seconds=options["seconds"],
                first_token=options["first_token"],
                pace=options["pace"],
                seed=options["seed"],
            )
            log = (lambda line: self.stderr.write(line)) if as_json else (lambda line: self.stdout.write(line))
            report = answers_bench(bench, log=log)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        if as_json:
            self.stdout.write(_json(report))

    def _freshness(
        self, *, as_json: bool, rounds: int, bulk_files: int, concurrency: int | None, yes: bool, **_
    ) -> None:
        from django.conf import settings

        from measure.bench_freshness import FreshnessOptions, freshness_bench, freshness_table

        _bench_database(yes=yes, leaves="roots and skills named bench-freshness")
        options = FreshnessOptions(
            rounds=rounds, bulk_files=bulk_files, concurrency=concurrency or settings.RAG_WORKER_CONCURRENCY
        )
        report = self._measured(lambda: freshness_bench(options, log=lambda line: self.stderr.write(line)), as_json)
        if report is None:
            return
        self.stdout.write(
            f"seconds from a change on disk until search agrees ({options.concurrency} worker process(es), "
            f"{rounds} rounds; targets: edit and delete p95 <= 5 s, git push of 10 files p95 <= 15 s, no new "
            "commit < 1 s)"
        )
        self.stdout.write("\n".join(freshness_table(report)))

    def _grep(self, path: Path | None, *, as_json: bool, **options) -> None:
        from django.core.management import call_command

        from measure.bench_grep import GrepBenchOptions, grep_bench

        call_command("migrate", interactive=False, verbosity=0)
        bench = GrepBenchOptions(
            path=path,
            root_name=options["root"],
            chunks=options["chunks"] or 0,
            clients=tuple(int(n) for n in options["clients"].split(",")),
            seconds=options["seconds"],
        )
        report = self._measured(
            lambda: grep_bench(bench, log=(lambda line: None) if as_json else self.stdout.write), as_json
        )
        if report is None:
            return
        self.stdout.write(
            f"{report['files']} files of {report['path']}; identical to ripgrep: {report['all_identical']}"
        )
        self.stdout.write(f"  {'pattern':<34} {'regex':>5} {'ours':>6} {'rg':>6} {'files':>6} {'same':>5} {'ms':>7}")
        for row in report["patterns"]:
            self.stdout.write(
                f"  {row['pattern']!r:<34} {row['regex']!s:>5} {row['ours']:>6} {row['ripgrep']:>6} "
                f"{row['files']:>6} {row['identical']!s:>5} {row['first_ms']:>7}"
            )
        self.stdout.write(f"  load average {' '.join(map(str, report['load_average']))}")
        storage = report["storage_mb"]
        self.stdout.write(f"  stored texts {storage['texts']} MB, trigram index {storage['trigram_index']} MB")
        for clients, row in report["latency"].items():
            self.stdout.write(
                f"  /api/v1/grep {clients:>3} clients: p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
                f"{row['qps']} q/s, {row['errors']} errors ({row['requests']} requests)"
            )

    def _extract(self, path: Path, *, as_json: bool) -> None:
        from measure.bench_extract import extract_bench
        from sources.config import extract_limits

        report = extract_bench(path, extract_limits())
        if as_json:
            self.stdout.write(_json(report))
            return
        self.stdout.write(
            f"extracted {report['files']} documents, {report['bytes'] / 1e6:.1f} MB, in {report['seconds']} s "
            f"({report['files_per_s']} files/s); refused: {report['refused'] or 'none'}"
        )
        self.stdout.write(f"  PDF            {report['pdf_pages']} pages, {report['pdf_pages_per_s']} pages/s")
        self.stdout.write(f"  peak memory    {report['peak_child_rss_mb']} MB (largest child's resident set)")

    def _measured(self, measure: Callable[[], dict], as_json: bool) -> dict | None:
        """The bench's report, its error as the command's; None once it is printed as JSON (nothing more to say)."""
        try:
            report = measure()
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        if as_json:
            self.stdout.write(_json(report))
            return None
        return report

    def _vectors(self, path: Path, *, as_json: bool, count: int, device: str) -> None:
        report = self._measured(lambda: vectors_bench(path, count=count, device=device), as_json)
        if report is None:
            return
        self.stdout.write(
            f"{report['texts']} chunks on {report['runs_on']} against PyTorch fp32 on the CPU: cosine min "
            f"{report['cosine_min']}, mean {report['cosine_mean']} (rule >= 0.999: "
            f"{'met' if report['identity_rule_met'] else 'NOT met'}); raw encode {report['encode_chunks_per_s']} "
            f"chunks/s at batch {report['batch_size']}"
        )

    def _index(self, path: Path, *, as_json: bool, hardware: Hardware) -> None:
        from django.core.management import call_command

        if hardware.processes < 1 or hardware.threads < 0:
            raise CommandError("--processes must be at least 1 and --threads at least 0")
        call_command("migrate", interactive=False, verbosity=0)  # a fresh var/ has no tables yet
        report = self._measured(lambda: index_bench(path, hardware), as_json)
        if report is None:
            return
        self.stdout.write(
            f"indexed {report['files']} files into {report['chunks']} chunks in {report['index_seconds']} s "
            f"with {report['model']} on {report['runs_on']} ({report['processes']} process(es) x "
            f"{report['threads'] or 'default'} thread(s))"
        )
        self.stdout.write(f"  raw encode     {report['encode_chunks_per_s']:>8} chunks/s")
        self.stdout.write(f"  end-to-end     {report['index_chunks_per_s']:>8} chunks/s")
        self.stdout.write(f"  ratio          {report['ratio']:>8}   (target >= 0.9)")
        self.stdout.write(
            f"  end-to-end     {report['index_embed_seconds']} s embedding, {report['index_other_seconds']} s "
            "walking, reading, chunking and writing"
        )
        self.stdout.write(
            f"  CPU per chunk  {report['encode_cpu_ms_per_chunk']} ms raw encode, "
            f"{report['index_cpu_ms_per_chunk']} ms end-to-end (this process; load average "
            f"{' '.join(map(str, report['load_average']))})"
        )
        self.stdout.write(
            f"  re-verify      {report['reverify_seconds']:>8} s, "
            f"{report['reverify_embedded']} chunks embedded (unchanged tree)"
        )
        if report["query_p50_ms"] is not None:
            self.stdout.write(
                f"  query embed    p50 {report['query_p50_ms']} ms, p95 {report['query_p95_ms']} ms "
                "(one short query, one thread)"
            )

    def _search(self, *, as_json: bool, **options) -> None:
        from django.core.management import call_command

        from measure.bench_corpus import bench_corpus_drop
        from measure.bench_report import report_lines
        from measure.bench_search import SearchBenchOptions, database_is_embedded, search_bench
        from retrieval.search import Mode

        call_command("migrate", interactive=False, verbosity=0)
        if options["drop"]:
            self.stdout.write(f"dropped the bench corpus ({bench_corpus_drop()} chunks)")
            return
        if options["chunks"] is None:
            raise CommandError("rag_bench search needs --chunks N")
        if not options["yes"] and not database_is_embedded():
            raise CommandError(
                "this database is not this checkout's embedded one (var/postgres): the bench adds a corpus of "
                f"{options['chunks']} chunks to it (seen only by bot rag-bench's keys and superusers; "
                "`rag_bench search --drop` removes it). Pass --yes to go ahead."
            )
        try:
            bench = SearchBenchOptions(
                chunks=options["chunks"],
                clients=tuple(_numbers(options["clients"], "--clients")),
                seconds=options["seconds"],
                modes=tuple(Mode.parse(m) for m in _words(options["modes"])),
                contention=options["contention"],
                url=options["url"],
                key=options["key"],
                embedded=options["embedded"],
                seed=options["seed"],
                explain=options["explain"],
                replica_outage=options["replica_outage"],
                build_only=options["build_only"],
                ef_sweep=tuple(_numbers(options["ef_sweep"], "--ef-sweep")),
            )
            log = (lambda line: self.stderr.write(line)) if as_json else (lambda line: self.stdout.write(line))
            report = search_bench(bench, log=log)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        if as_json:
            self.stdout.write(_json(report))
            return
        for line in report_lines(report):
            self.stdout.write(line)


def _words(value: str) -> list[str]:
    return [word for word in value.replace(" ", ",").split(",") if word]


def _numbers(value: str, option: str) -> list[int]:
    try:
        return [int(word) for word in _words(value)]
    except ValueError:
        raise CommandError(f"{option} takes whole numbers separated by commas, got {value!r}") from None


def _json(data: dict) -> str:
    return json.dumps(data, indent=2)


def _bench_database(*, yes: bool, leaves: str) -> None:
    """A bench that writes rows of its own (``leaves``) runs on this checkout's embedded database unless --yes says
    otherwise; migrated first (a fresh var/ has no tables yet)."""
    from django.core.management import call_command

    from measure.bench_search import database_is_embedded

    if not yes and not database_is_embedded():
        raise CommandError(
            f"this database is not this checkout's embedded one (var/postgres): the bench adds and removes {leaves}. "
            "Pass --yes to go ahead."
        )
    call_command("migrate", interactive=False, verbosity=0)
