"""What a template does when fire times come: pure decisions, no store, no clock.

`decide_overlap` takes the fire times to handle (in order) and the template's runs that are not final yet,
and says for each time whether its run is spawned (pending), buffered (waits for the others to end) or
skipped, and which earlier runs to cancel. The scheduler, a trigger and a backfill all decide through it,
so the three cannot disagree about a policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from shared.model import Status


class Overlap(StrEnum):
    """What happens when a fire time comes while an earlier run of the template is not final."""

    ALLOW_ALL = "allow_all"  # run it anyway
    SKIP = "skip"  # no run for that time
    BUFFER_ONE = "buffer_one"  # at most one run waits; further times are skipped
    BUFFER_ALL = "buffer_all"  # every time waits its turn, oldest first
    CANCEL_OTHER = "cancel_other"  # cancel the earlier runs; the new one starts once they have ended


class Catchup(StrEnum):
    """Which missed fire times run after downtime or a pause of the scheduler."""

    LATEST = "latest"  # the most recent one
    ALL = "all"  # every one, oldest first
    NONE = "none"  # none


class Action(StrEnum):
    """What became of one fire time; also the `action` label of scheduler_schedule_actions_total."""

    SPAWNED = "spawned"
    BUFFERED = "buffered"
    SKIPPED = "skipped"  # refused by the overlap policy
    MISSED = "missed"  # passed while no scheduler handled it, and the catch-up policy does not run it


@dataclass(frozen=True)
class ActiveRun:
    """A run of the template that is not final: all the overlap policies need to know about it."""

    id: str
    status: Status


@dataclass(frozen=True)
class Decision:
    planned: datetime
    action: Action

    @property
    def creates_run(self) -> bool:
        return self.action in (Action.SPAWNED, Action.BUFFERED)


@dataclass(frozen=True)
class OverlapPlan:
    decisions: list[Decision]
    cancel: list[str] = field(default_factory=list)  # ids of earlier runs to cancel (cancel_other)
    blocking: str | None = None  # the id of an earlier run that made a time skipped or buffered

    def runs(self) -> list[Decision]:
        return [d for d in self.decisions if d.creates_run]


def decide_overlap(overlap: Overlap, times: Sequence[datetime], active: Sequence[ActiveRun]) -> OverlapPlan:
    """Decide each of `times` (oldest first) as if they came one after another while `active` were the
    template's runs that are not final; a run this plan creates counts as active for the later times."""
    running = [r for r in active if r.status is not Status.BUFFERED]
    buffered = [r for r in active if r.status is Status.BUFFERED]
    blocking_id = next((r.id for r in [*running, *buffered]), None)
    occupied = bool(active)
    waiting = bool(buffered)
    cancel: list[str] = []
    decisions: list[Decision] = []
    for planned in times:
        if overlap is Overlap.ALLOW_ALL or not occupied:
            action = Action.SPAWNED
        elif overlap is Overlap.SKIP:
            action = Action.SKIPPED
        elif overlap is Overlap.BUFFER_ONE:
            action = Action.SKIPPED if waiting else Action.BUFFERED
        elif overlap is Overlap.BUFFER_ALL:
            action = Action.BUFFERED
        else:  # CANCEL_OTHER: this time supersedes every earlier run, including those of this plan
            cancel = [r.id for r in active]
            decisions = [Decision(d.planned, Action.SKIPPED) if d.creates_run else d for d in decisions]
            # The new run waits for the cancelled ones to end; superseded runs of this plan never existed.
            action = Action.BUFFERED if active else Action.SPAWNED
        decisions.append(Decision(planned, action))
        occupied = occupied or action is not Action.SKIPPED
        waiting = waiting or action is Action.BUFFERED
    return OverlapPlan(decisions, cancel, blocking_id)


def limit_runs(decisions: Sequence[Decision], remaining: int | None) -> tuple[list[Decision], bool]:
    """Keep the decisions up to the one that uses the last of `remaining` runs (None: no limit); True when
    the schedule has then used them all and ends."""
    if remaining is None:
        return list(decisions), False
    kept: list[Decision] = []
    left = remaining
    for decision in decisions:
        if left <= 0:
            return kept, True
        kept.append(decision)
        left -= decision.creates_run
    return kept, left <= 0
