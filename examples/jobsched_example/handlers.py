"""Two job types of this application, in the collection `jobs`. jobsched loads it (JOBSCHED_HANDLERS=
jobsched_example.handlers:jobs, `--handlers`, or the `jobsched.handlers` entry point this package declares) in
its executors; the API and the scheduler never do. Payloads are dataclasses: the application enqueues them
typed (`client.enqueue(write_file, WriteFile(...))`), and the handlers receive them built from the stored JSON.

- `example.write-file` (a plain function): writes the text to a file named `name` under EXAMPLE_OUTPUT_DIR.
- `example.notify` (async): POSTs the message to `url`, a local endpoint the application runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import httpx

import jobsched
from jobsched import Backoff, HandlerContext, HandlerError

OUTPUT_DIR_VARIABLE = "EXAMPLE_OUTPUT_DIR"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

jobs = jobsched.JobTypes()


@dataclass(frozen=True)
class WriteFile:
    name: str  # a plain file name
    text: str
    # Optional slow writing, a line at a time, to show cancellation: the handler stops between lines.
    lineDelayMs: int = 0


@dataclass(frozen=True)
class Notify:
    url: str
    message: str


@jobs.handler("example.write-file", timeout=30, max_attempts=3)
def write_file(payload: WriteFile, ctx: HandlerContext) -> None:
    name, text = payload.name, payload.text
    if not isinstance(name, str) or not _SAFE_NAME.match(name) or not isinstance(text, str):
        raise HandlerError("example.write-file needs payload.name (a plain file name) and payload.text")
    delay_s = float(payload.lineDelayMs) / 1000
    target = Path(os.environ.get(OUTPUT_DIR_VARIABLE, "example-output")) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the target and renamed into place: a retry (at-least-once delivery) replaces the file
    # whole instead of appending to a half-written one.
    partial = target.with_name(f".{name}.{ctx.job_id}.{ctx.attempt}")
    with partial.open("w") as out:
        for line in text.splitlines(keepends=True):
            if ctx.cancelled.wait(delay_s) if delay_s else ctx.cancelled.is_set():
                out.close()
                partial.unlink()
                raise HandlerError("cancelled before the file was complete")
            out.write(line)
    partial.replace(target)
    ctx.logger.info("file written", extra={"action": "example_file_written", "path": str(target)})


@jobs.handler("example.notify", timeout=10, max_attempts=5, backoff=Backoff(base_s=0.5, cap_s=5, jitter=True))
async def notify(payload: Notify, ctx: HandlerContext) -> None:
    url, message = payload.url, payload.message
    if not isinstance(url, str) or not isinstance(message, str):
        raise HandlerError("example.notify needs payload.url and payload.message")
    async with httpx.AsyncClient(timeout=5) as http:
        # The job id as the receiver's idempotency key: a retried notification is recognised as the same one.
        response = await http.post(
            url,
            json={"message": message, "jobId": ctx.job_id, "attempt": ctx.attempt},
            headers={"Idempotency-Key": ctx.job_id},
        )
    if response.status_code >= 400:
        raise HandlerError(f"{url} answered {response.status_code}")
    ctx.logger.info("notified", extra={"action": "example_notified", "url": url})
