"""`python -m loadtest.profiled OUT MODULE [ARGS...]`: run `python -m MODULE ARGS` under cProfile with every
Python thread profiled (cProfile alone sees only the main thread, and the executor runs its attempts on a
pool), and write the merged stats to OUT when the module returns (e.g. after SIGTERM). Read OUT with
`python -m pstats OUT` or pstats.Stats.

The clock is JOBSCHED_BENCH_PROFILE_CLOCK: `wall` (the default), so a call waiting on the database shows its
wait, or `cpu` (each thread's own CPU time), so that waits on locks, queues and fsync vanish and the times
are the process's CPU per function. Threads still running at exit (the handler pool, the recorder: daemons)
are included as far as they got.

`python -m loadtest.bench SCENARIO --profile DIR [--profile-clock cpu]` starts every product process this way.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import runpy
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

CLOCK_ENV = "JOBSCHED_BENCH_PROFILE_CLOCK"
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}

_profiles: list[cProfile.Profile] = []
_lock = threading.Lock()
_thread_run = threading.Thread.run


def _new_profile() -> cProfile.Profile:
    profile = cProfile.Profile(CLOCKS[os.environ.get(CLOCK_ENV, "wall")])
    with _lock:
        _profiles.append(profile)
    return profile


def _profiled_run(self: threading.Thread) -> None:
    profile = _new_profile()
    profile.enable()
    try:
        _thread_run(self)
    finally:
        profile.disable()


class _Snapshot:
    """A profile's stats as they are now, read without disabling it: disable() acts on the calling thread, and a
    daemon thread's profile is still enabled on its own thread at exit. Reading its entries holds the GIL, which
    the profiled thread needs to add any."""

    def __init__(self, profile: cProfile.Profile) -> None:
        profile.snapshot_stats()
        self.stats: dict[Any, Any] = profile.stats

    def create_stats(self) -> None:  # what pstats.Stats calls on a profile; the stats are taken already
        pass


def main() -> None:
    out, module, *args = sys.argv[1:]
    threading.Thread.run = _profiled_run  # type: ignore[method-assign]
    sys.argv = [module, *args]
    profile = _new_profile()
    try:
        profile.runcall(runpy.run_module, module, run_name="__main__", alter_sys=True)
    finally:
        with _lock:
            profiles = list(_profiles)
        snapshots = [_Snapshot(p) for p in profiles]
        # A thread still in its first call (blocked since it started) has no stats yet, which pstats refuses.
        stats = pstats.Stats(*(s for s in snapshots if s.stats))  # type: ignore[arg-type]
        stats.dump_stats(out)


if __name__ == "__main__":
    main()
