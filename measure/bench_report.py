"""`rag_bench search`'s report as text tables (the command prints JSON with --json). Pure Python."""

from measure.bench_queries import QueryKind


def report_lines(report: dict) -> list[str]:
    corpus = report["corpus"]
    steps = corpus["build_seconds"]
    if corpus["built"]:
        detail = ", ".join(f"{step} {seconds}" for step, seconds in steps.items() if step != "total")
        built = f"built in {steps['total']} s ({detail}); {corpus['embedded']} embedded with the model"
    else:
        built = f"reused ({steps['total']} s)"
    server = report["server"]
    lines = [
        f"corpus {corpus['source_key']}: {report['chunks']} chunks, {built}",
        f"server: {server['url'] or 'gunicorn started by the bench'}"
        + (f", {server['workers']} workers x {server['threads']} threads" if server["workers"] else "")
        + f"; {report['seconds']} s per run"
        + (f"; reading {report['replicas']} replica(s)" if report.get("replicas") else ""),
        *disk_lines(corpus.get("disk")),
        "",
    ]
    if "results" not in report:  # --build-only
        return lines
    results = report["results"]
    lines.append(
        f"{'mode':<8} {'clients':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} {'q/s':>7} "
        f"{'errors':>6} {'warned':>6}"
    )
    for mode, by_clients in results.items():
        for clients, r in by_clients.items():
            lines.append(
                f"{mode:<8} {clients:>7} {r['p50_ms']:>8} {r['p95_ms']:>8} {r['p99_ms']:>8} {r['max_ms']:>8} "
                f"{r['qps']:>7} {r['errors']:>6} {r['warnings']:>6}"
            )
    stages = ("embed", "embed_wait", "lexical", "vector", "search_other", "outside", "client")
    lines += [
        "",
        "where the time went, mean ms (embed runs beside lexical; the others add up to client):",
        f"{'mode':<8} {'clients':>7} " + " ".join(f"{s:>12}" for s in stages),
    ]
    for mode, by_clients in results.items():
        for clients, r in by_clients.items():
            lines.append(f"{mode:<8} {clients:>7} " + " ".join(f"{r['stages_ms'].get(s, 0.0):>12}" for s in stages))
    kinds = [kind.value for kind in QueryKind]
    lines += [
        "",
        "p50 / p95 ms by kind of query:",
        f"{'mode':<8} {'clients':>7} " + " ".join(f"{k:>17}" for k in kinds),
    ]
    for mode, by_clients in results.items():
        for clients, r in by_clients.items():
            cells = [
                f"{r['by_kind'][k]['p50_ms']} / {r['by_kind'][k]['p95_ms']}" if k in r["by_kind"] else "-"
                for k in kinds
            ]
            lines.append(f"{mode:<8} {clients:>7} " + " ".join(f"{c:>17}" for c in cells))
    for mode, by_clients in results.items():
        for clients, r in by_clients.items():
            for example in r.get("error_examples", []):
                lines.append(f"error ({mode}, {clients} clients): {example}")
    accuracy = report["accuracy"]
    recall, agreement = accuracy["hnsw_recall_at_10"], accuracy["lexical_agreement_at_10"]
    lines += [
        "",
        f"HNSW recall@10 against exact search: {recall['mean']} (min {recall['min']}, {recall['queries']} queries)"
        + _by_ef(recall),
        *(
            [
                f"  held-out real chunk vectors as queries: {held['mean']} (min {held['min']}, "
                f"{held['queries']} queries)" + _by_ef(held)
            ]
            if (held := accuracy.get("hnsw_recall_at_10_held_out"))
            else []
        ),
        f"lexical top-10 agreement with exhaustive BM25: {agreement['mean']} (min {agreement['min']}, "
        f"{agreement['queries']} queries)"
        + (
            "; by kind: " + ", ".join(f"{kind} {mean}" for kind, mean in agreement["by_kind"].items())
            if agreement.get("by_kind")
            else ""
        ),
    ]
    if contention := report.get("contention"):
        worst = contention["worst_case"]
        lines += [
            "",
            f"contention: one client's questions (hybrid), idle p95 {contention['idle']['p95_ms']} ms, "
            f"beside {worst['clients']} worst-case clients p95 {contention['loaded']['p95_ms']} ms: "
            f"ratio {contention['p95_ratio']} (target <= {contention['target_ratio']})",
            f"  worst-case queries: {worst['answered']} answered, {worst['warned']} answered with a warning, "
            f"{worst['failed']} failed (p50 {worst['p50_ms']} ms)",
        ]
    if outage := report.get("replica_outage"):
        lines += [
            "",
            f"replica outage: {outage['clients']} clients (hybrid), replica 1 stopped (immediate) after "
            f"{outage['stopped_after_s']} s: {outage['requests']} searches, {outage['errors']} failed (target 0); "
            f"p50 {outage['p50_ms']} ms, p95 {outage['p95_ms']} ms, max {outage['max_ms']} ms, {outage['qps']} q/s",
            *(f"  error: {example}" for example in outage.get("error_examples") or []),
        ]
    if explain := report.get("explain"):
        lines += ["", "EXPLAIN ANALYZE, lexical channel, worst-case query:", *explain["lexical_worst_case"]]
    return lines


def disk_lines(disk: dict | None) -> list[str]:
    """The corpus tables' size on disk, in all and per chunk of the chunk table."""
    if not disk:
        return []
    per = disk["per_chunk_bytes"]
    return [
        f"disk: database {disk['database_bytes'] / 2**30:.2f} GiB for {disk['chunks_in_table']} chunks, "
        f"{per['database']} bytes per chunk: chunk rows {per['chunk_table']}, their indexes without HNSW "
        f"{per['chunk_indexes_without_hnsw']}, HNSW {per['hnsw']}, lexical postings and statistics "
        f"{per['lexical_postings']}"
    ]


def _by_ef(recall: dict) -> str:
    if not recall.get("by_ef"):
        return ""
    return "; by ef_search: " + ", ".join(f"{ef} {mean}" for ef, mean in recall["by_ef"].items())
