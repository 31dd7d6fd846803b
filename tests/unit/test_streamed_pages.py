"""A streamed listing and the store's read slots (services/api/routes/pages.py, services/api/http/store_slots.py):
the first page is read before the status line and an overload there is a 503; a later page, read once the
status line was sent, waits for its slot instead of cutting the body short."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from starlette.types import Message

from services.api.http.store_slots import Overloaded, StoreSlots
from services.api.routes.pages import FIRST_PAGE_JOBS, Page, ReadAfter, stream_runs
from shared.model import Job

JOBS = FIRST_PAGE_JOBS + 30  # two pages


def numbered_pages() -> tuple[list[int], ReadAfter]:
    """A store read of numbered jobs in pages (rendered as their numbers), and the size of each page read."""
    sizes: list[int] = []

    def read_after(size: int, edge: Job | None) -> Page:
        first = sum(sizes)
        sizes.append(size)
        return Page([str(n).encode() for n in range(first, min(first + size, JOBS))], None, None)

    return sizes, read_after


@asynccontextmanager
async def only_read_slot_held(slots: StoreSlots) -> AsyncIterator[None]:
    """Another request's read holds the only read slot until the block ends."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        release.wait()

    holder = asyncio.create_task(slots.read(hold))
    await asyncio.to_thread(holding.wait)
    try:
        yield
    finally:
        release.set()
        await holder


def test_a_later_page_waits_for_a_read_slot_held_by_another_request_and_the_body_is_whole() -> None:
    async def scenario() -> tuple[bytes, list[int]]:
        # No wait at all for a request's slot: any wait past it is one the overload deadline does not bound.
        slots = StoreSlots(write_slots=1, read_slots=1, wait_s=0.0)
        sizes, read_after = numbered_pages()
        response = await stream_runs(slots, read_after, JOBS)
        assert sizes == [FIRST_PAGE_JOBS]

        received = bytearray()
        ended = asyncio.Event()

        async def send(message: Message) -> None:
            received.extend(message.get("body", b""))
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                ended.set()

        async def receive() -> Message:
            await asyncio.Event().wait()  # the client never leaves
            raise AssertionError("unreachable")

        scope = {"type": "http", "asgi": {"spec_version": "2.4"}}
        async with only_read_slot_held(slots):
            streaming = asyncio.create_task(response(scope, receive, send))
            # The first page goes out; from its last job to the wait for the next page's slot nothing else runs,
            # so once the test runs again the stream is waiting for that slot (or, refused, has ended).
            last_of_first = str(FIRST_PAGE_JOBS - 1).encode()
            for _ in range(10_000):
                if streaming.done() or last_of_first in received:
                    break
                await asyncio.sleep(0)
            assert not streaming.done(), streaming.exception()
        await asyncio.wait_for(streaming, 60)
        assert ended.is_set()
        return bytes(received), sizes

    body, sizes = asyncio.run(scenario())
    assert json.loads(body) == list(range(JOBS))
    assert sizes == [FIRST_PAGE_JOBS, JOBS - FIRST_PAGE_JOBS]


def test_an_overload_at_the_first_page_is_refused_before_the_response_starts() -> None:
    async def scenario() -> None:
        slots = StoreSlots(write_slots=1, read_slots=1, wait_s=0.0)
        _, read_after = numbered_pages()
        async with only_read_slot_held(slots):
            with pytest.raises(Overloaded):
                await stream_runs(slots, read_after, JOBS)

    asyncio.run(scenario())
