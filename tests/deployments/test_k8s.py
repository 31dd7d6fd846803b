"""deployments/k8s: manifests, probes, scrape annotations and the KEDA ScaledObjects, checked against the code."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from services.api.auth.api_auth import api_auth
from shared.bus.base import consumer_group, dispatch_topic
from shared.config import Settings
from shared.handlers.builtin import builtin_types
from shared.http_jobs.request import JOB_TYPE as HTTP_JOB_TYPE
from shared.store.sqlite.keys import SqliteKeyStore
from tests.deployments.manifests import K8S_DIR, Doc, known_env_names, load_yaml, load_yaml_documents

# What the binaries serve by default: the built-ins, and the http type (which signs with the backend's secrets).
SERVED_TYPES = sorted([*builtin_types(demo=True).names(), HTTP_JOB_TYPE])


pytestmark = pytest.mark.unit

KUSTOMIZATION: Doc = load_yaml(K8S_DIR / "kustomization.yaml")
DOCS: list[Doc] = [
    doc for f in sorted(K8S_DIR.glob("*.yaml")) if f.name != "kustomization.yaml" for doc in load_yaml_documents(f)
]


def of_kind(kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in DOCS if d["kind"] == kind}


DEPLOYMENTS = of_kind("Deployment")
SERVICES = of_kind("Service")
SCALED = of_kind("ScaledObject")
(CONFIG,) = of_kind("ConfigMap").values()
SETTINGS = Settings.from_env(CONFIG["data"])


def container(deployment: Doc) -> Doc:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(only)


def executors() -> dict[str, Doc]:
    return {name: d for name, d in DEPLOYMENTS.items() if container(d)["args"][0] == "executor"}


def port_number(c: Doc, port: int | str) -> int:
    """A probe's or Service's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in c["ports"] if p["name"] == port]
    return int(number)


def test_kustomization_lists_every_manifest_once() -> None:
    files = sorted(f.name for f in K8S_DIR.glob("*.yaml") if f.name != "kustomization.yaml")
    assert sorted(KUSTOMIZATION["resources"]) == files
    counts: Counter[str] = Counter(KUSTOMIZATION["resources"])
    assert not [name for name, n in counts.items() if n > 1]
    (namespace,) = of_kind("Namespace")
    assert KUSTOMIZATION["namespace"] == namespace
    assert all(d["metadata"].get("namespace", namespace) == namespace for d in DOCS)


