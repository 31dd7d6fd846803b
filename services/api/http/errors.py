"""The API's one error path: every failure becomes `{"error": message}` with a fitting status.

Route code raises (ApiError, the store's errors, Starlette's HTTPException) and the handlers here answer.
Messages are written for the client: echoed input is shortened (jsonsafe.shorten) and no exception text of a
library reaches the body. Every 503 carries Retry-After.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match

from shared import jsonsafe
from shared.schedules.engine import ScheduleRefused
from shared.schedules.workflow_runs import ForeignWorkflow
from shared.store.base import (
    BatchNotFound,
    BatchSealed,
    JobNotFound,
    JobRefused,
    StoreUnavailable,
    TransitionRefused,
    WorkflowNotFound,
)

log = logging.getLogger("jobsched.api")
RETRY_AFTER_S = 1
FILE_METHODS = frozenset({"GET", "HEAD"})
CONSOLE = "console"  # the name of the console's mount (console/__init__.py)
CLOSE = {"Connection": "close"}  # the rest of the request is not read: the connection cannot carry another one


class SafeJSONResponse(JSONResponse):
    """A JSON response whatever the value holds (values stored by older versions included)."""

    def render(self, content: Any) -> bytes:
        return jsonsafe.dumps(content)


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    if status == 503:
        headers = {"Retry-After": str(RETRY_AFTER_S), **(headers or {})}
    return SafeJSONResponse({"error": message}, status_code=status, headers=headers)


def overloaded(what: str, headers: Mapping[str, str] | None = None) -> Response:
    return error(503, f"the API is overloaded ({what}); retry later", headers)


def exception_handlers() -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    return {
        ApiError: _api_error,
        HTTPException: _http_error,
        JobNotFound: _status_error(404),
        WorkflowNotFound: _status_error(404),
        BatchNotFound: _status_error(404),
        BatchSealed: _status_error(409),
        JobRefused: _status_error(400),
        TransitionRefused: _status_error(409),
        ScheduleRefused: _status_error(409),
        ForeignWorkflow: _status_error(409),
        StoreUnavailable: _store_unavailable,
        Exception: _unexpected,
    }


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error(exc.status, exc.message, exc.headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (404 no such route, 405): their detail is a fixed phrase, never client input."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return error(405, f"method {jsonsafe.shorten(request.method, 16)} not allowed", {"Allow": allowed(request)})
    return error(exc.status_code, str(exc.detail), exc.headers)


def allowed(request: Request) -> str:
    """Every method some route of this path takes (the router's 405 names only the first such route's)."""
    methods: set[str] = set()
    # Matched from the app's root: inside a mount (the console's files) the scope's root is the mount's.
    scope = {**request.scope, "root_path": request.scope.get("app_root_path", request.scope.get("root_path", ""))}
    for route in request.app.routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            # The console's mount serves files: reads only.
            console = getattr(route, "name", None) == CONSOLE
            methods |= FILE_METHODS if console else (getattr(route, "methods", None) or set())
    return ", ".join(sorted(methods))


def _status_error(status: int) -> Callable[[Request, Exception], Awaitable[Response]]:
    """A store error that maps to one status; its message is already written for the client."""

    async def handle(request: Request, exc: Exception) -> Response:
        return error(status, str(exc))

    return handle


async def _store_unavailable(request: Request, exc: Exception) -> Response:
    log.warning("store unavailable", extra={"action": "store_unavailable", "error": str(exc)})
    return error(503, "the job store is unavailable; retry later")


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error", extra={"action": "api_error", "path": request.url.path[:200]})
    return error(500, "internal error")
