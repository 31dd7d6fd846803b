"""What a command prints: a table for people (columns padded, `-` for nothing, long text cut) or the API's own
JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

CELL_MAX = 60  # a table cell longer than this is cut (the JSON output keeps everything)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """`rows` under a header of `columns`, each column as wide as its widest cell."""
    cells = [[cell(value) for value in row] for row in rows]
    widths = [max([len(name), *(len(row[i]) for row in cells)]) for i, name in enumerate(columns)]
    lines = [list(columns), *cells]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)


def fields(pairs: Iterable[tuple[str, object]]) -> str:
    """One `name  value` line per pair, the names aligned (a single object shown to a person)."""
    shown = [(name, cell(value, limit=None)) for name, value in pairs]
    width = max((len(name) for name, _ in shown), default=0)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in shown)


def cell(value: object, limit: int | None = CELL_MAX) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, datetime):
        text = value.isoformat(timespec="seconds").replace("+00:00", "Z")
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, dict | list):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = " ".join(str(value).split())  # one line: an error's newlines would break the table
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)
