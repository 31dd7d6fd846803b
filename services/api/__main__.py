"""`jobsched api` / `python -m services.api`: the HTTP API on API_HOST:API_PORT."""

from __future__ import annotations

import uvicorn

from services.api.app import create_app
from services.api.auth import api_auth
from shared.config import ConfigError, Settings
from shared.keys.mongo import MongoKeyStore
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.nudge import NudgeSender
from shared.runtime import connect_store


def main() -> None:
    settings = Settings.from_env()
    configure_logging("api", settings.log_level)
    timeout_ms = int(settings.mongo_timeout.total_seconds() * 1000)
    try:
        auth = api_auth(
            settings, lambda: MongoKeyStore.connect(settings.mongo_uri, settings.mongo_db, timeout_ms=timeout_ms)
        )
    except ConfigError as exc:
        raise SystemExit(f"jobsched api: {exc}") from None
    store = connect_store(settings)
    nudge = NudgeSender(settings.nudge_targets) if settings.nudge_targets else None
    serve_metrics(settings.metrics_port)
    app = create_app(store, auth, on_due_job=nudge, due_within=settings.claim_lookahead)
    uvicorn.run(app, host=settings.api_host, port=settings.api_port, log_config=None, access_log=False)


if __name__ == "__main__":
    main()
