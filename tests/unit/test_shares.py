"""Fair shares of the API's places (services/api/http/fair_shares.py): one sharer never holds more than its share, and
whatever one sharer holds, another gets a place while the total has room."""

from __future__ import annotations

import asyncio

from services.api.http.fair_shares import FairShares


def test_a_sharer_gets_no_more_than_its_share_while_others_still_get_places() -> None:
    shares = FairShares(total=10, per_sharer=4)
    assert [shares.try_take("greedy") for _ in range(6)] == [True] * 4 + [False] * 2
    assert shares.held("greedy") == 4
    assert all(shares.try_take("other") for _ in range(4))
    assert shares.try_take("third")
    assert shares.try_take("third")
    assert not shares.try_take("fourth"), "the total bounds everyone"
    shares.give_back("greedy")
    assert shares.try_take("fourth")
    assert shares.in_use == 10


def test_a_share_is_never_larger_than_the_total() -> None:
    shares = FairShares(total=2, per_sharer=5)
    assert shares.per_sharer == 2
    assert [shares.try_take("only") for _ in range(3)] == [True, True, False]


def test_a_waiting_sharer_gets_the_place_given_back_and_gives_up_at_its_deadline() -> None:
    async def scenario() -> tuple[bool, bool, int]:
        shares = FairShares(total=1, per_sharer=1)
        assert shares.try_take("a")
        waiting = asyncio.create_task(shares.take("b", timeout_s=30))
        await asyncio.sleep(0)
        assert not waiting.done()
        shares.give_back("a")
        got = await waiting
        gave_up = await shares.take("c", timeout_s=0.05)
        return got, gave_up, shares.held("b")

    got, gave_up, held = asyncio.run(scenario())
    assert got is True
    assert gave_up is False
    assert held == 1


def test_a_release_of_another_sharer_does_not_let_a_sharer_past_its_share() -> None:
    async def scenario() -> bool:
        shares = FairShares(total=4, per_sharer=1)
        assert shares.try_take("a")
        assert shares.try_take("b")
        waiting = asyncio.create_task(shares.take("a", timeout_s=0.2))
        shares.give_back("b")  # a place is free, but "a" holds its whole share
        return await waiting

    assert asyncio.run(scenario()) is False


def test_a_waiter_that_goes_first_gets_the_next_place_before_new_takers_and_other_waiters() -> None:
    async def scenario() -> list[str]:
        shares = FairShares(total=1, per_sharer=1)
        assert shares.try_take("a")
        order: list[str] = []

        async def waiter(sharer: str, first: bool) -> None:
            assert await shares.take(sharer, None if first else 30, first=first)
            order.append(sharer)

        waiting = asyncio.create_task(waiter("waiting", first=False))
        await asyncio.sleep(0)
        going_first = asyncio.create_task(waiter("first", first=True))  # came later, goes first
        await asyncio.sleep(0)
        assert not waiting.done()
        assert not going_first.done()
        shares.give_back("a")
        assert not shares.try_take("new"), "the place is kept for the waiter that goes first"
        await going_first
        assert not waiting.done()
        shares.give_back("first")
        await waiting
        return order

    assert asyncio.run(scenario()) == ["first", "waiting"]


def test_a_waiter_that_goes_first_keeps_nothing_once_it_stops_waiting_or_beyond_its_own_share() -> None:
    async def scenario() -> tuple[bool, bool]:
        shares = FairShares(total=2, per_sharer=1)
        assert shares.try_take("a")
        # "a" holds its whole share: its waiter waits for one of its own and keeps the free place from nobody.
        own = asyncio.create_task(shares.take("a", None, first=True))
        await asyncio.sleep(0)
        beside_own_share = shares.try_take("b")
        shares.give_back("b")
        assert shares.try_take("c")  # the total is now reached
        gone = asyncio.create_task(shares.take("d", None, first=True))
        await asyncio.sleep(0)
        gone.cancel()
        own.cancel()
        await asyncio.gather(gone, own, return_exceptions=True)
        shares.give_back("c")
        return beside_own_share, shares.try_take("e")

    beside_own_share, after_cancel = asyncio.run(scenario())
    assert beside_own_share is True
    assert after_cancel is True, "a cancelled waiter that went first keeps no place"
