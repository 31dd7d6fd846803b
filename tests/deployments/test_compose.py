"""deployments/docker: the compose file, its Dockerfile, and the wiring between the services (no Docker needed)."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from services.api.auth.api_auth import api_auth
from shared.config import Settings
from shared.handlers.builtin import builtin_types
from shared.http_jobs.request import JOB_TYPE as HTTP_JOB_TYPE
from shared.store.sqlite.keys import SqliteKeyStore
from tests.deployments.manifests import (
    COMPOSE_FILE,
    DOCKER_DIR,
    DOCKERFILE,
    REPO_ROOT,
    Doc,
    known_env_names,
    load_yaml,
)

# What the binaries serve by default: the built-ins, and the http type (which signs with the backend's secrets).
SERVED_TYPES = sorted([*builtin_types(demo=True).names(), HTTP_JOB_TYPE])


pytestmark = pytest.mark.unit

COMPOSE: Doc = load_yaml(COMPOSE_FILE)
SERVICES: dict[str, Doc] = COMPOSE["services"]
DOCKERFILE_PATH = DOCKERFILE.relative_to(REPO_ROOT).as_posix()
# The product's services: those built from deployments/docker/Dockerfile.
JOBSCHED = {name: s for name, s in SERVICES.items() if s.get("build", {}).get("dockerfile") == DOCKERFILE_PATH}
LONG_RUNNING = {name: s for name, s in JOBSCHED.items() if "tools" not in s.get("profiles", [])}
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def env(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in SERVICES[service].get("environment", {}).items()}


def settings(service: str) -> Settings:
    """What the service's process would run with: shared/config.py applied to its compose environment."""
    return Settings.from_env(env(service))


def by_command(first: str) -> dict[str, Doc]:
    return {name: s for name, s in LONG_RUNNING.items() if s.get("command", [None])[0] == first}


def healthcheck_url_port(service: str) -> int:
    test = " ".join(SERVICES[service]["healthcheck"]["test"])
    match = re.search(r"http://127\.0\.0\.1:(\d+)/", test)
    assert match, f"{service}: healthcheck does not probe a local HTTP port: {test}"
    return int(match.group(1))


