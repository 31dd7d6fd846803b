"""Streaming a listing: the bare JSON array of up to 5,000 jobs, read and written page by page.

Each page is one short cursor query (shared.store.browse) after the previous page's edge, read and rendered off
the event loop; the array is handed to the server a job at a time, so memory holds about one page whatever the
limit. Pages adapt to the jobs: they grow while pages render small and shrink when jobs are large, between 1
and MAX_PAGE_JOBS jobs.

Each page is read in a store read slot (store_slots.py). The first page is read before the status line, within
API_STORE_WAIT: an overload is a 503 before any byte of the body. Once the status line is sent a 503 is no
longer possible, and refusing a later page would cut the body short: a broken answer where the client should
have had a whole one or a 503. So a later page waits for its slot without that deadline, ahead of new requests
(StoreSlots.read_continuing). It holds the slot only while the store reads it, never while the client reads, so
a slow reader keeps no slot from the others. (Reading the whole answer before the status line would keep the
503 possible, but would hold up to 5,000 jobs, over a gigabyte of large payloads, per listing; holding one slot
for the whole response would let slow readers take every slot.) A store failure (the store down, not busy)
after the first page still closes the connection mid-array: the client sees a truncated body, a failed request.

A listing `after` a cursor (the page just newer than it, listed newest first) is read from the cursor upwards,
so its pages come oldest first: they are rendered into a spool file (memory up to SPOOL_MEMORY_BYTES, the rest
on disk) and sent back in reverse. Every page is then read before the status line, within the deadline.

A template's runs stream the same way, each page read after the previous page's last run (stream_runs).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import IO

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.responses import Response, StreamingResponse

from services.api.http.errors import ApiError
from services.api.http.store_slots import StoreSlots
from shared import jsonsafe
from shared.jsonsafe import shorten
from shared.model import Job, Status
from shared.store.browse import CursorError, JobQuery, PageCursor
from shared.store.transitions import KIND_RUN, KIND_TEMPLATE

FIRST_PAGE_JOBS = 20
MAX_PAGE_JOBS = 200
PAGE_BYTES = 1024 * 1024  # what a page aims to render to
SPOOL_MEMORY_BYTES = 4 * PAGE_BYTES


@dataclass(frozen=True)
class Page:
    rendered: list[bytes]  # each job's JSON, newest first
    newest: Job | None
    oldest: Job | None


def page_of(jobs: list[Job]) -> Page:
    """Render a page read from the store (a worker thread's work, like the read itself)."""
    rendered = [jsonsafe.dumps(job.to_wire()) for job in jobs]
    return Page(rendered, jobs[0] if jobs else None, jobs[-1] if jobs else None)


# Store reads, run on a store thread in a read slot: a page of the query's jobs; a page of at most `size` jobs
# that continues after `edge` (the previous page's last job read; None: the first).
ReadPage = Callable[[JobQuery], Page]
ReadAfter = Callable[[int, Job | None], Page]


async def stream_jobs(slots: StoreSlots, read_page: ReadPage, query: JobQuery) -> Response:
    upwards = query.after is not None

    def read_after(size: int, edge: Job | None) -> Page:
        page = replace(query, limit=size)
        if edge is not None:
            cursor = PageCursor.of(edge)
            page = replace(page, after=cursor) if upwards else replace(page, before=cursor)
        return read_page(page)

    pages = _Pages(slots, read_after, query.limit, upwards=upwards)
    if upwards:
        return await _reversed(pages)
    return StreamingResponse(_array(await pages.next(), pages), media_type="application/json")


async def stream_runs(slots: StoreSlots, read_after: ReadAfter, limit: int) -> Response:
    """A template's runs in the store's order, each page read after the previous page's last run."""
    pages = _Pages(slots, read_after, limit, upwards=False)
    return StreamingResponse(_array(await pages.next(), pages), media_type="application/json")


class _Pages:
    """The listing's pages in the order they are read: down from the first (each page's oldest job is the next
    one's edge), or, `upwards`, up from a cursor (each page's newest job is the edge)."""

    def __init__(self, slots: StoreSlots, read_after: ReadAfter, limit: int, *, upwards: bool) -> None:
        self._slots = slots
        self._read_after = read_after
        self._upwards = upwards
        self._edge: Job | None = None
        self._remaining = limit
        self._size = FIRST_PAGE_JOBS

    async def next(self, *, started: bool = False) -> list[bytes] | None:
        """The next page's jobs rendered, or None after the last; `started`: the response's status line is sent,
        so the read may no longer be refused as an overload (it waits its turn: the module's docstring)."""
        if self._remaining <= 0:
            return None
        size = min(self._size, self._remaining)
        read = self._slots.read_continuing if started else self._slots.read
        page = await read(self._read_after, size, self._edge)
        if not page.rendered:
            return None
        count = len(page.rendered)
        self._remaining = self._remaining - count if count == size else 0  # a short page is the last one
        self._edge = page.newest if self._upwards else page.oldest
        self._size = max(1, min(MAX_PAGE_JOBS, size * PAGE_BYTES // max(sum(map(len, page.rendered)), 1)))
        return page.rendered


async def _array(first: list[bytes] | None, pages: _Pages) -> AsyncIterator[bytes]:
    yield b"["
    page, separator = first, b""
    del first  # the loop's `page` is the only reference: each page is freed once it is sent
    while page is not None:
        for rendered in page:
            yield separator
            yield rendered
            separator = b","
        page = None
        page = await pages.next(started=True)  # this generator runs after the status line was sent
    yield b"]"


async def _reversed(pages: _Pages) -> Response:
    spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 - closed by the stream
    extents: list[tuple[int, int]] = []  # (offset, length) of each page's rendering, in the order read
    try:
        while (page := await pages.next()) is not None:
            data = b",".join(page)
            offset = await run_in_threadpool(_append, spool, data)
            extents.append((offset, len(data)))
    except BaseException:
        spool.close()
        raise
    return StreamingResponse(_spooled_array(spool, extents), media_type="application/json")


def _append(spool: IO[bytes], data: bytes) -> int:
    offset = spool.seek(0, 2)
    spool.write(data)
    return offset


def _read(spool: IO[bytes], offset: int, length: int) -> bytes:
    spool.seek(offset)
    return spool.read(length)


async def _spooled_array(spool: IO[bytes], extents: list[tuple[int, int]]) -> AsyncIterator[bytes]:
    try:
        yield b"["
        for n, (offset, length) in enumerate(reversed(extents)):
            yield (b"," if n else b"") + await run_in_threadpool(_read, spool, offset, length)
        yield b"]"
    finally:
        spool.close()


KINDS = (KIND_TEMPLATE, KIND_RUN)


def page_query(params: QueryParams, status: Status | None, limit: int) -> JobQuery:
    """GET /jobs's query with its optional parts: `jobType`, `templateId` (a template's runs), `kind`
    (`template` or `run`), and a cursor `before` (the next, older page) or `after` (the previous, newer page),
    each `<createdAt>_<id>` of the job at the page's edge."""
    before, after = params.get("before"), params.get("after")
    if before is not None and after is not None:
        raise ApiError(400, "give before or after, not both")
    try:
        return JobQuery(
            status=status,
            jobType=params.get("jobType") or None,
            templateId=params.get("templateId") or None,
            templates=_kind(params.get("kind")),
            limit=limit,
            before=PageCursor.parse(before) if before is not None else None,
            after=PageCursor.parse(after) if after is not None else None,
        )
    except CursorError as exc:
        raise ApiError(400, str(exc)) from None


def _kind(raw: str | None) -> bool | None:
    if raw is None or raw == "":
        return None
    if raw not in KINDS:
        raise ApiError(400, f"unknown kind {shorten(raw)!r}; one of {', '.join(KINDS)}")
    return raw == KIND_TEMPLATE
