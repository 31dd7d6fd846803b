"""`jobsched api` / `python -m services.api`: the HTTP API on API_HOST:API_PORT."""

from __future__ import annotations

from services.api.app import create_app
from services.api.auth.api_auth import api_auth
from services.api.http.request_limits import ApiLimits
from services.api.http.same_origin import allowed_hosts
from services.api.http.server import bind, make_server
from shared.cli import one_line_errors
from shared.config import Settings
from shared.handlers.builtin import builtin_types
from shared.job_types.known import KnownTypes
from shared.job_types.registries import type_registry_of
from shared.keys.mongo import MongoKeyStore
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.nudge import NudgeSender
from shared.runtime import connect_store


@one_line_errors("jobsched api")
def main() -> None:
    settings = Settings.from_env()
    configure_logging("api", settings.log_level, settings.log_format)
    timeout_ms = int(settings.mongo_timeout.total_seconds() * 1000)
    auth = api_auth(
        settings, lambda: MongoKeyStore.connect(settings.mongo_uri, settings.mongo_db, timeout_ms=timeout_ms)
    )
    limits = ApiLimits.from_settings(settings)
    listener = bind(settings.api_host, settings.api_port, "API")
    serve_metrics(settings.metrics_host, settings.metrics_port)
    store = connect_store(settings)
    nudge = NudgeSender(settings.nudge_targets) if settings.nudge_targets else None
    known = KnownTypes(
        type_registry_of(store),
        local=builtin_types(demo=settings.demo_job_types),
        configured=settings.job_types,
        retention=settings.job_type_retention,
    )
    app = create_app(
        store,
        auth,
        limits,
        on_due_job=nudge,
        due_within=settings.claim_lookahead,
        known_types=known,
        allowed_hosts=allowed_hosts(settings),
    )
    make_server(app, settings.api_host, settings.api_port, limits).run(sockets=[listener])


if __name__ == "__main__":
    main()
