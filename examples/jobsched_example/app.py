"""The example application: starts its own HTTP endpoint, enqueues file and notification jobs through the
jobsched client, waits for them and checks what they did.

    python -m jobsched_example.app --base-url http://127.0.0.1:8080 --files 3 --notifications 3

The executors of the two types must write to the same EXAMPLE_OUTPUT_DIR as this script reads (one machine).
Exits 0 when every job completed and every effect is there, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from jobsched import Client, Job
from jobsched_example.handlers import OUTPUT_DIR_VARIABLE, Notify, WriteFile, notify, write_file


class Endpoint:
    """The application's own HTTP endpoint on a free local port: it records every notification it receives,
    once per idempotency key."""

    def __init__(self) -> None:
        self.received: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                with endpoint._lock:
                    endpoint.received.setdefault(self.headers.get("Idempotency-Key", ""), body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/notify"
        threading.Thread(target=self._server.serve_forever, daemon=True, name="endpoint").start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def run(base_url: str, files: int, notifications: int, timeout: float) -> bool:
    output = Path(os.environ.get(OUTPUT_DIR_VARIABLE, "example-output"))
    run_id = uuid.uuid4().hex[:8]
    endpoint = Endpoint()
    try:
        with Client(base_url, tenant_id="example-app") as client:
            jobs: list[Job] = []
            for i in range(files):
                text = f"report {i} of run {run_id}\n" * 3
                report = WriteFile(name=f"report-{run_id}-{i}.txt", text=text)
                jobs.append(client.enqueue(write_file, report, idempotency_key=f"file-{run_id}-{i}"))
            for i in range(notifications):
                message = Notify(url=endpoint.url, message=f"hello {i} from run {run_id}")
                jobs.append(client.enqueue(notify, message, idempotency_key=f"notify-{run_id}-{i}"))
            finished = [client.wait(job.id, timeout=timeout) for job in jobs]
    finally:
        endpoint.close()
    ok = True
    for job in finished:
        print(f"{job.job_type} {job.id}: {job.status}" + (f" ({job.last_error})" if job.last_error else ""))
        ok = ok and job.status == "completed"
    for i in range(files):
        path = output / f"report-{run_id}-{i}.txt"
        present = path.is_file() and path.read_text() == f"report {i} of run {run_id}\n" * 3
        print(f"file {path}: {'ok' if present else 'missing'}")
        ok = ok and present
    notified = {body.get("jobId") for body in endpoint.received.values()}
    expected = {job.id for job in finished if job.job_type == "example.notify"}
    print(f"notifications received: {len(notified & expected)} of {len(expected)}")
    return ok and expected <= notified


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jobsched_example.app")
    parser.add_argument("--base-url", default="http://127.0.0.1:8080")
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--notifications", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each job")
    args = parser.parse_args(argv)
    sys.exit(0 if run(args.base_url, args.files, args.notifications, args.timeout) else 1)


if __name__ == "__main__":
    main()
