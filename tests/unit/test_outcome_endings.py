"""What the executor makes of a handler's ending: the outcome a handler asks for, its snooze bounded, its return
value kept as a result only when it is small JSON a store can hold."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched import Cancel, GiveUp, Snooze
from jobsched.outcomes import MAX_RESULT_BYTES, MAX_SNOOZES
from services.executor.attempt_results import bounded_snooze, kept_result
from services.executor.handler_calls import Ending, failed
from shared.model import Outcome

pytestmark = pytest.mark.unit


def test_the_outcome_exceptions_become_their_endings() -> None:
    assert failed(Snooze(timedelta(minutes=2), "busy")) == Ending(
        Outcome.SNOOZED, "snoozed for 120s: busy", snooze=timedelta(minutes=2)
    )
    assert failed(Cancel("closed")) == Ending(Outcome.CANCELLED, "cancelled by the handler: closed")
    gave_up = failed(GiveUp("malformed"))
    assert (gave_up.outcome, gave_up.error, gave_up.final) == (Outcome.FAILED, "gave up: malformed", True)
    plain = failed(ValueError("boom"))
    assert (plain.outcome, plain.error, plain.final) == (Outcome.FAILED, "ValueError: boom", False)


@pytest.mark.parametrize("after", [0, -1, timedelta(days=8), True, "10"])
def test_a_snooze_out_of_bounds_is_refused_when_raised(after: object) -> None:
    with pytest.raises(ValueError, match="snooze"):
        Snooze(after)  # type: ignore[arg-type]


def test_a_job_that_snoozed_the_most_it_may_fails_its_attempt_instead() -> None:
    ending = Ending(Outcome.SNOOZED, "snoozed for 1s", snooze=timedelta(seconds=1))
    assert bounded_snooze(ending, MAX_SNOOZES - 1) is ending
    bounded = bounded_snooze(ending, MAX_SNOOZES)
    assert bounded.outcome is Outcome.FAILED
    assert bounded.error is not None
    assert f"snoozed {MAX_SNOOZES} times" in bounded.error


@pytest.mark.parametrize(
    ("returned", "kept", "why"),
    [
        (None, None, None),
        ({"a": [1, 2.5, None, True]}, {"a": [1, 2.5, None, True]}, None),
        ("done", "done", None),
        ("x" * (MAX_RESULT_BYTES + 1), None, "more than"),
        (object(), None, "not JSON"),
        (float("nan"), None, "not JSON"),
        (2**70, None, "64-bit"),
        ({"$set": 1}, None, "starts with '$'"),
        ("a\x00b", None, "NUL"),
    ],
)
def test_a_result_is_kept_only_when_a_store_can_hold_it(returned: object, kept: object, why: str | None) -> None:
    value, reason = kept_result(returned)
    assert value == kept
    if why is None:
        assert reason is None
    else:
        assert reason is not None
        assert why in reason
