"""What every binary sets up first to be observed: its logs (shared/logging.py) and, when the OTEL_* variables
ask for them, its traces (shared/tracing). Metrics are served by each binary's own /metrics."""

from __future__ import annotations

from shared import tracing
from shared.config import Settings
from shared.logging import configure_logging


def configure_observability(service: str, settings: Settings) -> None:
    """`service`: the process's name in its logs, and in its traces as `jobsched-<service>` (unless
    OTEL_SERVICE_NAME names it)."""
    configure_logging(service, settings.log_level, settings.log_format)
    tracing.configure(service)
