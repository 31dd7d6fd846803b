"""CPU time spent during a benchmark run, per job, from Linux's /proc: on the whole machine (every process: the
store, the broker, the system under test, the benchmark itself) and in the system's own processes. A throughput
figure says how fast; these say what each job cost and where, which is what compares two designs on a machine
whose speed varies from day to day. Where /proc is missing the figures are left out."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float | None:
    """CPU seconds all cores have spent busy since boot (user, nice, system, interrupts; not idle, I/O wait or
    time stolen by the hypervisor)."""
    try:
        first = (PROC / "stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in first[1:8])
    return (user + nice + system + irq + softirq) / TICKS_PER_S


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) of a live process."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    after_name = stat.rsplit(")", 1)[1].split()
    return (int(after_name[11]) + int(after_name[12])) / TICKS_PER_S


@dataclass
class CpuWindow:
    """The machine's busy CPU from this window's creation until per_job() is asked."""

    started: float | None = field(default_factory=machine_busy_s)

    def per_job(self, jobs: int, own_s: float | None) -> dict[str, float]:
        """Milliseconds per job: `machine` (everything that ran meanwhile) and `own_processes` (`own_s`, the CPU
        of the processes of the system measured); empty when no job ran or /proc is missing."""
        ended = machine_busy_s()
        if jobs <= 0 or self.started is None or ended is None:
            return {}
        figures = {"machine": round((ended - self.started) * 1000 / jobs, 2)}
        if own_s is not None:
            figures["own_processes"] = round(own_s * 1000 / jobs, 2)
        return figures


@dataclass
class InProcessCpuWindow:
    """A CpuWindow whose `own_processes` figure is this process's CPU over the same window: for a peer that runs
    inside the benchmark's own process (APScheduler, Huey), where the benchmark's thread mostly waits."""

    machine: CpuWindow = field(default_factory=CpuWindow)
    own_started: float | None = field(default_factory=lambda: process_cpu_s(os.getpid()))

    def per_job(self, jobs: int) -> dict[str, float]:
        own_ended = process_cpu_s(os.getpid())
        own_s = own_ended - self.own_started if self.own_started is not None and own_ended is not None else None
        return self.machine.per_job(jobs, own_s)


def process_rss_mb(pid: int) -> float | None:
    """Resident memory of a live process in MiB (VmRSS)."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def process_tree_cpu_s(pid: int) -> float | None:
    """CPU seconds of a live process and of its live descendants (a worker and its pool processes)."""
    total = process_cpu_s(pid)
    if total is None:
        return None
    try:
        children = [int(c) for t in (PROC / str(pid) / "task").iterdir() for c in (t / "children").read_text().split()]
    except OSError:
        children = []
    return total + sum(process_tree_cpu_s(child) or 0.0 for child in children)
