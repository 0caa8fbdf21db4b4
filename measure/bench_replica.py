"""`rag_bench search --replica-outage`: the embedded replica stopped while clients search (issue 30: zero failures).

Hybrid searches from ``OUTAGE_CLIENTS`` closed-loop clients for the run's
seconds; a third of the way in, replica 1 is stopped the hard way
(``pg_ctl stop -m immediate``: its connections drop mid-query, as when a host
dies). Every search must still be answered: the router marks the replica down
and the search runs again on the primary (kernel/replicas.py). The replica is
started again at the end, and catches up from its slot.
"""

import threading
import time
from collections.abc import Callable
from pathlib import Path

from kernel.errors import ApplicationError
from measure.bench_load import Sample, Stream, clients_run, samples_summary
from measure.bench_queries import query_stream
from rag_site.embedded_replica import replica_start, replica_stop, socket_dir_of

OUTAGE_CLIENTS = 8


def outage_stream(seed: int) -> Stream:
    return ((kind, query, "hybrid") for kind, query in query_stream(seed=seed))


def replica_outage(
    *,
    url: str,
    key: str,
    primary_dir: Path,
    data_dir: Path,
    seconds: float,
    seed: int = 0,
    log: Callable[[str], None] = print,
) -> dict:
    """``primary_dir``, ``data_dir``: the data directories of the embedded primary and of the replica to stop."""
    if socket_dir_of(data_dir) is None:
        raise ApplicationError(
            "--replica-outage stops the embedded replica: run rag_bench with RAG_EMBEDDED_REPLICAS=1 "
            f"(none runs in {data_dir})"
        )
    log(f"replica outage: {OUTAGE_CLIENTS} clients search for {seconds:g} s; replica 1 stops after {seconds / 3:.1f} s")
    stop = threading.Event()
    runner_samples: dict[str, list[Sample]] = {}

    def run() -> None:
        runner_samples["all"] = clients_run(
            url=url, key=key, streams=[outage_stream(seed + i) for i in range(OUTAGE_CLIENTS)], stop=stop
        )[0]

    runner = threading.Thread(target=run)
    started = time.perf_counter()
    runner.start()
    try:
        time.sleep(seconds / 3)
        replica_stop(data_dir, mode="immediate")
        stopped_at = time.perf_counter() - started
        time.sleep(seconds - seconds / 3)
    finally:
        stop.set()
        runner.join()
        elapsed = time.perf_counter() - started
        replica_start(primary_dir, data_dir, number=1)
    samples = runner_samples.get("all", [])
    summary = samples_summary(samples, elapsed)
    report = {
        "clients": OUTAGE_CLIENTS,
        "stopped_after_s": round(stopped_at, 2),
        "requests": summary["requests"],
        "errors": summary["errors"],
        "p50_ms": summary["p50_ms"],
        "p95_ms": summary["p95_ms"],
        "max_ms": summary["max_ms"],
        "qps": summary["qps"],
    }
    if summary["errors"]:
        report["error_examples"] = summary.get("error_examples")
    log(
        f"  {report['requests']} searches, {report['errors']} failed; p50 {report['p50_ms']} ms, "
        f"p95 {report['p95_ms']} ms, max {report['max_ms']} ms (target: 0 failed)"
    )
    return report