def test_kustomize_renders_offline() -> None:
    result = subprocess.run(["kubectl", "kustomize", str(K8S_DIR)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\nkind: Deployment") == len(DEPLOYMENTS)


def test_one_executor_deployment_per_registered_job_type() -> None:
    found = {}
    for name, deployment in executors().items():
        args = container(deployment)["args"]
        assert args[:2] == ["executor", "--type"], name
        assert len(args) == 3, name
        assert name == f"executor-{args[2]}"
        found[args[2]] = name
    assert sorted(found) == SERVED_TYPES


def test_every_service_runs() -> None:
    commands = Counter(container(d)["args"][0] for d in DEPLOYMENTS.values())
    assert {"api", "scheduler", "reaper", "executor"} == set(commands)
    assert DEPLOYMENTS["scheduler"]["spec"]["replicas"] == 2
    assert {"api", "scheduler", "reaper"} <= set(SERVICES)


def test_configmap_holds_only_settings_the_code_reads() -> None:
    known = known_env_names()
    assert set(CONFIG["data"]) <= known, sorted(set(CONFIG["data"]) - known)
    assert SETTINGS.api_host == "0.0.0.0", "the API must listen on the pod's address, not loopback"
    assert SETTINGS.metrics_host == "0.0.0.0", "probes and Prometheus reach metrics on the pod's address"


def test_containers_take_the_configmap_and_only_known_variables() -> None:
    known = known_env_names()
    for name, deployment in DEPLOYMENTS.items():
        c = container(deployment)
        assert {"configMapRef": {"name": CONFIG["metadata"]["name"]}} in c["envFrom"], name
        names = {e["name"] for e in c.get("env", [])}
        assert names <= known, f"{name}: {sorted(names - known)}"
        assert c["image"].split(":")[0] == "jobsched", name
        assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_the_api_requires_keys_and_takes_its_bootstrap_key_from_a_secret(tmp_path: Path) -> None:
    assert SETTINGS.auth == "required"
    for name, deployment in DEPLOYMENTS.items():
        env = {e["name"]: e for e in container(deployment).get("env", [])}
        if name != "api":
            assert "AUTH_BOOTSTRAP_KEY" not in env, f"{name} has no use for the admin key"
            continue
        assert env["AUTH_BOOTSTRAP_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "jobsched-admin-key", "key": "key"}
    assert api_auth(SETTINGS, lambda: SqliteKeyStore(tmp_path / "keys.db")) is not None  # a 0.0.0.0 bind it accepts


def test_the_api_and_the_http_executor_share_an_optional_secrets_key() -> None:
    sealing = {"name": "jobsched-secrets-key", "key": "key", "optional": True}
    for name, deployment in DEPLOYMENTS.items():
        env = {e["name"]: e for e in container(deployment).get("env", [])}
        if name in ("api", "executor-http"):
            assert env["JOBSCHED_SECRETS_KEY"]["valueFrom"]["secretKeyRef"] == sealing, name
        else:
            assert "JOBSCHED_SECRETS_KEY" not in env, f"{name} has no use for the secrets key"


def test_selectors_match_pod_labels() -> None:
    pods = {name: d["spec"]["template"]["metadata"]["labels"] for name, d in DEPLOYMENTS.items()}
    for name, deployment in DEPLOYMENTS.items():
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pods[name].items(), name
    for name, service in SERVICES.items():
        selected = [d for d, labels in pods.items() if service["spec"]["selector"].items() <= labels.items()]
        assert selected == [name], f"Service {name} selects {selected}"
        c = container(DEPLOYMENTS[name])
        for port in service["spec"]["ports"]:
            assert port_number(c, port["targetPort"]) == port["port"], f"{name}: {port}"


def test_probes_and_ports_follow_the_configmap() -> None:
    for name, deployment in DEPLOYMENTS.items():
        c = container(deployment)
        declared = {p["containerPort"] for p in c["ports"]}
        assert SETTINGS.metrics_port in declared, name
        live, ready = c["livenessProbe"]["httpGet"], c["readinessProbe"]["httpGet"]
        if c["args"][0] == "api":
            assert SETTINGS.api_port in declared
            assert (live["path"], port_number(c, live["port"])) == ("/healthz", SETTINGS.api_port)
            assert (ready["path"], port_number(c, ready["port"])) == ("/readyz", SETTINGS.api_port)
        else:
            for probe in (live, ready):
                assert (probe["path"], port_number(c, probe["port"])) == ("/healthz", SETTINGS.metrics_port), name


def test_pods_carry_prometheus_scrape_annotations() -> None:
    for name, deployment in DEPLOYMENTS.items():
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", name
        assert annotations["prometheus.io/port"] == str(SETTINGS.metrics_port), name
        assert annotations["prometheus.io/path"] == "/metrics", name


def test_one_scaled_object_per_executor_on_its_own_lag() -> None:
    targets = {}
    for name, scaled in SCALED.items():
        ref = scaled["spec"]["scaleTargetRef"]
        assert ref.get("kind", "Deployment") == "Deployment", name
        assert ref["name"] in DEPLOYMENTS, name
        job_type = container(DEPLOYMENTS[ref["name"]])["args"][2]
        targets[job_type] = ref["name"]
        (trigger,) = scaled["spec"]["triggers"]
        meta = trigger["metadata"]
        assert trigger["type"] == "kafka"
        assert meta["bootstrapServers"] == SETTINGS.kafka_brokers
        assert meta["consumerGroup"] == consumer_group(job_type, SETTINGS.kafka_topic_prefix) == f"executor-{job_type}"
        assert meta["topic"] == dispatch_topic(job_type, SETTINGS.kafka_topic_prefix) == f"jobs.dispatch.{job_type}"
        assert isinstance(meta["lagThreshold"], str)
        assert int(meta["lagThreshold"]) > 0
        spec = scaled["spec"]
        # More consumers than partitions would sit idle: each partition has one reader per group.
        assert 1 == spec["minReplicaCount"] <= spec["maxReplicaCount"] <= SETTINGS.kafka_partitions
    assert sorted(targets) == SERVED_TYPES
    assert sorted(targets.values()) == sorted(executors())
