"""`tracing`: what traces cost the embedded drain (issue 51). N due noop jobs drained by `jobsched dev` (the
`embedded` measurement), alternately with tracing off (no OTEL_* set) and on (every attempt's span exported over
OTLP/HTTP to `--otlp-endpoint`), `--repeat` times each; jobs/s and the dev process's own CPU per job.

`jobsched` is the runs with tracing on, `baseline` those with it off (medians), `ratio` on ÷ off: the target is
at least 0.85 (at most 15 % less throughput). Without `--otlp-endpoint` the spans go to a receiver this process
serves on loopback, which answers 200 and keeps nothing: jobsched's side of the cost alone. With a real collector
(a local Jaeger, as in docs/performance-log.md) its own CPU shows in the machine's figure, not the process's.
"""

from __future__ import annotations

import argparse
import statistics
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from loadtest.benchkit import Run, Scenario, envelope, print_run, ratio, target
from loadtest.scenarios.embedded import measure_embedded

TARGET_RATIO = 0.85


@contextmanager
def receiver(endpoint: str | None) -> Iterator[str]:
    """`endpoint`, or that of a receiver on loopback that reads each export and answers 200 (for the run)."""
    if endpoint:
        yield endpoint
        return

    class Drop(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Drop)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def median_run(label: str, runs: list[Run]) -> Run:
    """The run of median rate (its own figures, not a mix of several runs'), with every run's jobs/s beside it."""
    chosen = sorted(runs, key=lambda r: r.rate)[len(runs) // 2]
    median = Run(label, chosen.jobs, chosen.seconds, chosen.cpu_ms_per_job, dict(chosen.extra))
    median.extra["runs_jobs_per_s"] = [round(r.rate, 1) for r in runs]
    return median


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=20_000, help="due jobs to drain in each run (default 20000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each setting, alternated (default 3)")
    parser.add_argument("--otlp-endpoint", help="the OTLP/HTTP collector (default: a receiver on loopback)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    off: list[Run] = []
    on: list[Run] = []
    with receiver(args.otlp_endpoint) as endpoint:
        for _ in range(args.repeat):
            off.append(measure_embedded(args.jobs, {}, None))
            on.append(measure_embedded(args.jobs, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}, None))
    traced, untraced = median_run("tracing on", on), median_run("tracing off", off)
    for each in (traced, untraced):
        print_run(each)
        print(f"{'':<60} runs: {each.extra['runs_jobs_per_s']} jobs/s")
    value = ratio(True, traced.rate, untraced.rate)
    print(f"ratio (on / off): {value:.2f} (target >= {TARGET_RATIO})")
    spread = statistics.pstdev([r.rate for r in off]) if len(off) > 1 else 0.0
    return envelope(
        "tracing",
        traced.figures(),
        untraced.figures(),
        value,
        "sqlite",
        backlog=args.jobs,
        off_spread_jobs_per_s=round(spread, 1),
        target=target(f"on / off >= {TARGET_RATIO}", value, value >= TARGET_RATIO),
    )


SCENARIO = Scenario("tracing", "what traces cost the embedded drain: on / off, alternated (jobs/s)", add_arguments, run)
