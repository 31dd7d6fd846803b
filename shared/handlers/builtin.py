"""The built-in handlers: noop, log-message, flaky and slow."""

from __future__ import annotations

import asyncio
import logging
import random

from shared.handlers.registry import HandlerContext, HandlerError, HandlerRegistry, Payload

log = logging.getLogger("jobsched.handlers")


def register_builtins(registry: HandlerRegistry) -> None:
    @registry.register("noop")
    def noop(payload: Payload, ctx: HandlerContext) -> None:
        return None

    @registry.register("log-message")
    def log_message(payload: Payload, ctx: HandlerContext) -> None:
        message = payload.get("message")
        if not isinstance(message, str) or not message:
            raise HandlerError("log-message needs payload.message, a non-empty string")
        log.info("log-message", extra={"action": "log_message", "jobId": ctx.job_id, "text": message})

    @registry.register("flaky")
    def flaky(payload: Payload, ctx: HandlerContext) -> None:
        rate = payload.get("failRate", 0.5)
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 <= rate <= 1:
            raise HandlerError("flaky needs payload.failRate, a number from 0 to 1")
        if random.random() < rate:
            raise HandlerError(f"flaky failed on purpose (failRate {rate})")

    @registry.register("slow")
    async def slow(payload: Payload, ctx: HandlerContext) -> None:
        sleep_ms = payload.get("sleepMs", 1000)
        if not isinstance(sleep_ms, int) or isinstance(sleep_ms, bool) or sleep_ms < 0:
            raise HandlerError("slow needs payload.sleepMs, a non-negative integer")
        await asyncio.sleep(sleep_ms / 1000)
