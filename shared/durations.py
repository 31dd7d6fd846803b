"""Durations written as `500ms`, `30s`, `5m`, `1h30m`, `2d`: one parser for config and schedules."""

from __future__ import annotations

import re
from datetime import timedelta

from shared.jsonsafe import shorten

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}


def parse_duration(text: str) -> timedelta:
    """Parse a duration; raise ValueError naming the accepted form."""
    compact = text.strip().replace(" ", "")
    if not compact or _PART.sub("", compact):
        example = "such as '500ms', '30s' or '1h30m'"
        raise ValueError(f"invalid duration {shorten(text)!r}: use a number with a unit, {example}")
    try:
        return sum((float(n) * _UNIT[unit] for n, unit in _PART.findall(compact)), timedelta())
    except OverflowError:
        raise ValueError(f"invalid duration {shorten(text)!r}: longer than {timedelta.max.days} days") from None
