"""RFC 3339 times (section 5.6, `date-time`): the one format of every time on the wire.

Parsing takes exactly the RFC's grammar: `T` and `Z` in either case, any number of fraction digits (kept to
the microsecond), an offset `Z` or `±hh:mm`, and a leap second (`:60`, read as the first instant of the next
minute, as POSIX time does). Forms that other ISO 8601 parsers accept (`20260101T000000Z`, week dates, `+0100`,
a missing offset, a space for `T`) are refused. The instant must lie within the years 0001-9999 in UTC.
Formatting writes UTC with a `Z`, four-digit years and milliseconds only when present.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from shared.jsonsafe import shorten

EXAMPLE = "2026-09-29T18:00:00Z"
_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))", re.ASCII
)


def parse_time(text: str) -> datetime:
    """The UTC instant of an RFC 3339 date-time; ValueError naming the problem otherwise."""
    match = _DATE_TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"{shorten(text)!r} is not an RFC 3339 time with an offset, e.g. {EXAMPLE}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, sign, offset_h, offset_m = match.groups()[6:]
    offset_minutes = int(offset_h or 0) * 60 + int(offset_m or 0)
    if hour > 23 or minute > 59 or second > 60 or offset_minutes >= 24 * 60 or int(offset_m or 0) > 59:
        raise ValueError(f"{shorten(text)!r} is not an RFC 3339 time: hour, minute, second or offset out of range")
    leap = second == 60
    offset = timedelta(minutes=-offset_minutes if sign == "-" else offset_minutes)
    microsecond = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        local = datetime(year, month, day, hour, minute, min(second, 59), microsecond, tzinfo=timezone(offset))
    except ValueError:
        raise ValueError(f"{shorten(text)!r} is not a date of the calendar (years 0001-9999)") from None
    try:
        return local.astimezone(UTC) + timedelta(seconds=1 if leap else 0)
    except OverflowError:
        raise ValueError(f"{shorten(text)!r} lies outside the years 0001-9999 in UTC") from None


def format_time(moment: datetime) -> str:
    """RFC 3339 in UTC with a Z, milliseconds only when present."""
    m = moment.astimezone(UTC)
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    return f"{text}.{m.microsecond // 1000:03d}Z" if m.microsecond else f"{text}Z"
