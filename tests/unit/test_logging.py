"""Log lines for machines (JSON) and for people (text), with the same fields and no terminal colour codes."""

from __future__ import annotations

import json
import logging

from shared.logging import JsonFormatter, TextFormatter


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
