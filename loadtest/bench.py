"""Benchmarks (not tests): `python -m loadtest.bench SCENARIO [options] [--json FILE]`.

Each scenario measures jobsched as configured and a baseline in the same run, against the servers in
MONGO_URI / KAFKA_BROKERS / ETCD_ENDPOINTS (start them with `make servers-up`), prints both with the ratio
(> 1 means jobsched is better: jobsched ÷ baseline for rates, baseline ÷ jobsched for latencies) and, with
--json, writes {"scenario", "jobsched", "baseline", "ratio", "machine", "store", ...}. The reference setting
is the reference design's: one findOneAndUpdate per job, 20 per 500 ms tick, one handler at a time.
`python -m loadtest.bench SCENARIO --help` lists a scenario's options.

Scenarios
{scenarios}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from loadtest.benchkit import Scenario
from loadtest.procs import PROFILE_ENV
from loadtest.profiled import CLOCK_ENV, CLOCKS
from loadtest.scenarios import (
    api,
    backlog,
    bulk,
    chain,
    claim_reads,
    console,
    dispatch,
    drain,
    due_now,
    embedded,
    failover,
    fairness,
    fan,
    hot_second,
    keepalive,
    lateness,
    lateness_embedded,
    limits,
    peer,
    peers_celery,
    peers_embedded,
    progress,
    retention_soak,
    scale,
    soak,
    store_work,
    tracing,
)
from shared.cli import one_line_errors

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        dispatch.SCENARIO,
        drain.SCENARIO,
        embedded.SCENARIO,
        lateness.SCENARIO,
        api.SCENARIO,
        failover.SCENARIO,
        peer.SCENARIO,
        backlog.SCENARIO,
        console.SCENARIO,
        peers_embedded.SCENARIO,
        peers_celery.SCENARIO,
        lateness_embedded.SCENARIO,
        due_now.SCENARIO,
        keepalive.SCENARIO,
        bulk.SCENARIO,
        retention_soak.SCENARIO,
        scale.SCENARIO,
        fairness.SCENARIO,
        limits.SCENARIO,
        progress.SCENARIO,
        soak.SCENARIO,
        store_work.SCENARIO,
        hot_second.SCENARIO,
        chain.SCENARIO,
        fan.SCENARIO,
        claim_reads.SCENARIO,
        tracing.SCENARIO,
    )
}


def parser() -> argparse.ArgumentParser:
    listing = "\n".join(f"  {s.name:<16} {s.summary}" for s in SCENARIOS.values())
    main = argparse.ArgumentParser(
        prog="python -m loadtest.bench",
        description=(__doc__ or "").replace("{scenarios}", listing),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", help="also write the figures to this file")
    common.add_argument("--reference-seconds", type=float, default=60.0, help="time box of a baseline run (default 60)")
    common.add_argument("--profile", metavar="DIR", help="run every product process under cProfile, stats in DIR")
    common.add_argument(
        "--profile-clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="what --profile times: wall-clock (waits included) or each thread's CPU (default wall)",
    )
    commands = main.add_subparsers(dest="scenario", required=True, metavar="SCENARIO")
    for scenario in SCENARIOS.values():
        sub = commands.add_parser(
            scenario.name,
            parents=[common],
            help=scenario.summary,
            description=sys.modules[scenario.run.__module__].__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        scenario.add_arguments(sub)
    return main


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        os.environ[PROFILE_ENV] = os.path.abspath(args.profile)
        os.environ[CLOCK_ENV] = args.profile_clock
    load_before = [round(v, 2) for v in os.getloadavg()]
    result = SCENARIOS[args.scenario].run(args)
    result["machine"]["loadavg_at_start"] = load_before
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)
    return result


if __name__ == "__main__":
    # What the scenarios meet when a server of MONGO_URI / KAFKA_BROKERS / ETCD_ENDPOINTS is not there.
    from confluent_kafka import KafkaException
    from etcd3.exceptions import ConnectionFailedError

    one_line_errors("python -m loadtest.bench", KafkaException, ConnectionFailedError, ConnectionError)(main)()
