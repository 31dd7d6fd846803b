"""Work per job from the commands loadtest/store_work/recorded.py wrote down, merged from every process in the
order the server answered them.

A phase is a set of jobs (the scenario knows their ids) and the time it ran. A command that touched any of a
phase's jobs is that phase's (one command, however many jobs: a claim of 100 jobs is one command, a hundredth
per job); one that touched none is background (ticks that claimed nothing, heartbeats, announcements, sweeps
that found nothing) and is counted per second of the phase it ran in. A written document is its job's, and so
are the index entries it made (indexes.py); a document read back unchanged was not written by that command.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bson import json_util

from loadtest.store_work.indexes import Doc, Index, entries_written

JOBS = "jobs"


@dataclass
class Phase:
    name: str
    jobs: set[str]
    started: float
    ended: float
    counted: int  # the jobs its figures are per (a template's runs, not the template)


@dataclass
class Work:
    """A phase's totals; `per_job` divides them by its jobs."""

    jobs: int
    seconds: float
    commands: Counter[tuple[str, str]] = field(default_factory=Counter)  # (role, read|write)
    written: Counter[str] = field(default_factory=Counter)  # documents, by collection
    deleted: Counter[str] = field(default_factory=Counter)
    entries_mongodb: Counter[str] = field(default_factory=Counter)  # index entries, by collection
    entries_documentdb: Counter[str] = field(default_factory=Counter)
    background: Counter[tuple[str, str]] = field(default_factory=Counter)  # (role, command)

    def per_job(self) -> dict[str, Any]:
        n = max(self.jobs, 1)

        def by_role(kind: str) -> dict[str, float]:
            roles = sorted({role for role, k in self.commands if k == kind})
            return {role: round(self.commands[role, kind] / n, 3) for role in roles}

        return {
            "jobs": self.jobs,
            "write_commands": round(sum(v for (_, k), v in self.commands.items() if k == "write") / n, 3),
            "read_commands": round(sum(v for (_, k), v in self.commands.items() if k == "read") / n, 3),
            "write_commands_by_role": by_role("write"),
            "read_commands_by_role": by_role("read"),
            "documents_written": round(sum(self.written.values()) / n, 3),
            "documents_written_by_collection": {c: round(v / n, 3) for c, v in sorted(self.written.items())},
            "documents_deleted": round(sum(self.deleted.values()) / n, 3),
            "index_entries_mongodb": round(sum(self.entries_mongodb.values()) / n, 3),
            "index_entries_documentdb": round(sum(self.entries_documentdb.values()) / n, 3),
            "index_entries_documentdb_by_collection": {
                c: round(v / n, 3) for c, v in sorted(self.entries_documentdb.items())
            },
            "background_commands_per_s": round(sum(self.background.values()) / max(self.seconds, 1e-9), 2),
        }


def read_records(folder: Path) -> list[Doc]:
    """Every process's lines, in the order the commands were answered."""
    records = [
        json_util.loads(line) for path in sorted(folder.glob("*.jsonl")) for line in path.read_text().splitlines()
    ]
    return sorted(records, key=lambda r: r["ts"])


def job_of(collection: str, doc: Doc) -> str | None:
    job = doc.get("_id") if collection == JOBS else doc.get("jobId")
    return None if job is None else str(job)


def account(records: Iterable[Doc], indexes: dict[str, list[Index]], phases: list[Phase]) -> dict[str, Work]:
    work = {p.name: Work(p.counted, p.ended - p.started) for p in phases}
    owner = {job: p.name for p in phases for job in p.jobs}
    images: dict[tuple[str, str], Doc] = {}  # (collection, _id): the document as last written
    for record in records:
        coll, touched = record["coll"], set(record.get("ids", []))
        kind = "write" if record["cmd"] in ("insert", "update", "delete", "findAndModify") else "read"
        phases_touched = {owner[j] for j in touched if j in owner}
        for name in phases_touched:
            work[name].commands[record["role"], kind] += 1
        if not phases_touched:
            for p in phases:
                if p.started <= record["ts"] <= p.ended:
                    work[p.name].background[record["role"], record["cmd"]] += 1
        if record["cmd"] == "delete":
            forget(images, coll, touched)
            for name in phases_touched:
                work[name].deleted[coll] += record.get("n", 0) / len(phases_touched)
            continue
        for image in record.get("images", []):
            key = (coll, str(image["_id"]))
            before = images.get(key)
            if before == image:
                continue  # read back unchanged: another document of the command was the one written
            images[key] = image
            job = job_of(coll, image)
            if job not in owner:
                continue
            mongodb, documentdb = entries_written(indexes.get(coll, []), before, image)
            phase = work[owner[job]]
            phase.written[coll] += 1
            phase.entries_mongodb[coll] += mongodb
            phase.entries_documentdb[coll] += documentdb
    return work


def forget(images: dict[tuple[str, str], Doc], coll: str, jobs: set[str]) -> None:
    for key in [k for k, doc in images.items() if k[0] == coll and job_of(coll, doc) in jobs]:
        del images[key]
