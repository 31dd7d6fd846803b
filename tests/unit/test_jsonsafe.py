"""shared/jsonsafe.py and shared/rfc3339.py: the one way JSON and times come in and go out."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from shared import jsonsafe
from shared.rfc3339 import format_time, parse_time


@pytest.mark.parametrize(
    ("value", "rendered"),
    [
        ({"a": math.inf, "b": -math.inf, "c": math.nan}, {"a": None, "b": None, "c": None}),
        ({"s": "a\udfffb", "\ud800": 1}, {"s": "a\ufffdb", "\ufffd": 1}),
        ([1, "ok", {"x": [2.5]}], [1, "ok", {"x": [2.5]}]),
    ],
)
def test_rendering_never_fails_and_says_what_it_replaced(value: object, rendered: object) -> None:
    assert json.loads(jsonsafe.dumps(value)) == rendered


def test_rendering_cuts_nesting_deeper_than_its_limit() -> None:
    deep: object = 1
    for _ in range(5000):
        deep = [deep]
    out = json.loads(jsonsafe.dumps({"p": deep}))
    depth = 0
    while isinstance(out, dict | list):
        out = out["p"] if isinstance(out, dict) else out[0]
        depth += 1
    assert out is None
    assert depth == jsonsafe.RENDER_MAX_DEPTH


def test_storable_text_replaces_what_no_store_holds() -> None:
    assert jsonsafe.storable_text("a\x00b\udfffc") == "a\ufffdb\ufffdc"


def test_encoded_size_is_utf8_bytes_of_compact_json() -> None:
    assert jsonsafe.encoded_size({"t": "漢"}) == len('{"t":""}') + 3


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-09-29T18:00:00Z", datetime(2026, 9, 29, 18, tzinfo=UTC)),
        ("2026-09-29t20:00:00.5+02:00", datetime(2026, 9, 29, 18, 0, 0, 500_000, tzinfo=UTC)),
        ("2016-12-31T23:59:60z", datetime(2017, 1, 1, tzinfo=UTC)),
        ("0001-01-01T00:00:00-00:00", datetime(1, 1, 1, tzinfo=UTC)),
    ],
)
def test_rfc_3339_round_trips(text: str, instant: datetime) -> None:
    assert parse_time(text) == instant
    assert parse_time(format_time(instant)) == instant


def test_years_below_1000_are_written_with_four_digits() -> None:
    assert format_time(datetime(999, 1, 2, 3, 4, 5, 6000, tzinfo=UTC)) == "0999-01-02T03:04:05.006Z"


@pytest.mark.parametrize(
    "text",
    ["2026-09-29", "2026-09-29T18:00:00", "20260929T180000Z", "2026-09-29T18:00:00+0200", "9999-12-31T23:59:59-00:01"],
)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"RFC 3339|years"):
        parse_time(text)
