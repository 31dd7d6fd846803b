"""`python -m loadtest.profiled OUT MODULE [ARGS...]`: run `python -m MODULE ARGS` under cProfile with every
Python thread profiled (cProfile alone sees only the main thread, and the executor runs its attempts on a
pool), and write the merged stats to OUT when the module returns (e.g. after SIGTERM). Wall-clock times, so a
call waiting on the database shows its wait. Read OUT with `python -m pstats OUT` or pstats.Stats.

`python -m loadtest.bench SCENARIO --profile DIR` starts every product process this way.
"""

from __future__ import annotations

import cProfile
import pstats
import runpy
import sys
import threading

_finished: list[cProfile.Profile] = []
_lock = threading.Lock()
_thread_run = threading.Thread.run


def _profiled_run(self: threading.Thread) -> None:
    profile = cProfile.Profile()
    profile.enable()
    try:
        _thread_run(self)
    finally:
        profile.disable()
        with _lock:
            _finished.append(profile)  # threads still running at exit (daemons) are left out


def main() -> None:
    out, module, *args = sys.argv[1:]
    threading.Thread.run = _profiled_run  # type: ignore[method-assign]
    sys.argv = [module, *args]
    profile = cProfile.Profile()
    try:
        profile.runcall(runpy.run_module, module, run_name="__main__", alter_sys=True)
    finally:
        stats = pstats.Stats(profile)
        with _lock:
            for finished in _finished:
                stats.add(finished)
        stats.dump_stats(out)


if __name__ == "__main__":
    main()
