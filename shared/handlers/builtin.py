"""The built-in job types of the API contract: noop and log-message, served everywhere, and the demo types
flaky (fails at a given rate, to exercise retries and the DLQ) and slow (sleeps), served unless
DEMO_JOB_TYPES=false."""

from __future__ import annotations

import asyncio
import logging
import random

from jobsched.handlers import HandlerContext, HandlerError, JobTypes
from jobsched.payloads import Payload

log = logging.getLogger("jobsched.handlers")

SLOW_STEP_MS = 500  # how often `slow` reports its progress

BUILTIN = JobTypes()
DEMO = JobTypes()


@BUILTIN.handler("noop")
def noop(payload: Payload, ctx: HandlerContext) -> None:
    return None


@BUILTIN.handler("log-message")
def log_message(payload: Payload, ctx: HandlerContext) -> None:
    message = payload.get("message")
    if not isinstance(message, str) or not message:
        raise HandlerError("log-message needs payload.message, a non-empty string")
    log.info("log-message", extra={"action": "log_message", "jobId": ctx.job_id, "text": message})


@DEMO.handler("flaky")
def flaky(payload: Payload, ctx: HandlerContext) -> None:
    rate = payload.get("failRate", 0.5)
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 <= rate <= 1:
        raise HandlerError("flaky needs payload.failRate, a number from 0 to 1")
    if random.random() < rate:
        raise HandlerError(f"flaky failed on purpose (failRate {rate})")


@DEMO.handler("slow")
async def slow(payload: Payload, ctx: HandlerContext) -> dict[str, int]:
    sleep_ms = payload.get("sleepMs", 1000)
    if not isinstance(sleep_ms, int) or isinstance(sleep_ms, bool) or sleep_ms < 0:
        raise HandlerError("slow needs payload.sleepMs, a non-negative integer")
    for slept in range(0, sleep_ms, SLOW_STEP_MS):
        ctx.report_progress({"sleptMs": slept, "of": sleep_ms})  # shown with the job while it runs
        await asyncio.sleep(min(SLOW_STEP_MS, sleep_ms - slept) / 1000)
    return {"sleptMs": sleep_ms}  # its result, shown with the job


def builtin_types(*, demo: bool) -> JobTypes:
    """A new collection with the built-ins (and the demo types when `demo`), for a process to add its own to."""
    types = JobTypes(BUILTIN)
    if demo:
        types.include(DEMO)
    return types
