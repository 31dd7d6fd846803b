"""`jobsched api` / `python -m services.api`: the HTTP API on API_HOST:API_PORT."""

from __future__ import annotations

import uvicorn

from services.api.app import create_app
from shared.config import Settings
from shared.logging import configure_logging
from shared.metrics import serve_metrics
from shared.runtime import connect_store


def main() -> None:
    settings = Settings.from_env()
    configure_logging("api", settings.log_level)
    store = connect_store(settings)
    serve_metrics(settings.metrics_port)
    uvicorn.run(create_app(store), host=settings.api_host, port=settings.api_port, log_config=None, access_log=False)


if __name__ == "__main__":
    main()
