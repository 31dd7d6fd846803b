"""`python -m seed --count 500 [--run-id ID]`: a realistic mix of jobs inserted straight into the store.

Immediate and future one-off jobs, a fraction of flaky ones (so retries and the DLQ fill), slow ones, and a
few recurring templates, across several tenants. Keys are `seed-<run id>-<n>`, so running it twice with the
same --run-id inserts nothing new. Uses MONGO_URI / MONGO_DB (when unset, those of a running local stack:
`make up`), or --sqlite PATH for the embedded store.
"""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from typing import Any

from shared.backends import tool_backend
from shared.cli import OneLineParser, fail, one_line_errors
from shared.config import Settings
from shared.job_requests import JobRequest
from shared.local_stack import tool_environment
from shared.model import format_time, utc_now
from shared.store.base import DuplicateJob, JobStore, StoreUnavailable

TENANTS = ("acme", "globex", "initech", "umbrella", "hooli")
TEMPLATES: tuple[dict[str, Any], ...] = (
    {"cron": "*/5 * * * *", "jobType": "noop"},
    {
        "cron": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "jobType": "log-message",
        "payload": {"message": "nightly report"},
    },
    {"interval": "1m", "jobType": "flaky", "payload": {"failRate": 0.2}},
)


def job_request(rng: random.Random, run_id: str, n: int) -> dict[str, Any]:
    """The n-th job of a run: 60% now, 40% within the next 10 minutes; a spread of types and priorities."""
    now = utc_now()
    due = now if rng.random() < 0.6 else now + timedelta(seconds=rng.randint(5, 600))
    roll = rng.random()
    payload: dict[str, Any]
    if roll < 0.4:
        job_type, payload = "noop", {}
    elif roll < 0.65:
        job_type, payload = "log-message", {"message": f"seeded message {n}"}
    elif roll < 0.85:
        job_type, payload = "flaky", {"failRate": rng.choice([0.2, 0.5, 1.0])}
    else:
        job_type, payload = "slow", {"sleepMs": rng.randint(200, 3000)}
    return {
        "idempotencyKey": f"seed-{run_id}-{n}",
        "tenantId": rng.choice(TENANTS),
        "jobType": job_type,
        "payload": payload,
        "priority": rng.choice([0, 0, 0, 1, 5, 10]),
        "scheduledAt": format_time(due),
        "maxAttempts": rng.choice([1, 3, 3, 5]),
    }


def seed(store: JobStore, count: int, run_id: str) -> tuple[int, int]:
    """Insert the run's jobs and templates; return (inserted, already there)."""
    rng = random.Random(run_id)
    bodies = [job_request(rng, run_id, n) for n in range(count)]
    bodies += [
        {"idempotencyKey": f"seed-{run_id}-template-{i}", "tenantId": TENANTS[i % len(TENANTS)], **t}
        for i, t in enumerate(TEMPLATES)
    ]
    inserted = existing = 0
    for body in bodies:
        try:
            store.create(JobRequest.model_validate(body).to_new_job(utc_now()))
            inserted += 1
        except DuplicateJob:
            existing += 1
    return inserted, existing


@one_line_errors("python -m seed")
def main() -> None:
    parser = OneLineParser(prog="python -m seed", description=__doc__)
    parser.add_argument("--count", type=int, default=500, help="one-off jobs to insert (default 500)")
    parser.add_argument("--run-id", default=None, help="same id → same keys → nothing inserted twice")
    parser.add_argument("--sqlite", metavar="PATH", help="seed the embedded store's file instead of MongoDB")
    parser.add_argument("--store", metavar="URL", help="the store's URL (sqlite:///path, mongodb://...)")
    args = parser.parse_args()
    if args.count < 0:
        parser.error(f"--count must be 0 or more, not {args.count}")
    run_id = args.run_id or uuid.uuid4().hex[:8]
    settings = Settings.from_env(tool_environment("python -m seed"))
    backend = tool_backend(args.store, args.sqlite, settings)
    store = backend.jobs
    try:
        store.ping()
    except StoreUnavailable:
        fail("python -m seed", f"cannot reach the store at {backend.url} (set MONGO_URI, or start a stack)")
    store.ensure_schema()
    inserted, existing = seed(store, args.count, run_id)
    store.close()
    print(
        f"seed run {run_id}: inserted {inserted}, already present {existing} "
        f"({args.count} one-off jobs + {len(TEMPLATES)} templates)"
    )


if __name__ == "__main__":
    main()
