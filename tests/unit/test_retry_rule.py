"""Which of a handler's exceptions are retried (jobs.handler's give_up_on and retry_on, jobsched/outcomes.py
RetryRule): the decision, its checks at registration, and the ending the executor makes of it for plain and async
handlers (services/executor/handler_calls.py, the one place an exception becomes an outcome)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from jobsched import Cancel, GiveUp, HandlerContext, JobTypes, RetryAfter, Snooze, testing
from jobsched.outcomes import RETRY_ALL, RetryRule
from services.executor.handler_calls import Cancellation, call_plain, failed, run_async_handler
from shared.model import Outcome

pytestmark = pytest.mark.unit


class InvalidCard(ValueError):
    pass


class ExpiredCard(InvalidCard):
    pass


CHARGE = RetryRule.of(give_up_on=(InvalidCard, KeyError), retry_on=(TimeoutError, ConnectionError, ValueError))


@pytest.mark.parametrize(
    ("rule", "exc", "why"),
    [
        # By default every exception is retried while attempts are left.
        (RETRY_ALL, ValueError("bad"), None),
        (RETRY_ALL, KeyboardInterrupt(), None),
        # give_up_on: the class itself, or any subclass of it (named, with the class it matched).
        (RetryRule.of(give_up_on=(ValueError,)), ValueError("bad"), "ValueError is in give_up_on"),
        (RetryRule.of(give_up_on=ValueError), InvalidCard(), "InvalidCard is in give_up_on as ValueError"),
        (RetryRule.of(give_up_on=(ValueError,)), TypeError(), None),
        # retry_on: only its classes (and their subclasses) are retried; anything else gives up.
        (RetryRule.of(retry_on=(ConnectionError,)), ConnectionResetError(), None),
        (RetryRule.of(retry_on=(ConnectionError,)), KeyError("to"), "KeyError is not in retry_on"),
        # Both: give_up_on wins where both match; a class that matches neither gives up.
        (CHARGE, ExpiredCard("expired"), "ExpiredCard is in give_up_on as InvalidCard"),
        (CHARGE, InvalidCard(), "InvalidCard is in give_up_on"),
        (CHARGE, ValueError("amount"), None),
        (CHARGE, TimeoutError(), None),
        (CHARGE, RuntimeError(), "RuntimeError is not in retry_on"),
        # The outcomes a handler raises are its own decision, whatever the rule says.
        (RetryRule.of(retry_on=(ConnectionError,)), GiveUp("no"), None),
        (RetryRule.of(retry_on=(ConnectionError,)), RetryAfter(5, "busy"), None),
        (RetryRule.of(give_up_on=(Exception,)), Snooze(5), None),
        (RetryRule.of(give_up_on=(Exception,)), Cancel("closed"), None),
    ],
)
def test_the_rule_says_which_exceptions_give_up(rule: RetryRule, exc: BaseException, why: str | None) -> None:
    assert rule.gives_up(exc) == why


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"give_up_on": ValueError("x")}, TypeError, r"not ValueError\('x'\) \(an exception, not its class\)"),
        ({"give_up_on": (ValueError, "KeyError")}, TypeError, "give_up_on takes exception classes, not 'KeyError'"),
        ({"give_up_on": "ValueError"}, TypeError, "a class or a tuple of them"),
        ({"retry_on": (int,)}, TypeError, "retry_on takes exception classes, not <class 'int'>"),
        ({"retry_on": 3}, TypeError, "retry_on takes exception classes"),
        ({"give_up_on": (GiveUp,)}, TypeError, "give_up_on cannot name GiveUp"),
        ({"retry_on": (RetryAfter,)}, TypeError, "retry_on cannot name RetryAfter"),
        ({"retry_on": ()}, ValueError, r"retry_on=\(\) would retry no exception"),
        (
            {"give_up_on": (OSError,), "retry_on": (FileNotFoundError,)},
            ValueError,
            "retry_on names FileNotFoundError, which give_up_on's OSError gives up on",
        ),
    ],
)
def test_a_bad_rule_is_refused_at_registration(arguments: dict[str, Any], error: type[Exception], message: str) -> None:
    jobs = JobTypes()
    with pytest.raises(error, match=message):
        jobs.handler("charge", **arguments)
    assert "charge" not in jobs


def test_the_registration_keeps_its_rule_and_a_list_is_as_good_as_a_tuple() -> None:
    jobs = JobTypes()

    @jobs.handler("charge", give_up_on=[InvalidCard], retry_on=(OSError,))
    def charge(payload: dict[str, Any], ctx: HandlerContext) -> None: ...

    @jobs.handler("plain")
    def plain(payload: dict[str, Any], ctx: HandlerContext) -> None: ...

    assert charge.retry_rule == RetryRule((InvalidCard,), (OSError,))
    # A narrower class in give_up_on than in retry_on is the point of having both: OSErrors but that one retried.
    jobs.handler("read", give_up_on=FileNotFoundError, retry_on=OSError)
    assert plain.retry_rule is RETRY_ALL


def test_an_exception_the_rule_gives_up_on_ends_the_attempt_for_good_saying_why() -> None:
    def raise_expired() -> None:
        raise ExpiredCard("card expired in 2024")

    try:
        raise_expired()
    except ExpiredCard as exc:
        ending = failed(exc, CHARGE)
        retried = failed(exc, RETRY_ALL)
    assert (ending.outcome, ending.final) == (Outcome.FAILED, True)
    assert ending.error == "gave up (ExpiredCard is in give_up_on as InvalidCard): ExpiredCard: card expired in 2024"
    assert ending.traceback is not None
    assert "raise_expired" in ending.traceback  # where the handler raised, as for any failure
    assert (retried.outcome, retried.final, retried.error) == (
        Outcome.FAILED,
        False,
        "ExpiredCard: card expired in 2024",
    )
    # One that the rule retries is a failure like any other; the handler's own outcomes keep theirs.
    no_answer = TimeoutError("no answer")
    assert failed(no_answer, CHARGE) == failed(no_answer)
    assert failed(Snooze(timedelta(seconds=5)), CHARGE).outcome is Outcome.SNOOZED
    assert failed(GiveUp("malformed"), CHARGE).error == "gave up: malformed"


def plain_handler(raised: BaseException) -> Callable[[dict[str, Any], HandlerContext], None]:
    def handler(payload: dict[str, Any], ctx: HandlerContext) -> None:
        raise raised

    return handler


def async_handler(raised: BaseException) -> Callable[[dict[str, Any], HandlerContext], Any]:
    async def handler(payload: dict[str, Any], ctx: HandlerContext) -> None:
        await asyncio.sleep(0)
        raise raised

    return handler


@pytest.mark.parametrize("is_async", [False, True])
def test_plain_and_async_handlers_are_judged_by_their_types_rule(is_async: bool) -> None:
    make = async_handler if is_async else plain_handler
    ctx = testing.context("charge")

    def ending(raised: BaseException) -> tuple[Outcome, bool, str | None]:
        handler = make(raised)
        if is_async:
            result = run_async_handler(handler, {}, ctx, 30, Cancellation(), CHARGE)
        else:
            result = call_plain(handler, {}, ctx, CHARGE)  # on the attempt's handler thread, as an executor calls it
        return result.outcome, result.final, result.error

    assert ending(InvalidCard("4242")) == (
        Outcome.FAILED,
        True,
        "gave up (InvalidCard is in give_up_on): InvalidCard: 4242",
    )
    assert ending(ConnectionResetError("reset")) == (Outcome.FAILED, False, "ConnectionResetError: reset")
    assert ending(LookupError("gone")) == (
        Outcome.FAILED,
        True,
        "gave up (LookupError is not in retry_on): LookupError: gone",
    )
    # A TimeoutError of the handler's own (an upstream that did not answer) is a failure the rule judges, not the
    # attempt's timeout: an async handler's is no longer mistaken for its deadline.
    assert ending(TimeoutError("upstream")) == (Outcome.FAILED, False, "TimeoutError: upstream")


def test_an_async_handler_that_overruns_its_deadline_still_times_out_whatever_the_rule() -> None:
    async def hangs(payload: dict[str, Any], ctx: HandlerContext) -> None:
        await asyncio.Event().wait()

    rule = RetryRule.of(give_up_on=TimeoutError)
    ending = run_async_handler(hangs, {}, testing.context("hangs"), 0.01, Cancellation(), rule)
    assert (ending.outcome, ending.final, ending.error) == (Outcome.TIMEOUT, False, "timed out after 0.01s")
