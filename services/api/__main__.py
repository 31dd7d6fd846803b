"""`jobsched api` / `python -m services.api`: the HTTP API on API_HOST:API_PORT."""

from __future__ import annotations

from services.api.app import create_app
from services.api.auth.api_auth import api_auth
from services.api.http.request_limits import ApiLimits
from services.api.http.same_origin import allowed_hosts
from services.api.http.server import bind, make_server
from shared.backends import backend_from_settings
from shared.cli import one_line_errors
from shared.config import Settings
from shared.handlers.builtin import builtin_types
from shared.job_types.known import KnownTypes
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.nudge import NudgeSender


@one_line_errors("jobsched api")
def main() -> None:
    settings = Settings.from_env()
    configure_logging("api", settings.log_level, settings.log_format)
    backend = backend_from_settings(settings)
    auth = api_auth(settings, backend.open_keys)
    limits = ApiLimits.from_settings(settings)
    listener = bind(settings.api_host, settings.api_port, "API")
    serve_metrics(settings.metrics_host, settings.metrics_port)
    nudge = NudgeSender(settings.nudge_targets) if settings.nudge_targets else None
    known = KnownTypes(
        backend.job_types,
        local=builtin_types(demo=settings.demo_job_types),
        configured=settings.job_types,
        retention=settings.job_type_retention,
    )
    app = create_app(
        backend,
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
