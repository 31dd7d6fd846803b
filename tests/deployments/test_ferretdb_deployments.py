"""FerretDB 2 on PostgreSQL + DocumentDB in production: the Compose override (deployments/docker/ferretdb.yml),
the image of PostgreSQL with DocumentDB (deployments/docker/documentdb.Dockerfile) and the Kubernetes overlay
(deployments/k8s-ferretdb/), checked against the stack they change and the script the test servers are built
with (no Docker or cluster needed)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from shared.config import Settings
from tests.deployments.manifests import (
    COMPOSE_FILE,
    DOCKER_DIR,
    K8S_DIR,
    LOCAL_DIR,
    REPO_ROOT,
    Doc,
    load_yaml,
    load_yaml_documents,
)
from tests.deployments.test_compose import check_compose_schema, dockerfile_instructions

pytestmark = pytest.mark.unit

OVERRIDE_FILE = DOCKER_DIR / "ferretdb.yml"
IMAGE_FILE = DOCKER_DIR / "documentdb.Dockerfile"
OVERLAY_DIR = K8S_DIR.parent / "k8s-ferretdb"
BASE: dict[str, Doc] = load_yaml(COMPOSE_FILE)["services"]
OVERRIDE: Doc = load_yaml(OVERRIDE_FILE)
PASSWORD = "0123abcd"  # what a user exports as JOBSCHED_POSTGRES_PASSWORD


def interpolated(value: str) -> str:
    """`value` as Compose reads it with JOBSCHED_POSTGRES_PASSWORD exported (no other variable is allowed)."""
    names = set(re.findall(r"\$\{(\w+)", value))
    assert names <= {"JOBSCHED_POSTGRES_PASSWORD"}, names
    return re.sub(r"\$\{JOBSCHED_POSTGRES_PASSWORD:\?[^}]*\}", PASSWORD, value)


def merged_env(service: str) -> dict[str, str]:
    """A service's environment after `-f docker-compose.yml -f ferretdb.yml` (environment merges by name)."""
    env = {**BASE[service].get("environment", {}), **OVERRIDE["services"].get(service, {}).get("environment", {})}
    return {name: interpolated(str(value)) for name, value in env.items()}


def documentdb_sql(command: str, **env: str) -> str:
    """What `documentdb.sh COMMAND` prints (settings, create-sql) with `env`."""
    result = subprocess.run(
        ["bash", str(LOCAL_DIR / "documentdb.sh"), command],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", **env},
        check=True,
    )
    return result.stdout


