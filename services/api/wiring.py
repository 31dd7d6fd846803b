"""The API's server built from the settings, as `jobsched api` serves it and the embedded node does: the same
request limits, accepted job types, claim lookahead and allowed hosts in both. What differs between them (the
handlers of the process, what a due job nudges, who hears that the server answers) is the caller's, and so are
the listening socket and the authentication, which each makes at its own point of its start."""

from __future__ import annotations

from collections.abc import Callable

import uvicorn

from jobsched.handlers import JobTypes
from services.api.app import create_app
from services.api.auth.api_auth import ApiAuth
from services.api.http.request_limits import ApiLimits
from services.api.http.same_origin import allowed_hosts
from services.api.http.server import make_server
from shared.backends import Backend
from shared.config import Settings
from shared.job_types.known import KnownTypes


def api_server(
    settings: Settings,
    backend: Backend,
    auth: ApiAuth | None,
    *,
    local_types: JobTypes,
    on_due_job: Callable[[], None] | None,
    on_ready: Callable[[], None] | None = None,
) -> uvicorn.Server:
    """The API on `backend`, to be run on the listening socket bound for API_HOST:API_PORT. `local_types`: the
    job types of this process's handlers (accepted beside the announced and configured ones); `on_due_job` and
    `on_ready`: as create_app takes them."""
    limits = ApiLimits.from_settings(settings)
    known_types = KnownTypes(
        backend.job_types,
        local=local_types,
        configured=settings.job_types,
        retention=settings.job_type_retention,
    )
    app = create_app(
        backend,
        auth,
        limits,
        on_due_job=on_due_job,
        due_within=settings.claim_lookahead,
        known_types=known_types,
        allowed_hosts=allowed_hosts(settings),
        on_ready=on_ready,
    )
    return make_server(app, settings.api_host, settings.api_port, limits)
