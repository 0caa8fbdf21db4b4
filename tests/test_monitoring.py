"""docker-compose's `monitoring` profile: Prometheus scrapes /metrics with the token, Grafana shows the dashboard.

Docker does not run here: the files are parsed, and the dashboard's queries are checked against the metrics
rag-site really exports.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from kernel import metrics

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DASHBOARD = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
# Read from the database and the broker at scrape time (surfaces/metrics.py, StateCollector).
SCRAPE_TIME = {
    "rag_index_jobs",
    "rag_queue_depth",
    "rag_llm_breaker_state",
    "rag_db_connections",
    "rag_scrape_ok",
}


def exported() -> set[str]:
    """Every sample name kernel/metrics.py's counters and histograms produce, and the scrape-time gauges."""
    names = set(SCRAPE_TIME)
    for value in vars(metrics).values():
        if hasattr(value, "collect") and hasattr(value, "_name"):
            names.update(sample.name for family in value.collect() for sample in family.samples)
            names.update(
                {f"{value._name}_total", f"{value._name}_bucket", f"{value._name}_count", f"{value._name}_sum"}
            )
    return names


def dashboard_queries() -> list[str]:
    return [target["expr"] for panel in DASHBOARD["panels"] for target in panel.get("targets", [])]


def test_the_monitoring_profile_runs_prometheus_and_grafana_and_nothing_else():
    profiled = {name for name, service in COMPOSE["services"].items() if "monitoring" in service.get("profiles", [])}
    assert profiled == {"prometheus", "grafana"}
    assert "ports" not in COMPOSE["services"]["prometheus"]
    assert COMPOSE["services"]["grafana"]["ports"] == ["127.0.0.1:3000:3000"]  # on this host only


def test_every_mounted_monitoring_file_exists():
    for name in ("prometheus", "grafana"):
        for volume in COMPOSE["services"][name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"


def test_prometheus_scrapes_web_with_the_token_from_a_file_never_in_its_config():
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"] == [{"targets": ["web:8000"]}]
    assert job["authorization"] == {"type": "Bearer", "credentials_file": "/prometheus/metrics_token"}
    entrypoint = " ".join(COMPOSE["services"]["prometheus"]["entrypoint"])
    assert "/prometheus/metrics_token" in entrypoint and "set RAG_METRICS_TOKEN" in entrypoint
    web = COMPOSE["x-app"]["environment"]
    assert "web" in web["ALLOWED_HOSTS"].split(",")  # the Host Prometheus sends


def test_every_app_process_writes_its_metrics_to_the_one_shared_directory():
    app = COMPOSE["x-app"]
    directory = app["environment"]["PROMETHEUS_MULTIPROC_DIR"]
    assert f"metrics:{directory}" in app["volumes"]
    assert "--config=python:rag_site.gunicorn_hooks" in COMPOSE["services"]["web"]["command"]
    assert COMPOSE["volumes"]["metrics"]["driver_opts"]["type"] == "tmpfs"


def test_grafana_is_provisioned_with_the_prometheus_source_and_the_dashboard():
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert source["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "rag-site.yml").read_text())["providers"]
    mounted = {v.split(":")[1] for v in COMPOSE["services"]["grafana"]["volumes"]}
    assert any(path.startswith(provider["options"]["path"] + "/") for path in mounted)
    assert {t["datasource"]["uid"] for p in DASHBOARD["panels"] for t in p.get("targets", [])} == {source["uid"]}


def test_the_dashboard_queries_only_metrics_rag_site_exports_and_graphs_each_of_them():
    names = exported()
    queried = {name for query in dashboard_queries() for name in re.findall(r"\brag_[a-z_]+\b", query)}
    assert queried <= names, f"not exported: {sorted(queried - names)}"
    families = {re.sub(r"_(total|bucket|count|sum)$", "", name) for name in queried}
    counted = {value._name for value in vars(metrics).values() if hasattr(value, "_name")}
    assert counted | SCRAPE_TIME <= families, f"not on the dashboard: {sorted((counted | SCRAPE_TIME) - families)}"


def test_dashboard_panels_do_not_overlap():
    cells = set()
    for panel in DASHBOARD["panels"]:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))
        assert grid["x"] + grid["w"] <= 24
