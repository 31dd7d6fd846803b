"""The executor's counting semaphore (services/executor/tokens.py): as many takes as tokens, then a wait that a
give-back ends or the timeout does."""

from __future__ import annotations

import threading

from services.executor.tokens import Tokens


def test_tokens_are_taken_until_none_is_left_and_come_back_when_given_back() -> None:
    tokens = Tokens(2)
    assert tokens.acquire(blocking=False)
    assert tokens.acquire(timeout=0.01)
    assert not tokens.acquire(blocking=False)
    assert not tokens.acquire(timeout=0.01)
    tokens.release()
    assert tokens.acquire(blocking=False)


def test_a_waiting_take_gets_the_token_given_back_meanwhile() -> None:
    tokens = Tokens(0)
    taken: list[bool] = []
    waiter = threading.Thread(target=lambda: taken.append(tokens.acquire(timeout=30)))
    waiter.start()
    tokens.release()
    waiter.join(30)
    assert taken == [True]
