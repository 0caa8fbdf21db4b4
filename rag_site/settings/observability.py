"""Metrics (`GET /metrics`, surfaces/metrics.py) and the logs' format (kernel/logs.py)."""

import ipaddress

from django.core.exceptions import ImproperlyConfigured

from rag_site.settings.base import LOGGING
from rag_site.settings_registry import read_choice, read_list, read_str

# Unset: /metrics answers 404. Also from RAG_METRICS_TOKEN_FILE (any setting may come from NAME_FILE). Never logged.
RAG_METRICS_TOKEN = read_str("RAG_METRICS_TOKEN")
RAG_METRICS_ALLOW_NETWORKS = read_list("RAG_METRICS_ALLOW_NETWORKS")
for _network in RAG_METRICS_ALLOW_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"RAG_METRICS_ALLOW_NETWORKS: {_network!r} is not a network; use CIDR like 10.0.0.0/8 or 192.0.2.7/32"
        ) from None

# Prometheus scrapes web over plain http inside compose's network (deploy/prometheus.yml), where no proxy says the
# request came over https: SECURE_SSL_REDIRECT would answer it with a redirect. The token guards it either way.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]

# Every record gets the request's id, identity and route (kernel.logs.ContextFilter), printed as JSON lines or
# appended to the plain line; Celery's own handlers get the same (rag_site/celery.py).
RAG_LOG_FORMAT = read_choice("RAG_LOG_FORMAT")
LOGGING["filters"] = {**LOGGING.get("filters", {}), "request_context": {"()": "kernel.logs.ContextFilter"}}
LOGGING["formatters"] = {
    **LOGGING["formatters"],
    "json": {"()": "kernel.logs.JsonFormatter"},
    "text": {"()": "kernel.logs.TextFormatter", "format": LOGGING["formatters"]["plain"]["format"]},
}
LOGGING["handlers"]["console"] = {
    **LOGGING["handlers"]["console"],
    "formatter": RAG_LOG_FORMAT,
    "filters": ["request_context"],
}