# ------------------------------------------------------------------------------------------------- Compose
def test_the_override_follows_the_compose_specification() -> None:
    result = check_compose_schema(OVERRIDE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_service_of_the_store_logs_in_to_ferretdb() -> None:
    using_the_store = sorted(name for name, s in BASE.items() if "MONGO_URI" in s.get("environment", {}))
    assert len(using_the_store) >= 8
    for name in using_the_store:
        uri = urlsplit(Settings.from_env(merged_env(name)).mongo_uri)
        assert (uri.hostname, uri.port, uri.username, uri.password) == ("mongo", 27017, "jobsched", PASSWORD), name
        assert "replicaSet" not in uri.query, f"{name}: FerretDB is one server, not a replica set"


def test_ferretdb_takes_the_place_of_mongo_in_front_of_documentdb() -> None:
    ferretdb, documentdb = OVERRIDE["services"]["mongo"], OVERRIDE["services"]["documentdb"]
    assert ferretdb["image"].startswith("ghcr.io/ferretdb/ferretdb:2.")
    assert all(arg.startswith("--") for arg in ferretdb["command"]), "flags only: the image runs its default command"
    assert ferretdb["healthcheck"]["test"] == ["CMD", "/ferretdb", "ping"]
    assert ferretdb["depends_on"]["documentdb"]["condition"] == "service_healthy"
    server = urlsplit(interpolated(ferretdb["environment"]["FERRETDB_POSTGRESQL_URL"]))
    login = (documentdb["environment"]["POSTGRES_USER"], interpolated(documentdb["environment"]["POSTGRES_PASSWORD"]))
    assert (server.hostname, server.port, server.path) == ("documentdb", 5432, "/postgres")
    assert (server.username, server.password) == login
    assert documentdb["environment"]["POSTGRES_DB"] == "postgres"
    assert (DOCKER_DIR / documentdb["build"]["context"]).resolve() == REPO_ROOT
    assert (REPO_ROOT / documentdb["build"]["dockerfile"]) == IMAGE_FILE
    for service in (ferretdb, documentdb):
        assert "ports" not in service, "neither server is published"
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in OVERRIDE["volumes"]


# -------------------------------------------------------------------------------------------------- image
def test_the_image_builds_documentdb_with_the_test_servers_script_and_settings() -> None:
    steps = dockerfile_instructions(IMAGE_FILE)
    patterns = [p for p in Path(f"{IMAGE_FILE}.dockerignore").read_text().splitlines() if p and p[0] != "#"]
    assert patterns[0] == "*"
    admitted = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    for sources in (a.split()[:-1] for i, a in steps if i == "COPY"):
        for source in sources:
            source_path = Path(source.rstrip("/"))
            assert {source_path, *source_path.parents} & {Path(a) for a in admitted}, f"{source}: not in the context"
            assert (REPO_ROOT / source).exists(), source
    [run] = [a for i, a in steps if i == "RUN"]
    assert "documentdb.sh install" in run
    assert "documentdb.sh settings >>/usr/share/postgresql/postgresql.conf.sample" in run
    assert "documentdb.sh create-sql >/docker-entrypoint-initdb.d/" in run


def test_a_new_cluster_gets_documentdbs_rum_extension_with_its_rum_loaded() -> None:
    """Loaded without its extension, DocumentDB's RUM has DocumentDB log a warning on every query."""
    create = documentdb_sql("create-sql")
    assert create.splitlines() == [
        "CREATE EXTENSION IF NOT EXISTS documentdb CASCADE;",
        "CREATE EXTENSION IF NOT EXISTS documentdb_extended_rum;",
    ]
    assert documentdb_sql("create-sql", DOCUMENTDB_RUM="upstream").splitlines() == [create.splitlines()[0]]


def test_the_servers_settings_load_documentdbs_rum_and_keep_postgresqls_durability() -> None:
    settings = documentdb_sql("settings")
    lines = dict(line.split(" = ", 1) for line in settings.splitlines())
    assert lines["shared_preload_libraries"] == "'pg_cron,pg_documentdb_core,pg_documentdb'"
    assert lines["documentdb.rum_library_load_option"] == "'require_documentdb_extended_rum'"
    assert not {"fsync", "synchronous_commit", "full_page_writes"} & set(lines), "the test server's speed-ups"
    assert "rum_library_load_option" not in documentdb_sql("settings", DOCUMENTDB_RUM="upstream")


# ------------------------------------------------------------------------------------------------ Kubernetes
def rendered_overlay() -> list[Doc]:
    result = subprocess.run(["kubectl", "kustomize", str(OVERLAY_DIR)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]


def test_the_overlay_renders_the_stack_and_both_servers() -> None:
    docs = rendered_overlay()
    base = [d for f in sorted(K8S_DIR.glob("*.yaml")) if f.name != "kustomization.yaml" for d in load_yaml_documents(f)]
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {(d["kind"], d["metadata"]["name"]) for d in base} <= names
    servers = {("StatefulSet", "documentdb"), ("Service", "documentdb"), ("Deployment", "ferretdb")}
    assert {*servers, ("Service", "mongo")} <= names
    assert all(d["metadata"].get("namespace") == "jobsched" for d in docs if d["kind"] != "Namespace")


def test_every_jobsched_container_takes_the_store_uri_from_the_secret_last() -> None:
    docs = rendered_overlay()
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    jobsched = [d for d in deployments if d["metadata"]["labels"]["app.kubernetes.io/name"] == "jobsched"]
    assert len(jobsched) >= 8
    for deployment in jobsched:
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["envFrom"][-1] == {"secretRef": {"name": "jobsched-store"}}, deployment["metadata"]["name"]
        assert {"configMapRef": {"name": "jobsched-config"}} in container["envFrom"][:-1]


def test_ferretdb_answers_where_the_configmap_points_and_reaches_documentdb() -> None:
    docs = {(d["kind"], d["metadata"]["name"]): d for d in rendered_overlay()}
    configured = urlsplit(docs["ConfigMap", "jobsched-config"]["data"]["MONGO_URI"])
    service = docs["Service", "mongo"]["spec"]
    assert (configured.hostname, configured.port) == ("mongo", service["ports"][0]["port"])
    ferretdb = docs["Deployment", "ferretdb"]["spec"]["template"]
    assert service["selector"].items() <= ferretdb["metadata"]["labels"].items()
    [container] = ferretdb["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    url = urlsplit(env["FERRETDB_POSTGRESQL_URL"]["value"])
    database = docs["Service", "documentdb"]["spec"]
    assert (url.hostname, url.port, url.path) == ("documentdb", database["ports"][0]["port"], "/postgres")
    assert (url.username, url.password) == ("$(POSTGRES_USER)", "$(POSTGRES_PASSWORD)")
    names = list(env)
    assert names.index("POSTGRES_PASSWORD") < names.index("FERRETDB_POSTGRESQL_URL"), "expanded from earlier vars"
    assert container["readinessProbe"]["exec"]["command"] == ["/ferretdb", "ping"]
    assert ferretdb["spec"]["securityContext"]["runAsUser"] != 0
    postgres = docs["StatefulSet", "documentdb"]["spec"]["template"]
    assert database["selector"].items() <= postgres["metadata"]["labels"].items()
    secrets = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for c in [container, *postgres["spec"]["containers"]]
        for e in c["env"]
        if "valueFrom" in e
    }
    assert secrets == {"jobsched-postgres"}
