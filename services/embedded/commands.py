"""`jobsched standalone` (the embedded mode as a service) and `jobsched dev` (the developer's shortcut).

Both run `Embedded` in the foreground until SIGINT or SIGTERM, which stop accepting work, let in-flight
handlers finish and exit. They differ in where the data goes:
- `standalone` keeps it at an absolute path: `--db`, else JOBSCHED_DB, else `$STATE_DIRECTORY/jobsched.db`
  (systemd's StateDirectory=), else /var/lib/jobsched/jobsched.db. A relative path is refused: a service's
  working directory is wherever its supervisor started it, and a job store that moves with it is lost.
- `dev` keeps it in the working directory (`./jobsched.db`, or JOBSCHED_DB, relative or not).
They differ in one more thing: `dev` serves /metrics on a free port when the default one is taken (a developer's
machine often runs another exporter there), where `standalone` fails as every service does (Prometheus scrapes
the configured port).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from services.embedded.node import DatabaseInUse, Embedded
from services.scheduler.dispatcher import Dispatcher, DispatcherFactory
from shared.cli import OneLineParser, one_line_errors
from shared.config import ConfigError, Settings
from shared.handlers.builtin import builtin_types
from shared.handlers.plugins import HANDLERS_VARIABLE, load_handlers_or_exit
from shared.observability import configure_observability
from shared.ports import ListenError, listen

log = logging.getLogger("jobsched.embedded")
DB_VARIABLE = "JOBSCHED_DB"
DEV_DB = "jobsched.db"
SERVICE_DB = Path("/var/lib/jobsched/jobsched.db")


def service_database(given: str | None, environ: Mapping[str, str]) -> Path:
    """Where `jobsched standalone` keeps its data; ConfigError for a relative path."""
    if given is None:
        given = environ.get(DB_VARIABLE)
    if given is None:
        state = environ.get("STATE_DIRECTORY", "").split(":")[0]
        return Path(state) / "jobsched.db" if state else SERVICE_DB
    if not Path(given).is_absolute():
        raise ConfigError(
            f"the database path must be absolute, not {given!r} (--db or {DB_VARIABLE}; "
            "`jobsched dev` takes a relative one)"
        )
    return Path(given)


def dev_database(environ: Mapping[str, str]) -> Path:
    return Path(environ.get(DB_VARIABLE) or DEV_DB).resolve()


def announce_ready(prog: str, node: Embedded) -> None:
    log.info(
        f"{prog} ready: API {node.url}, console {node.url}/ui/, metrics {node.metrics_url}",
        extra={
            "action": "embedded_ready",
            "api": node.url,
            "console": f"{node.url}/ui/",
            "metrics": node.metrics_url,
            "db": str(node.path),
        },
    )


def dev_metrics_port(settings: Settings, environ: Mapping[str, str]) -> Settings:
    """`dev`'s settings with a free metrics port when the default one is taken (said in a warning). A port the
    developer chose (METRICS_PORT) is kept: taken, the start fails naming its holder."""
    if "METRICS_PORT" in environ:
        return settings
    try:
        listen(settings.metrics_host, settings.metrics_port, "metrics", "METRICS_PORT").close()
    except ListenError as taken:
        log.warning(
            f"{taken}; serving /metrics on a free port instead, named in the ready line",
            extra={"action": "metrics_port_taken", "port": settings.metrics_port},
        )
        return dataclasses.replace(settings, metrics_port=0)
    return settings


def run(prog: str, name: str, *, service: bool, make_dispatcher: DispatcherFactory) -> None:
    parser = OneLineParser(prog=prog, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--handlers", default=None, help=f"comma-separated handler modules to load (or {HANDLERS_VARIABLE})"
    )
    if service:
        parser.add_argument(
            "--db", default=None, help=f"the SQLite file, an absolute path (or {DB_VARIABLE}; default {SERVICE_DB})"
        )
    args = parser.parse_args()
    settings = Settings.from_env()
    handlers = builtin_types(demo=settings.demo_job_types)
    load_handlers_or_exit(handlers, args.handlers, os.environ, prog)
    configure_observability(name, settings)
    if not service:
        settings = dev_metrics_port(settings, os.environ)
    path = service_database(args.db, os.environ) if service else dev_database(os.environ)
    node = Embedded(
        path,
        settings=settings,
        handlers=handlers,
        metrics=True,
        make_dispatcher=make_dispatcher,
        on_ready=lambda node: announce_ready(prog, node),
        name=name,
    )
    # What the start made so far (modules, classes, settings, handlers: some 55,000 objects that live as long as the
    # process) is frozen out of the garbage collector's full collections, which would walk it all each time (0.07 s
    # of a 20,000-job drain, 0.03 s frozen); collected first, so that no garbage is frozen with it. Only in a
    # process of jobsched's own: an application that embeds jobsched decides about its own heap.
    gc.collect()
    gc.freeze()
    node.serve()


@one_line_errors("jobsched standalone", DatabaseInUse)
def standalone_main(make_dispatcher: DispatcherFactory = Dispatcher.from_settings) -> None:
    run("jobsched standalone", "standalone", service=True, make_dispatcher=make_dispatcher)


@one_line_errors("jobsched dev", DatabaseInUse)
def dev_main(make_dispatcher: DispatcherFactory = Dispatcher.from_settings) -> None:
    run("jobsched dev", "dev", service=False, make_dispatcher=make_dispatcher)