def check_compose_schema(path: Path) -> subprocess.CompletedProcess[str]:
    # The Compose Specification schema vendored in check-jsonschema: offline, no download at test time.
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_compose_file_follows_the_compose_specification() -> None:
    result = check_compose_schema(COMPOSE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_a_misspelt_key(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("    depends_on: *worker-depends\n", "    depend_on: {}\n", 1))
    assert broken.read_text() != COMPOSE_FILE.read_text()
    result = check_compose_schema(broken)
    assert result.returncode != 0
    assert "depend_on" in result.stdout + result.stderr


def test_one_executor_service_per_registered_job_type() -> None:
    executors = by_command("executor")
    types = sorted(s["command"][2] for s in executors.values())
    assert types == SERVED_TYPES
    for name, service in executors.items():
        job_type = service["command"][2]
        assert service["command"] == ["executor", "--type", job_type]
        assert name == f"executor-{job_type}"


def test_the_stack_has_every_component() -> None:
    assert len(by_command("scheduler")) == 2, "two schedulers: one leads, one stands by"
    assert len(by_command("api")) == 1
    assert len(by_command("reaper")) == 1
    assert SERVICES["etcd"]["image"].startswith("quay.io/coreos/etcd:v3.5.")
    assert re.fullmatch(r"apache/kafka:4\.\d+\.\d+", SERVICES["kafka"]["image"])
    assert re.fullmatch(r"mongo:7(\.\d+)*", SERVICES["mongo"]["image"])
    assert SERVICES["prometheus"]["image"].startswith("prom/prometheus:")
    assert SERVICES["grafana"]["image"].startswith("grafana/grafana:")
    seed = SERVICES["seed"]
    assert seed["profiles"] == ["tools"]
    assert seed["entrypoint"] == ["jobsched", "seed"]
    assert (REPO_ROOT / "seed" / "__main__.py").exists()


def test_jobsched_services_set_only_variables_the_code_reads() -> None:
    known = known_env_names()
    for name in JOBSCHED:
        unknown = set(env(name)) - known
        assert not unknown, f"{name}: {sorted(unknown)} are read by nothing (shared/config.py reads {sorted(known)})"
        settings(name)  # and every value passes the same validation as at start-up


def test_entrypoint_variables_are_really_read() -> None:
    """JOB_TYPE and NODE_ID are allowed beside Settings because the entry points read them; keep that true."""
    sources = "".join(p.read_text() for p in (REPO_ROOT / "services").glob("*/__main__.py"))
    for name in ("JOB_TYPE", "NODE_ID"):
        assert f'os.environ.get("{name}")' in sources


def test_kafka_kraft_single_node() -> None:
    kafka = env("kafka")
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{kafka['KAFKA_NODE_ID']}@kafka:9093"
    assert "kafka:9092" in kafka["KAFKA_ADVERTISED_LISTENERS"]
    assert kafka["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"


def test_servers_are_addressed_by_their_compose_names() -> None:
    for name in JOBSCHED:
        s = settings(name)
        mongo = urlsplit(s.mongo_uri)
        assert mongo.netloc == "mongo:27017"
        replica_set = parse_qs(mongo.query)["replicaSet"][0]
        mongo_cmd = SERVICES["mongo"]["command"]
        assert mongo_cmd[mongo_cmd.index("--replSet") + 1] == replica_set
        health = " ".join(SERVICES["mongo"]["healthcheck"]["test"])
        assert "rs.initiate" in health
        assert f"_id: '{replica_set}'" in health
        assert "host: 'mongo:27017'" in health
        assert s.kafka_brokers == "kafka:9092"
        assert "PLAINTEXT://kafka:9092" in env("kafka")["KAFKA_ADVERTISED_LISTENERS"]
        assert s.etcd_endpoints == "etcd:2379"
        assert "--advertise-client-urls=http://etcd:2379" in SERVICES["etcd"]["command"]


def test_api_listens_on_all_interfaces_on_the_published_port() -> None:
    s = settings("api")
    assert s.api_host == "0.0.0.0"
    published = [str(p) for p in SERVICES["api"]["ports"]]
    assert published == [f"{s.api_port}:{s.api_port}"]
    assert healthcheck_url_port("api") == s.api_port
    assert "/readyz" in " ".join(SERVICES["api"]["healthcheck"]["test"])


def test_the_published_api_requires_keys_and_reads_its_bootstrap_key_from_a_secret(tmp_path: Path) -> None:
    s = settings("api")
    assert s.auth == "required"
    secret, sealing = SERVICES["api"]["secrets"]
    assert s.auth_bootstrap_key_file == f"/run/secrets/{secret}"
    assert COMPOSE["secrets"][secret] == {"environment": "JOBSCHED_ADMIN_KEY"}
    started = replace(s, auth_bootstrap_key_file="")  # the secret exists only inside the container
    assert api_auth(started, lambda: SqliteKeyStore(tmp_path / "keys.db")) is not None  # a 0.0.0.0 bind it accepts
    # The secrets key: the API and the http executor read the same one, from the shell's JOBSCHED_SECRETS_KEY.
    assert COMPOSE["secrets"][sealing] == {"environment": "JOBSCHED_SECRETS_KEY"}
    for name in ("api", "executor-http"):
        assert settings(name).secrets_key_file == f"/run/secrets/{sealing}", name
    assert SERVICES["executor-http"]["secrets"] == [sealing]
    with_secrets = {name for name, service in JOBSCHED.items() if "secrets" in service}
    assert with_secrets == {"api", "executor-http"}


def test_metrics_listen_on_the_compose_network() -> None:
    """Listeners default to loopback; Prometheus scrapes each service over the network, so compose says so."""
    for name in JOBSCHED:
        assert settings(name).metrics_host == "0.0.0.0", name


def test_workers_are_probed_on_their_metrics_port() -> None:
    for name in set(LONG_RUNNING) - {"api"}:
        assert healthcheck_url_port(name) == settings(name).metrics_port, name
        assert "/healthz" in " ".join(SERVICES[name]["healthcheck"]["test"])


def test_metrics_ports_are_not_published() -> None:
    """Reference: /metrics and /healthz stay on the compose network; only the API's own port is published."""
    for name in JOBSCHED:
        ports = [str(p) for p in SERVICES[name].get("ports", [])]
        assert all(str(settings(name).metrics_port) not in p.split(":") for p in ports), name


def test_depends_on_names_services_that_can_become_healthy() -> None:
    for name, service in SERVICES.items():
        depends: Any = service.get("depends_on", {})
        for target, spec in depends.items() if isinstance(depends, dict) else ((t, {}) for t in depends):
            assert target in SERVICES, f"{name} depends on unknown service {target}"
            if spec.get("condition") == "service_healthy":
                check = SERVICES[target].get("healthcheck", {})
                assert check.get("test"), f"{name} waits for {target}, which has no healthcheck"
                assert not check.get("disable"), f"{name} waits for {target}, whose healthcheck is disabled"
    for name in set(LONG_RUNNING) - {"api"}:
        needs = set(SERVICES[name]["depends_on"])
        assert {"mongo", "api"} <= needs, f"{name} must wait for the store's indexes (api /readyz)"


def test_bind_mounts_and_build_context_exist() -> None:
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":")[0]
            if source.startswith("."):
                assert (DOCKER_DIR / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in COMPOSE.get("volumes", {}), f"{name}: named volume {source} is not declared"
    for service in JOBSCHED.values():
        assert (DOCKER_DIR / service["build"]["context"]).resolve() == REPO_ROOT


# ---------------------------------------------------------------------------------------------- Dockerfile
def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile at `path` in order, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines() if line.strip()]


def test_dockerfile_builds_one_slim_non_root_image_from_the_lock() -> None:
    steps = dockerfile_instructions()
    args = dict(a.split("=", 1) for i, a in steps if i == "ARG" and "=" in a)
    images = [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], a.split()[0]) for i, a in steps if i == "FROM"]
    assert images
    assert set(images) == {"python:3.11-slim"}
    syncs = [a for i, a in steps if i == "RUN" and "uv sync" in a]
    assert syncs
    assert all("--frozen" in a and "--no-dev" in a for a in syncs)
    final = steps[max(n for n, (i, _) in enumerate(steps) if i == "FROM") :]
    users = [a for i, a in final if i == "USER"]
    assert users
    assert users[-1].split(":")[0] not in ("root", "0")
    assert ("ENTRYPOINT", '["jobsched"]') in final
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "jobsched" in scripts
    for name in (a.split("=")[0] for i, a in final if i == "ENV" for a in shlex.split(a)):
        assert name in known_env_names() or name.startswith("PYTHON") or name == "PATH", name


