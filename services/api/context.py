"""What the routes use, built once by create_app and kept on the application: each route is a module-level
function that finds it from its request (`context(request)`), so that a route can be served, and tested, alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from services.api.http.store_slots import StoreSlots
from services.api.schema_readiness import SchemaReadiness
from services.api.store_ping import StorePing
from shared.http_jobs.credentials import Credentials
from shared.http_jobs.secrets import SigningSecrets
from shared.job_types.known import KnownTypes
from shared.model import Job, utc_now
from shared.schedules.engine import ScheduleEngine
from shared.store.base import ApiStore, StoreError
from shared.store.browse import JobBrowser

if TYPE_CHECKING:
    from services.api.auth.api_auth import ApiAuth


@dataclass(frozen=True)
class ApiContext:
    """`store` and `browser` are the tenant-guarded ones when `auth` is set (AUTH=required): a route sees
    only what the request's key may."""

    store: ApiStore
    browser: JobBrowser
    known: KnownTypes
    schema: SchemaReadiness
    slots: StoreSlots
    schedules: ScheduleEngine
    store_ping: StorePing
    openapi: Callable[[], dict[str, Any]]  # made at its first request (services/api/openapi)
    signing_secrets: SigningSecrets
    credentials: Credentials
    auth: ApiAuth | None = None
    # A scheduler nudge, called after a one-off job due within `due_within` was stored.
    on_due_job: Callable[[], None] | None = None
    due_within: timedelta = timedelta(0)

    def stored(self, jobs: Iterable[Job | StoreError]) -> None:
        """Tell the scheduler (on_due_job) when one of the jobs just stored is a one-off job due soon."""
        if self.on_due_job is None:
            return
        horizon = utc_now() + self.due_within
        if any(isinstance(j, Job) and not j.is_template and j.scheduledAt <= horizon for j in jobs):
            self.on_due_job()


def context(request: Request) -> ApiContext:
    found: ApiContext = request.app.state.api
    return found
