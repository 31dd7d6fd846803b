"""deployments/docker/prometheus and grafana: scrape targets, datasource, and the dashboard's PromQL against
the metrics shared/metrics.py defines."""

from __future__ import annotations

import re
import subprocess
from urllib.parse import urlsplit

import pytest

from shared.config import Settings
from tests.deployments.manifests import (
    COMPOSE_FILE,
    DASHBOARD_FILE,
    DOCKER_DIR,
    GRAFANA_DIR,
    PROMETHEUS_FILE,
    Doc,
    dashboard_expressions,
    dashboard_metric_names,
    dashboard_panels,
    exposed_metric_names,
    load_json,
    load_yaml,
    metric_label_names,
    promql_label_names,
    promql_metric_names,
)

pytestmark = pytest.mark.unit

COMPOSE: Doc = load_yaml(COMPOSE_FILE)
SERVICES: dict[str, Doc] = COMPOSE["services"]
PROMETHEUS: Doc = load_yaml(PROMETHEUS_FILE)
DASHBOARD: Doc = load_json(DASHBOARD_FILE)
DATASOURCES: Doc = load_yaml(GRAFANA_DIR / "provisioning" / "datasources" / "prometheus.yml")
PROVIDERS: Doc = load_yaml(GRAFANA_DIR / "provisioning" / "dashboards" / "jobsched.yml")
DOCKERFILE = "deployments/docker/Dockerfile"
SCRAPED = {
    name
    for name, s in SERVICES.items()
    if s.get("build", {}).get("dockerfile") == DOCKERFILE and "tools" not in s.get("profiles", [])
}
# Dashboard must show these families (the list: throughput, durations, DLQ, reaper, leader, claims,
# dispatch errors).
REQUIRED_FAMILIES = {
    "executor_jobs_processed",
    "executor_handler_duration_seconds",
    "executor_dead_lettered",
    "reaper_recovered_jobs",
    "scheduler_is_leader",
    "scheduler_jobs_claimed",
    "scheduler_dispatch_errors",
    "scheduler_tick_duration_seconds",
}


def compose_env(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[service].get("environment", {}).items()}


def mount_target(service: str, source: str) -> str:
    for volume in SERVICES[service]["volumes"]:
        parts = str(volume).split(":")
        if parts[0] == source:
            return parts[1]
    raise AssertionError(f"{service} does not mount {source}")


# ------------------------------------------------------------------------------------------------ Prometheus
def scrape_targets() -> list[tuple[str, str]]:
    return [
        (job["job_name"], target)
        for job in PROMETHEUS["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    ]


def test_prometheus_scrapes_every_service_on_its_metrics_port() -> None:
    scraped = set()
    for job, target in scrape_targets():
        host, port = target.rsplit(":", 1)
        if job == "prometheus":
            continue
        assert host in SERVICES, f"job {job}: {host} is not a compose service"
        assert int(port) == Settings.from_env(compose_env(host)).metrics_port, target
        scraped.add(host)
    assert scraped == SCRAPED, f"not scraped: {sorted(SCRAPED - scraped)}"
    jobs = [job["job_name"] for job in PROMETHEUS["scrape_configs"]]
    assert len(jobs) == len(set(jobs))


def test_prometheus_runs_this_config() -> None:
    target = mount_target("prometheus", "./prometheus/prometheus.yml")
    assert f"--config.file={target}" in SERVICES["prometheus"]["command"]
    assert (DOCKER_DIR / "prometheus" / "prometheus.yml") == PROMETHEUS_FILE


def test_prometheus_config_passes_promtool() -> None:
    result = subprocess.run(["promtool", "check", "config", str(PROMETHEUS_FILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# -------------------------------------------------------------------------------------------------- Grafana
def test_grafana_provisions_the_compose_prometheus() -> None:
    (source,) = DATASOURCES["datasources"]
    url = urlsplit(source["url"])
    assert url.hostname in SERVICES
    assert url.hostname == "prometheus"
    assert f"{url.port}:{url.port}" in SERVICES["prometheus"]["ports"]
    assert source["type"] == "prometheus"
    assert source["uid"]
    env = compose_env("grafana")
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Admin"
    assert mount_target("grafana", "./grafana/provisioning") == "/etc/grafana/provisioning"


def test_grafana_loads_the_dashboard_folder_compose_mounts() -> None:
    (provider,) = PROVIDERS["providers"]
    folder = mount_target("grafana", "./grafana/dashboards")
    assert provider["options"]["path"] == folder
    home = compose_env("grafana").get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    assert home == f"{folder}/{DASHBOARD_FILE.name}"


def test_dashboard_panels_use_the_provisioned_datasource() -> None:
    uid = DATASOURCES["datasources"][0]["uid"]
    panels = dashboard_panels(DASHBOARD)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == uid, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"].strip(), panel["title"]
            assert target["datasource"]["uid"] == uid, panel["title"]


def test_every_dashboard_metric_is_one_shared_metrics_exposes() -> None:
    exposed = exposed_metric_names()
    used = dashboard_metric_names(DASHBOARD)
    unknown = used - set(exposed)
    assert not unknown, f"dashboard queries {sorted(unknown)}; shared/metrics.py exposes {sorted(exposed)}"
    missing = REQUIRED_FAMILIES - {exposed[name] for name in used}
    assert not missing, f"dashboard shows nothing of {sorted(missing)}"


def test_dashboard_groups_and_matches_only_labels_the_metrics_have() -> None:
    exposed, labels = exposed_metric_names(), metric_label_names()
    for expr in dashboard_expressions(DASHBOARD):
        names = promql_metric_names(expr)
        allowed = {"instance", "job"} | {label for name in names for label in labels[exposed[name]]}
        if any(name.endswith("_bucket") for name in names):
            allowed.add("le")
        assert promql_label_names(expr) <= allowed, f"{expr}: labels {sorted(promql_label_names(expr) - allowed)}"


def test_dashboard_shows_throughput_per_type_and_result() -> None:
    assert any(
        "executor_jobs_processed_total" in e and re.search(r"by \((job_type, result|result, job_type)\)", e)
        for e in dashboard_expressions(DASHBOARD)
    )


@pytest.mark.parametrize(
    ("expr", "names", "labels"),
    [
        (
            "sum by (job_type, result) (rate(executor_jobs_processed_total[1m]))",
            {"executor_jobs_processed_total"},
            {"job_type", "result"},
        ),
        (
            'histogram_quantile(0.95, sum by (le) (rate(scheduler_tick_duration_seconds_bucket{job="scheduler"}[5m])))',
            {"scheduler_tick_duration_seconds_bucket"},
            {"le", "job"},
        ),
        ("a_sum / ignoring(x) b_count offset 5m > bool 1e3", {"a_sum", "b_count"}, {"x"}),
        ('max(up{job=~"exec.*", instance!="a:1"}) or vector(0)', {"up"}, {"job", "instance"}),
        ("sum(rate(executor_jobs_procesed_total[1m])) by (job_type)", {"executor_jobs_procesed_total"}, {"job_type"}),
    ],
)
def test_promql_reader(expr: str, names: set[str], labels: set[str]) -> None:
    assert promql_metric_names(expr) == names
    assert promql_label_names(expr) == labels


def test_files_parse() -> None:
    for path in [*(DOCKER_DIR.rglob("*.yml")), *(DOCKER_DIR.rglob("*.yaml"))]:
        assert load_yaml(path) is not None, path
    for path in DOCKER_DIR.rglob("*.json"):
        assert load_json(path), path