def wheel_packages() -> set[str]:
    """The packages the wheel's build hook places (read from its source: the hook runs only inside a build)."""
    hook = ast.parse((REPO_ROOT / "deployments" / "packaging" / "hatch_build.py").read_text())
    names = {"PUBLIC_PACKAGES", "SERVER_PACKAGES"}
    found = [
        ast.literal_eval(node.value)
        for node in hook.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)
    ]
    assert len(found) == 2
    return {package for packages in found for package in packages}


def test_build_context_admits_everything_the_project_install_needs() -> None:
    patterns = [p for p in (DOCKER_DIR / "Dockerfile.dockerignore").read_text().splitlines() if p and p[0] != "#"]
    admitted = {p[1:] for p in patterns if p.startswith("!")}
    assert patterns[0] == "*", "an allowlist: everything else stays out of the build context"
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    hook = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]["path"]
    needed = {*wheel_packages(), str(Path(hook).parent), "pyproject.toml", "uv.lock", pyproject["project"]["readme"]}
    assert needed <= admitted, f"not in the build context: {sorted(needed - admitted)}"
    copied = [a.split()[:-1] for i, a in dockerfile_instructions() if i == "COPY" and "--from" not in a]
    for sources in copied:
        assert all(s == "." or s in admitted for s in sources), sources
