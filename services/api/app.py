"""The HTTP API, put together: the routes of each resource (routes/), the HTTP limits every request meets
(http/), authentication (auth/), and what the routes share (context.py).

Errors are `{"error": message}` with a fitting status and never a stack trace (http/errors.py); successful
responses are the bare resource. Store calls are blocking pymongo/sqlite calls: they run in worker threads,
admitted by http/store_slots.py. Every request first meets http/request_limits.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from services.api.auth.api_auth import PUBLIC_PATHS
from services.api.auth.tenancy import guarded_browser
from services.api.console import console_routes
from services.api.context import ApiContext
from services.api.credential_check import credentials_checked
from services.api.http.errors import exception_handlers
from services.api.http.request_limits import ApiLimits, RequestLimits
from services.api.http.request_metrics import RequestMetrics
from services.api.http.request_traces import RequestTraces
from services.api.http.same_origin import LOOPBACK_NAMES, SameOriginOnly
from services.api.http.store_slots import StoreSlots
from services.api.openapi import document_maker
from services.api.routes import (
    batches,
    credentials,
    docs,
    job_batch,
    job_types,
    jobs,
    keys,
    operator,
    probes,
    schedule_apply,
    schedules,
    signing_secrets,
    workflows,
)
from services.api.schema_readiness import SchemaReadiness
from services.api.store_ping import StorePing
from shared.backends import Backend
from shared.handlers.builtin import builtin_types
from shared.job_types.known import KnownTypes
from shared.schedules.engine import ScheduleEngine

if TYPE_CHECKING:
    from services.api.auth.api_auth import ApiAuth

log = logging.getLogger("jobsched.api")


def create_app(
    backend: Backend,
    auth: ApiAuth | None = None,
    limits: ApiLimits | None = None,
    on_due_job: Callable[[], None] | None = None,
    due_within: timedelta = timedelta(0),
    known_types: KnownTypes | None = None,
    allowed_hosts: Collection[str] = LOOPBACK_NAMES,
    on_ready: Callable[[], None] | None = None,
) -> Starlette:
    """The API; with `auth` (AUTH=required) every route but the public ones needs a key, and the routes see
    the store only through the tenant guard of the request's key. `on_due_job` (a scheduler nudge) is called
    after a one-off job due within `due_within` from now (the scheduler's claim lookahead) was stored, so
    that it is claimed without waiting for the next tick. `known_types` says which job types it accepts (by
    default: this process's handlers and what executors announced in the store). Without `auth`, only requests
    for `allowed_hosts` are served and writes from other web origins are refused (same_origin.py). `on_ready` is
    called once the app has started, as the server begins to answer."""
    limits = limits or ApiLimits()
    # Every payload a route writes meets the credential check, inside the tenant guard (credential_check.py).
    store, browser = credentials_checked(backend.jobs, backend.credentials), backend.browser
    known = known_types or KnownTypes(backend.job_types, local=builtin_types(demo=True))
    if auth is not None:
        store = auth.guard(store)
        browser = guarded_browser(browser)
    schema = SchemaReadiness(store)
    api = ApiContext(
        store=store,
        browser=browser,
        known=known,
        schema=schema,
        slots=StoreSlots(
            write_slots=limits.store_slots,
            read_slots=limits.store_slots,
            wait_s=limits.store_wait_s,
            slots_per_sharer=limits.store_slots_per_key if auth is not None else None,
        ),
        schedules=ScheduleEngine(store),
        store_ping=StorePing(store.ping),
        openapi=document_maker(PUBLIC_PATHS if auth else None),
        signing_secrets=backend.signing_secrets,
        credentials=backend.credentials,
        auth=auth,
        on_due_job=on_due_job,
        due_within=due_within,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        schema.start()
        if auth is not None:
            auth.start()
        known.start()
        if on_ready is not None:
            on_ready()
        yield
        await known.stop()
        await schema.stop()
        if auth is not None:
            await auth.stop()

    routes: list[Route] = [
        *job_batch.ROUTES,
        *schedule_apply.ROUTES,
        *jobs.ROUTES,
        *schedules.ROUTES,
        *job_types.ROUTES,
        *probes.ROUTES,
        *docs.ROUTES,
        *operator.ROUTES,
        *signing_secrets.ROUTES,
        *credentials.ROUTES,
        *workflows.ROUTES,
        *batches.ROUTES,
    ]
    if auth is not None:
        routes = auth.protect([*routes, *keys.ROUTES])
    # Files only, public like /docs: what the console shows comes from the routes above, with the user's key.
    served: list[BaseRoute] = [*routes, *console_routes()]
    middleware = [
        Middleware(RequestMetrics),
        Middleware(RequestTraces),
        Middleware(RequestLimits, limits=limits, sharer=auth.sharer if auth is not None else None),
    ]
    if auth is None:
        middleware.append(Middleware(SameOriginOnly, hosts=allowed_hosts))
    app = Starlette(routes=served, exception_handlers=exception_handlers(), lifespan=lifespan, middleware=middleware)
    app.state.api = api
    # The router's redirect of `/jobs/` to `/jobs` is an absolute URL built from the Host header, which a shared
    # cache in front would keep and serve to everyone: a path with a trailing slash is a 404 instead.
    app.router.redirect_slashes = False
    return app
