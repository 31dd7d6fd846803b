"""loadtest/store_work: the index entries a write makes under MongoDB's and DocumentDB's ways of keeping indexes,
and the accounting of recorded commands into work per job."""

from __future__ import annotations

from typing import Any

import pytest

from loadtest.store_work.accounting import Phase, account
from loadtest.store_work.indexes import Index, entries_written, matches, values_at
from loadtest.store_work.recorded import filter_ids, role_of, written_by

pytestmark = pytest.mark.unit

INDEXES = [
    Index("_id_", ("_id",), None),
    Index("claim_order", ("status", "priority", "scheduledAt"), None),
    Index("dead_letters", ("updatedAt",), {"status": "dlq"}),
    Index("template_runs", ("templateId",), {"templateId": {"$exists": True}}),
    Index("tags", ("tags",), None),
]


def job(**fields: Any) -> dict[str, Any]:
    return {"_id": "j1", "status": "pending", "priority": 0, "scheduledAt": 5, "updatedAt": 1, **fields}


def test_partial_filters_hold_as_mongodb_reads_them() -> None:
    assert matches(job(status="dlq"), {"status": "dlq"})
    assert not matches(job(), {"status": "dlq"})
    assert matches(job(templateId="t"), {"templateId": {"$exists": True}})
    assert not matches(job(), {"templateId": {"$exists": True}})
    assert matches(job(), {"$and": [{"priority": {"$gte": 0}}, {"status": {"$in": ["pending", "queued"]}}]})
    assert not matches(job(priority="high"), {"priority": {"$gt": 0}})  # no order across types


def test_an_array_is_an_entry_per_element_and_a_missing_field_is_null() -> None:
    assert values_at({"tags": ["a", "b"]}, "tags") == ["a", "b"]
    assert values_at({"a": {"b": 3}}, "a.b") == [3]
    assert values_at({}, "templateId") == [None]
    assert INDEXES[4].entries(job(tags=["a", "b", "a"])) == {("a",), ("b",)}


def test_an_insert_writes_an_entry_in_each_index_it_qualifies_for_on_both_servers() -> None:
    # _id, claim_order, tags (null): dead_letters and template_runs filter the job out
    assert entries_written(INDEXES, None, job()) == (3, 3)


def test_mongodb_touches_only_changed_keys_where_documentdb_touches_every_index() -> None:
    before = job()
    assert entries_written(INDEXES, before, job(payload={"x": 1})) == (0, 3)  # no key changed
    assert entries_written(INDEXES, before, job(status="queued")) == (1, 3)  # claim_order's key
    # to dlq: claim_order's key changes and the job enters dead_letters
    assert entries_written(INDEXES, before, job(status="dlq", updatedAt=9)) == (2, 4)


def record(ts: float, role: str, cmd: str, ids: list[str], **extra: Any) -> dict[str, Any]:
    return {"ts": ts, "role": role, "cmd": cmd, "coll": "jobs", "ids": ids, **extra}


def test_work_is_shared_by_the_jobs_a_command_touched_and_idle_commands_are_background() -> None:
    first, second = job(_id="a"), job(_id="b")
    records = [
        record(1.0, "api", "insert", ["a", "b"], n=2, images=[first, second]),
        record(2.0, "scheduler", "find", ["a", "b"]),
        # a claim of both: its read-back shows `b` unchanged (another claimer had it), `a` queued
        record(3.0, "scheduler", "update", ["a", "b"], n=1, images=[job(_id="a", status="queued"), second]),
        record(4.0, "scheduler", "find", []),  # an idle tick
        record(5.0, "reaper", "delete", ["a", "b"], n=2, images=[]),
        record(99.0, "scheduler", "find", []),  # after the phase
    ]
    [work] = account(records, {"jobs": INDEXES}, [Phase("p", {"a", "b"}, 0.0, 10.0, counted=2)]).values()
    per_job = work.per_job()
    assert per_job["write_commands"] == 1.5  # insert, claim, delete: 3 commands for 2 jobs
    assert per_job["write_commands_by_role"] == {"api": 0.5, "reaper": 0.5, "scheduler": 0.5}
    assert per_job["read_commands"] == 0.5
    assert per_job["documents_written"] == 1.5  # a, b inserted; a claimed
    assert per_job["documents_deleted"] == 1.0
    assert per_job["index_entries_mongodb"] == (3 + 3 + 1) / 2
    assert per_job["index_entries_documentdb"] == (3 + 3 + 3) / 2
    assert per_job["background_commands_per_s"] == 0.1  # one idle tick in 10 s


def test_a_filter_names_its_jobs_by_id_or_by_in() -> None:
    assert filter_ids({"_id": "a", "status": "pending"}) == {"_id": ["a"]}
    assert filter_ids({"jobId": {"$in": ["a", "b"]}}) == {"jobId": ["a", "b"]}
    assert filter_ids({"status": "pending", "updatedAt": {"$lt": 3}}) == {}
    assert filter_ids({"_id": {"$gt": "a"}}) == {"_id": []}


def test_a_process_is_named_by_its_module_and_job_type() -> None:
    assert role_of("services.executor", ["--type", "soak"]) == "executor:soak"
    assert role_of("services.scheduler", []) == "scheduler"


def test_a_find_and_modify_that_chose_its_document_is_read_back_by_the_id_it_answered() -> None:
    claim = {"query": {"status": "pending"}, "sort": {"priority": -1}, "update": {"$set": {"status": "queued"}}}
    answered = {"value": {"_id": "j7", "status": "pending"}, "lastErrorObject": {"n": 1, "updatedExisting": True}}
    assert written_by("findAndModify", claim, answered) == ([{"_id": "j7"}], 1)
    assert written_by("findAndModify", claim, {"value": None, "lastErrorObject": {"n": 0}}) == ([claim["query"]], 0)
    update = {"updates": [{"q": {"_id": {"$in": ["a", "b"]}}, "u": {}}]}
    assert written_by("update", update, {"n": 2, "nModified": 1}) == ([{"_id": {"$in": ["a", "b"]}}], 1)
