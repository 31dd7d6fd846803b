"""Recurring schedules: the only module that parses `cron` and `interval` expressions.

Supported forms
- 5-field cron `minute hour day-of-month month day-of-week` (what the API contract requires);
- 6-field cron with seconds first `second minute hour day-of-month month day-of-week`;
- macros `@yearly @annually @monthly @weekly @daily @midnight @hourly`;
- intervals such as `30s`, `5m`, `1h30m`, `2d` (units ms, s, m, h, d), anchored at the template's anchor
  time (its creation), so the fire times are `anchor + k * interval` and do not drift.

Cron expressions are evaluated on the wall clock of the template's IANA `timezone` (default UTC).
Daylight-saving rules, chosen to match classic cron and to fire at most once per wall-clock time:
- a wall time that does not exist (the spring-forward gap, e.g. 02:30 in Europe/Berlin on the last Sunday
  of March) fires once, at the first instant after the gap (03:00 local);
- a wall time that occurs twice (the fall-back repeat) fires once, at its first occurrence.
Interval schedules are absolute durations and ignore the timezone.

Every function here is pure: times in, times out; all returned datetimes are timezone-aware UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from shared.durations import parse_duration
from shared.jsonsafe import shorten
from shared.rfc3339 import format_time

MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
MIN_INTERVAL = timedelta(seconds=1)
# Longest accepted texts: parsing cost grows with length, and real schedules are far shorter (the longest IANA
# zone name has 32 characters; a cron with every minute listed has about 170).
MAX_CRON_LENGTH = 256
MAX_INTERVAL_LENGTH = 32
MAX_TIMEZONE_LENGTH = 64
# Longer than any schedule needs, and short enough that fire times stay far inside datetime's range.
MAX_INTERVAL = timedelta(days=3660)
# A search that finds no fire time within this many candidates means the expression can never fire.
_MAX_CANDIDATES = 10_000


class ScheduleError(ValueError):
    """The schedule cannot be parsed or can never fire; the message says why."""


def parse_interval(text: str, *, lenient: bool = False) -> timedelta:
    """An interval; `lenient` for one stored by an earlier version (see parse_duration)."""
    _check_length("interval", text, MAX_INTERVAL_LENGTH)
    try:
        total = parse_duration(text, lenient=lenient)
    except ValueError as exc:
        raise ScheduleError(f"invalid interval {text!r}: use a duration such as '30s', '5m' or '1h30m'") from exc
    if total < MIN_INTERVAL:
        raise ScheduleError(f"invalid interval {text!r}: the shortest interval is 1s")
    if total > MAX_INTERVAL:
        raise ScheduleError(f"invalid interval {text!r}: the longest interval is {MAX_INTERVAL.days}d")
    return total


def parse_timezone(name: str) -> ZoneInfo:
    _check_length("timezone", name, MAX_TIMEZONE_LENGTH)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a name the file system refuses
        raise ScheduleError(f"unknown timezone {name!r}: use an IANA name such as 'Europe/Berlin'") from exc


def _validate_cron(expression: str) -> bool:
    """Check the expression's shape; return whether its first field is seconds."""
    _check_length("cron", expression, MAX_CRON_LENGTH)
    text = expression.strip()
    if text.startswith("@"):
        if text not in MACROS:
            raise ScheduleError(f"invalid cron {shorten(expression)!r}: supported macros are {', '.join(MACROS)}")
        return False
    fields = text.split()
    if len(fields) not in (5, 6):
        raise ScheduleError(
            f"invalid cron {shorten(expression)!r}: "
            "expected 5 fields (minute hour day month weekday) or 6 with seconds first"
        )
    seconds_first = len(fields) == 6
    if not croniter.is_valid(text, second_at_beginning=seconds_first):
        raise ScheduleError(f"invalid cron {shorten(expression)!r}")
    return seconds_first


def _check_length(what: str, text: str, limit: int) -> None:
    # Before anything echoes or parses the text: both cost time in proportion to its length.
    if len(text) > limit:
        raise ScheduleError(f"{what} has {len(text)} characters; the limit is {limit}")


