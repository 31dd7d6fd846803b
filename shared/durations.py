"""Durations written as `500ms`, `30s`, `5m`, `1h30m`, `2d`: one parser for config and schedules."""

from __future__ import annotations

import re
from datetime import timedelta

from shared.jsonsafe import shorten

_NUMBER = r"\d+(?:\.\d+)?"
_PART = re.compile(f"({_NUMBER})(ms|s|m|h|d)")
# Each unit at most once, largest first: `1h1h` or `30s1m` is a typo, not a sum to guess at.
_DURATION = re.compile("".join(f"(?:(?P<{unit}>{_NUMBER}){unit})?" for unit in ("d", "h", "m", "s", "ms")))
_UNIT = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
}


def parse_duration(text: str, *, lenient: bool = False) -> timedelta:
    """Parse a duration; raise ValueError naming the accepted form. `lenient` reads what earlier versions
    accepted and stored (units repeated or in any order, summed): for stored schedules, never for new input."""
    compact = text.strip().replace(" ", "")
    parts = _DURATION.fullmatch(compact)
    legacy = lenient and parts is None and compact and not _PART.sub("", compact)
    if not compact or (parts is None and not legacy):
        example = "such as '500ms', '30s' or '1h30m', each unit once, largest first"
        raise ValueError(f"invalid duration {shorten(text)!r}: use numbers with units, {example}")
    found = _PART.findall(compact) if parts is None else [(n, u) for u, n in parts.groupdict().items() if n]
    try:
        return sum((float(n) * _UNIT[unit] for n, unit in found), timedelta())
    except OverflowError:
        raise ValueError(f"invalid duration {shorten(text)!r}: longer than {timedelta.max.days} days") from None
