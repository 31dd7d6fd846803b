"""What the deployment tests compare the files of deployments/ with, read from the code itself.

The names of settings come from shared/config.py, the metric names from shared/metrics.py and the job types
from the handler registry, so a rename in the code, or a typo in a manifest, fails a test instead of a deploy.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.metrics import MetricWrapperBase

from shared import metrics

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO_ROOT / "deployments" / "docker"
K8S_DIR = REPO_ROOT / "deployments" / "k8s"
LOCAL_DIR = REPO_ROOT / "deployments" / "local"
COMPOSE_FILE = DOCKER_DIR / "docker-compose.yml"
DOCKERFILE = DOCKER_DIR / "Dockerfile"
PROMETHEUS_FILE = DOCKER_DIR / "prometheus" / "prometheus.yml"
GRAFANA_DIR = DOCKER_DIR / "grafana"
DASHBOARD_FILE = GRAFANA_DIR / "dashboards" / "jobsched.json"

# Read by the services' entry points themselves, not by Settings (executor --type default; worker/node id).
ENTRYPOINT_ENV = frozenset({"JOB_TYPE", "NODE_ID"})

Doc = dict[str, Any]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_yaml_documents(path: Path) -> list[Doc]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def load_json(path: Path) -> Any:
    return json.loads(path.read_text())


def config_env_names() -> frozenset[str]:
    """Every variable Settings.from_env reads: the first argument of each `reader.<kind>("NAME", ...)` call."""
    tree = ast.parse((REPO_ROOT / "shared" / "config.py").read_text())
    names = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "reader"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }
    assert len(names) >= 15, f"found only {sorted(names)} in shared/config.py: has the reader changed?"
    return frozenset(names)


def known_env_names() -> frozenset[str]:
    return config_env_names() | ENTRYPOINT_ENV


_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "stateset": ("",),
    "enum": ("",),
}


def metric_objects() -> list[MetricWrapperBase]:
    return [value for value in vars(metrics).values() if isinstance(value, MetricWrapperBase)]


def exposed_metric_names() -> dict[str, str]:
    """Every sample name shared.metrics makes prometheus_client expose, mapped to its family name: a counter
    declared "x_total" is family "x" with samples x_total and x_created; a histogram h has h_bucket, h_sum,
    h_count and h_created; a gauge g is g."""
    exposed: dict[str, str] = {}
    for metric in metric_objects():
        for family in metric.describe():
            for suffix in _SUFFIXES[family.type]:
                exposed[family.name + suffix] = family.name
    return exposed


def metric_label_names() -> dict[str, frozenset[str]]:
    """Family name -> the label names it is declared with."""
    labels: dict[str, frozenset[str]] = {}
    for metric in metric_objects():
        for family in metric.describe():
            labels[family.name] = frozenset(metric._labelnames)
    return labels


# ------------------------------------------------------------------------------------------------ PromQL
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{([^}]*)\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_IDENT = re.compile(r"(?<![\w.:$])[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless"}
)
_NUMBERS = frozenset({"inf", "nan"})


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions or aggregations
    (followed by "("), keywords, label names (inside {...}, by (...), on (...)) or durations."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("{}", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    names = set()
    for match in _IDENT.finditer(text):
        name = match.group(0)
        if name in _KEYWORDS or name.lower() in _NUMBERS:
            continue
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation operator
        names.add(name)
    return names


def promql_label_names(expr: str) -> set[str]:
    """Label names an expression groups by, joins on or matches: by (...), on (...), {name="..."}."""
    text = _STRING.sub('""', expr)
    labels: set[str] = set()
    for group in _GROUPING.findall(text):
        labels.update(part.strip() for part in group.split(",") if part.strip())
    for matchers in _MATCHERS.findall(text):
        labels.update(m.group(1) for m in re.finditer(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    return labels


def dashboard_panels(dashboard: Doc) -> list[Doc]:
    """Every panel, including those nested in collapsed rows."""
    found: list[Doc] = []
    for panel in dashboard.get("panels", []):
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def dashboard_expressions(dashboard: Doc) -> list[str]:
    return [
        target["expr"]
        for panel in dashboard_panels(dashboard)
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def dashboard_metric_names(dashboard: Doc) -> set[str]:
    return {name for expr in dashboard_expressions(dashboard) for name in promql_metric_names(expr)}