@dataclass(frozen=True)
class Schedule:
    """A parsed recurring schedule. Build it with `Schedule.parse`."""

    cron: str | None
    interval: timedelta | None
    timezone: ZoneInfo
    anchor: datetime
    seconds_first: bool = False

    @classmethod
    def parse(
        cls,
        *,
        cron: str | None = None,
        interval: str | None = None,
        timezone: str | None = None,
        anchor: datetime,
        lenient: bool = False,
    ) -> Schedule:
        """Validate a template's schedule. Exactly one of `cron` and `interval` must be given. `lenient`: a
        stored schedule, read as the version that stored it did (see parse_duration)."""
        if (cron is None) == (interval is None):
            raise ScheduleError("give exactly one of 'cron' and 'interval'")
        zone = parse_timezone(timezone or "UTC")
        if interval is not None:
            return cls(
                cron=None, interval=parse_interval(interval, lenient=lenient), timezone=zone, anchor=_utc(anchor)
            )
        assert cron is not None
        seconds_first = _validate_cron(cron)
        schedule = cls(
            cron=cron.strip(), interval=None, timezone=zone, anchor=_utc(anchor), seconds_first=seconds_first
        )
        schedule.next_after(anchor)  # an expression that can never fire (e.g. 30 February) is invalid
        return schedule

    def next_after(self, after: datetime) -> datetime:
        """The first fire time strictly after `after`."""
        after = _utc(after)
        if self.interval is not None:
            if after < self.anchor:
                return self.anchor
            periods = (after - self.anchor) // self.interval + 1
            try:
                return self.anchor + periods * self.interval
            except OverflowError:
                last = format_time(after)
                raise ScheduleError(
                    f"interval {self.interval} has no fire time after {last} before the year 10000"
                ) from None
        return self._cron_search(after, forward=True)

    def latest_at_or_before(self, moment: datetime) -> datetime | None:
        """The most recent fire time at or before `moment` (None if there is none after the anchor)."""
        moment = _utc(moment)
        if self.interval is not None:
            if moment < self.anchor:
                return None
            return self.anchor + ((moment - self.anchor) // self.interval) * self.interval
        found = self._cron_search(moment + timedelta(microseconds=1), forward=False)
        return found if found >= self.anchor else None

    def _cron_search(self, start: datetime, *, forward: bool) -> datetime:
        """Walk wall-clock candidates from `start` until one resolves to an instant on the right side."""
        assert self.cron is not None
        wall_start = start.astimezone(self.timezone).replace(tzinfo=None)
        try:
            it = croniter(self.cron, wall_start, second_at_beginning=self.seconds_first)
            for _ in range(_MAX_CANDIDATES):
                wall = it.get_next(datetime) if forward else it.get_prev(datetime)
                instant = resolve_wall_time(wall, self.timezone)
                if (instant > start) if forward else (instant < start):
                    return instant
        except (CroniterError, OverflowError, ValueError):  # OverflowError, ValueError: past the year 9999
            pass
        side = "after" if forward else "before"
        raise ScheduleError(f"cron {shorten(self.cron)!r} never fires {side} {format_time(start)}")


def resolve_wall_time(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a naive wall-clock time in `zone`, with the DST rules of this module."""
    first = wall.replace(tzinfo=zone, fold=0)
    as_utc = first.astimezone(UTC)
    if as_utc.astimezone(zone).replace(tzinfo=None) == wall:
        return as_utc  # exists; for a repeated time fold=0 is its first occurrence
    # In the gap: fold=1 reads the wall time with the offset from before the jump, fold=0 with the one
    # after; the jump happened between those two instants. Find it to the second.
    low = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    high = as_utc
    low, high = min(low, high), max(low, high)
    after_offset = high.astimezone(zone).utcoffset()
    while high - low > timedelta(seconds=1):
        middle = low + (high - low) / 2
        if middle.astimezone(zone).utcoffset() == after_offset:
            high = middle
        else:
            low = middle
    return high.replace(microsecond=0)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("naive datetime: pass timezone-aware times")
    return moment.astimezone(UTC)
