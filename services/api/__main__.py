"""`jobsched api` / `python -m services.api`: the HTTP API on API_HOST:API_PORT."""

from __future__ import annotations

import uvicorn

from services.api.app import create_app
from shared.config import Settings
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.store.mongo import MongoJobStore


def main() -> None:
    settings = Settings.from_env()
    configure_logging("api", settings.log_level)
    store = MongoJobStore.connect(
        settings.mongo_uri, settings.mongo_db, timeout_ms=int(settings.mongo_timeout.total_seconds() * 1000)
    )
    serve_metrics(settings.metrics_port)
    uvicorn.run(create_app(store), host=settings.api_host, port=settings.api_port, log_config=None, access_log=False)


if __name__ == "__main__":
    main()
