"""Log lines for machines (JSON) and for people (text), with the same fields and no terminal colour codes."""

from __future__ import annotations

import ast
import json
import logging

from shared.logging import JsonFormatter, TextFormatter
from tests.support import REPO_ROOT


def record(**extra: object) -> logging.LogRecord:
    made = logging.LogRecord("jobsched.api", logging.INFO, __file__, 1, "job %s", ("created",), None)
    made.__dict__.update(extra)
    return made


def test_json_keeps_the_fields_and_drops_uvicorns_colour_codes() -> None:
    line = JsonFormatter("dev").format(record(action="job_created", jobId="abc", color_message="\x1b[36mjob\x1b[0m"))
    entry = json.loads(line)
    assert (entry["msg"], entry["action"], entry["jobId"], entry["service"]) == (
        "job created",
        "job_created",
        "abc",
        "dev",
    )
    assert "color_message" not in entry


def test_text_is_one_readable_line_with_the_same_fields() -> None:
    line = TextFormatter().format(record(action="job_created", jobId="abc", color_message="\x1b[36mjob\x1b[0m"))
    assert "\n" not in line
    assert "INFO" in line
    assert line.endswith("job created  action=job_created jobId=abc")
    assert "\x1b" not in line


# Names a LogRecord keeps of its own: `extra` naming one raises KeyError in the log call itself (the batch
# endpoint answered 500 for `created`), but only where that level is enabled.
RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def extras() -> list[tuple[str, ast.expr]]:
    """Every `extra=` argument of a call in the shipped code, with where it is."""
    found: list[tuple[str, ast.expr]] = []
    for package in ("jobsched", "jobsched_client", "shared", "services", "seed", "loadtest"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call):
                    found += [
                        (f"{path.relative_to(REPO_ROOT)}:{node.lineno}", kw.value)
                        for kw in node.keywords
                        if kw.arg == "extra" and not _is_model_config(kw.value)
                    ]
    return found


def _is_model_config(value: ast.expr) -> bool:
    """pydantic's ConfigDict(extra="forbid") is not a log call."""
    return isinstance(value, ast.Constant) and isinstance(value.value, str)


def test_no_log_call_names_a_field_a_log_record_keeps() -> None:
    calls = extras()
    assert len(calls) > 50  # the walk found the log calls
    for where, value in calls:
        # A spread (`**counts`) or a variable could bring any name in: each field is named where it is logged.
        assert isinstance(value, ast.Dict), f"{where}: extra= is a dict literal, so its names can be checked"
        for key in value.keys:
            assert isinstance(key, ast.Constant), f"{where}: extra= names each field (no ** spread)"
            assert key.value not in RESERVED, f"{where}: {key.value!r} is a LogRecord attribute: rename the field"
