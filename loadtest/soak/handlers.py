"""The soak's job type, loaded by its executors as a plug-in (JOBSCHED_HANDLERS=loadtest.soak.handlers): its
payload decides how the job ends, so the soak knows the final status every job must reach. The built-in `flaky`
fails at random, which would leave a retried job's fate (completed or dead-lettered) to chance."""

from __future__ import annotations

from jobsched import Backoff, HandlerContext, HandlerError, JobTypes, Payload

SOAK_TYPE = "soak"
FAIL_ATTEMPTS = "failAttempts"  # payload field: how many first attempts fail (0: none)

jobs = JobTypes()


# Retries wait 0.5 s, then 1 s: a retried job ends within seconds, as the soak's settle time expects.
@jobs.handler(SOAK_TYPE, backoff=Backoff(base_s=0.25, cap_s=1.0))
def soak(payload: Payload, ctx: HandlerContext) -> None:
    failing = payload.get(FAIL_ATTEMPTS, 0)
    if not isinstance(failing, int) or isinstance(failing, bool) or failing < 0:
        raise HandlerError(f"soak needs payload.{FAIL_ATTEMPTS}, a non-negative integer")
    if ctx.attempt <= failing:
        raise HandlerError(f"soak: attempt {ctx.attempt} fails on purpose ({FAIL_ATTEMPTS} {failing})")
