"""What of a handler's ending the store keeps: its return value as a bounded JSON result, and its snooze within
the bound on how often a job may snooze (jobsched.outcomes)."""

from __future__ import annotations

import json
from typing import Any

from jobsched.outcomes import MAX_RESULT_BYTES, MAX_SNOOZES, jsonable_result
from services.executor.handler_calls import Ending
from shared.jsonsafe import JsonRejected, check_field_names, parse_request
from shared.model import Outcome


def kept_result(returned: Any) -> tuple[Any, str | None]:
    """The result to keep for a handler's return value (None: nothing returned, or nothing kept) and, when it is
    not kept, why (noted on the attempt's record: the attempt itself stands, its work is done)."""
    if returned is None:
        return None, None
    text, why = json_text(returned, "result")
    return kept_text(text, MAX_RESULT_BYTES, "result") if text is not None else (None, why)


def json_text(value: Any, what: str) -> tuple[str | None, str | None]:
    """`value` (a handler's: JSON data, a dataclass, a pydantic model) as JSON text, a snapshot of it (the cheap
    half of the checks), or None and why not ("<what> not kept: ...")."""
    try:
        return json.dumps(jsonable_result(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False), None
    except (TypeError, ValueError) as exc:
        return None, f"{what} not kept: not JSON ({exc})"


def kept_text(text: str, max_bytes: int, what: str) -> tuple[Any, str | None]:
    """JSON text (json_text's) as the data a store can keep, at most `max_bytes` of it, or None and why not."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        return None, f"{what} not kept: {size} bytes of JSON, more than {max_bytes}"
    try:
        kept = parse_request(text.encode("utf-8"))
        check_field_names(kept, what)
    except (JsonRejected, UnicodeEncodeError) as exc:
        return None, f"{what} not kept: {exc}"
    return kept, None


def bounded_snooze(ending: Ending, snoozes_so_far: int) -> Ending:
    """A snooze past MAX_SNOOZES fails its attempt instead (spending the budget): a job that snoozes for ever
    would neither run nor reach the DLQ, where someone would see it."""
    if ending.outcome is Outcome.SNOOZED and snoozes_so_far >= MAX_SNOOZES:
        return Ending(Outcome.FAILED, f"snoozed {snoozes_so_far} times, the most a job may; {ending.error}")
    return ending
