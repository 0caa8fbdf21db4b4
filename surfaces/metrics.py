"""``GET /metrics``: Prometheus's text format, for a scraper that holds the token.

Off (404, as if there were no such page) until ``RAG_METRICS_TOKEN`` (or
``RAG_METRICS_TOKEN_FILE``) is set; then a scrape needs ``Authorization:
Bearer <token>`` (compared in constant time: 401 otherwise) and, when
``RAG_METRICS_ALLOW_NETWORKS`` lists networks, an address inside one (403
otherwise, before the token is looked at).

What the processes counted (kernel/metrics.py) is summed over every process
that wrote to ``PROMETHEUS_MULTIPROC_DIR``; what lives in the database and
the broker is read now, by ``StateCollector``: a few cheap queries per
scrape, never per request.
"""

import hmac
import ipaddress
import logging
from collections.abc import Iterator

from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from kernel import metrics
from kernel.breaker import BreakerState
from kernel.config import LLMConfig, llm_config
from kernel.heartbeats import queue_lengths
from kernel.llm import ErrorKind, llm_status
from retrieval.candidates import ChannelKind
from sources.items import ITEM_KINDS
from sources.models import IndexJob, JobStatus
from sources.queues import QUEUES

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class StateCollector(Collector):
    """Gauges read at scrape time: index jobs by state, queue depth, the LLM breakers, database connections.

    Each part that cannot be read (the database or the broker is down) is
    left out and ``rag_scrape_ok{part}`` says 0: a scrape still answers.
    """

    def __init__(self, *, llm: LLMConfig) -> None:
        self.llm = llm

    def collect(self) -> Iterator[Metric]:
        ok = GaugeMetricFamily(
            "rag_scrape_ok", "1 when this part of the scrape could be read, 0 when not.", labels=["part"]
        )
        for part, read in (
            ("index_jobs", self._index_jobs),
            ("queues", self._queues),
            ("llm_breakers", self._llm_breakers),
            ("db_connections", self._db_connections),
        ):
            try:
                families = list(read())
            except Exception as exc:  # noqa: BLE001 - one unreadable part must not fail the scrape
                log.warning("metrics: %s could not be read: %s", part, exc)
                ok.add_metric([part], 0)
                continue
            ok.add_metric([part], 1)
            yield from families
        yield ok

    def _index_jobs(self) -> Iterator[Metric]:
        counts = dict(IndexJob.objects.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
        family = GaugeMetricFamily("rag_index_jobs", "Index jobs in the database, by state.", labels=["state"])
        for status in JobStatus.values:
            family.add_metric([status], counts.get(status, 0))
        yield family

    def _queues(self) -> Iterator[Metric]:
        lengths = queue_lengths(QUEUES)
        if lengths is None:
            raise ConnectionError("the broker cannot be read")
        family = GaugeMetricFamily(
            "rag_queue_depth", "Tasks waiting in each Celery queue (not those a worker has taken).", labels=["queue"]
        )
        for queue, length in lengths.items():
            family.add_metric([queue], length)
        yield family

    def _llm_breakers(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "rag_llm_breaker_state",
            "1 for each language model's current circuit-breaker state (closed, open, half-open), 0 for the others.",
            labels=["model", "state"],
        )
        if self.llm.base_url:
            for status in llm_status(self.llm):
                for state in BreakerState:
                    family.add_metric([status.model, str(state)], 1 if status.state == state else 0)
        yield family

    def _db_connections(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "rag_db_connections",
            "Connections to this database by state (pg_stat_activity: active, idle, idle in transaction, ...).",
            labels=["state"],
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(state, 'unknown'), count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() GROUP BY 1"
            )
            rows = cursor.fetchall()
        for state, count in rows:
            family.add_metric([state], count)
        yield family


class _Together:
    """Several collectors as one registry (generate_latest only calls collect())."""

    def __init__(self, *collectors) -> None:
        self.collectors = collectors

    def collect(self) -> Iterator[Metric]:
        for collector in self.collectors:
            yield from collector.collect()


# The outcomes kernel.llm counts a call under, and the reasons retrieval.search skips a channel for.
LLM_OUTCOMES = ("ok", "cooldown", *(str(kind) for kind in ErrorKind))
CHANNEL_SKIP_REASONS = ("timeout", "error")


def counters_zeroed(*, llm: LLMConfig) -> None:
    """Every known series of the counters that move only on trouble, at 0: until its first event a counter has no
    series, a scrape lists nothing, and a dashboard says "No data" where it should say 0.

    Under gunicorn (multiprocess mode) the scraping process writes the zeros to its own file, which the scrape
    sums with the others. The models are the configured chain; a model called otherwise appears when called.
    """
    for channel in ChannelKind:
        for reason in CHANNEL_SKIP_REASONS:
            metrics.SEARCH_CHANNEL_SKIPPED.labels(channel=channel.value, reason=reason)
    for kind in ("indexjob", *ITEM_KINDS):
        metrics.BROKER_WAITS.labels(kind=kind)
    for model in llm.chain if llm.base_url else ():
        for outcome in LLM_OUTCOMES:
            metrics.LLM_CALLS.labels(model=model, outcome=outcome)


def metrics_text(*, llm: LLMConfig, multiprocess_dir: str | None) -> bytes:
    """The scrape: every process's counters (``multiprocess_dir``) or this process's alone (None), and the state."""
    counters_zeroed(llm=llm)
    if multiprocess_dir:
        counted = CollectorRegistry()
        MultiProcessCollector(counted, path=multiprocess_dir)
    else:
        counted = REGISTRY
    return generate_latest(_Together(counted, StateCollector(llm=llm)))


def address_allowed(address: str, networks: list[str]) -> bool:
    """Whether ``address`` is in one of ``networks`` (CIDR; validated at start-up); an empty list allows any."""
    if not networks:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(network, strict=False) for network in networks)


def token_matches(header: str, token: str) -> bool:
    scheme, _, given = header.partition(" ")
    # Compared as bytes in constant time: how long a wrong token took says nothing about the right one.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = settings.RAG_METRICS_TOKEN
    if not token:
        return HttpResponse("Not Found", status=404, content_type="text/plain; charset=utf-8")
    if not address_allowed(request.META.get("REMOTE_ADDR", ""), settings.RAG_METRICS_ALLOW_NETWORKS):
        return HttpResponse(
            "this address may not read the metrics (RAG_METRICS_ALLOW_NETWORKS)",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    if not token_matches(request.headers.get("Authorization", ""), token):
        response = HttpResponse(
            "send the metrics token: Authorization: Bearer <RAG_METRICS_TOKEN>",
            status=401,
            content_type="text/plain; charset=utf-8",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = metrics_text(llm=llm_config(), multiprocess_dir=metrics.multiprocess_dir())
    return HttpResponse(body, content_type=CONTENT_TYPE)
