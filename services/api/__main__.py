"""`jobsched api` / `python -m services.api`: the HTTP API on API_HOST:API_PORT."""

from __future__ import annotations

from services.api.auth.api_auth import api_auth
from services.api.http.server import bind
from services.api.wiring import api_server
from shared.backends import backend_from_settings
from shared.cli import one_line_errors
from shared.config import Settings
from shared.handlers.builtin import builtin_types
from shared.metrics import serve_metrics
from shared.nudge import NudgeSender
from shared.observability import configure_observability


@one_line_errors("jobsched api")
def main() -> None:
    settings = Settings.from_env()
    configure_observability("api", settings)
    backend = backend_from_settings(settings)
    auth = api_auth(settings, backend.open_keys)
    listener = bind(settings.api_host, settings.api_port, "API")
    serve_metrics(settings.metrics_host, settings.metrics_port)
    nudge = NudgeSender(settings.nudge_targets) if settings.nudge_targets else None
    server = api_server(
        settings, backend, auth, local_types=builtin_types(demo=settings.demo_job_types), on_due_job=nudge
    )
    server.run(sockets=[listener])


if __name__ == "__main__":
    main()
