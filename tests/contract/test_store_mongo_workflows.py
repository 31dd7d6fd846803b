"""Workflows on MongoDB, written in steps a crash may stop (store/mongo/workflows.py): a record left `creating` is
finished by a resend of the same request, or by the reaper once CREATING_GRACE old (all steps written: released;
some missing: removed with what was written, its key free again); no step of it ran meanwhile."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from bson import ObjectId
from pymongo.database import Database

from shared.model import Status, utc_now
from shared.store.base import DuplicateWorkflow, NewWorkflow, StoreUnavailable
from shared.store.mongo import MongoJobStore
from shared.store.mongo import workflows as stored_workflows
from shared.store.workflow_plans import planned
from shared.workflows import CREATING_GRACE, WorkflowStatus
from tests.contract.store_kit import reload
from tests.contract.test_store_workflows import diamond


def half_written(store: MongoJobStore, key: str, steps_written: int) -> str:
    """A workflow whose create died after writing its record and its first `steps_written` steps' jobs."""
    before = utc_now() - CREATING_GRACE - timedelta(seconds=1)
    plan = planned(diamond(key), str(ObjectId()), before, held=True)
    stored_workflows.records(store.database).insert_one(stored_workflows.record_document(plan.workflow))
    stored_workflows.write_steps(store.database, plan, before, plan.jobs[:steps_written])
    return plan.workflow.id


def test_a_resend_finishes_a_workflow_a_crash_left_half_written(mongo_store: MongoJobStore) -> None:
    store = mongo_store
    cut = half_written(store, "resent", 2)
    assert store.claim_due_jobs(utc_now(), 100, {"wf-extract"}) == []  # the root is held: nothing runs
    view = store.workflow(cut)
    assert view is not None
    assert view.status is WorkflowStatus.CREATING
    finished = store.create_workflow(diamond("resent"))
    assert finished.workflow.id == cut
    assert finished.status is WorkflowStatus.RUNNING
    assert dict(finished.counts) == {"pending": 1, "waiting": 3}


def test_a_resend_with_other_steps_is_a_duplicate_and_changes_nothing(mongo_store: MongoJobStore) -> None:
    store = mongo_store
    cut = half_written(store, "changed", 2)
    other = diamond("changed")
    swapped = NewWorkflow(
        other.tenantId, other.idempotencyKey, (other.steps[0], *reversed(other.steps[1:3]), other.steps[3])
    )
    reordered = replace(other, steps=(other.steps[0], replace(other.steps[1], after=()), *other.steps[2:]))
    for different in (reordered, replace(other, steps=other.steps[:3])):
        with pytest.raises(DuplicateWorkflow) as taken:
            store.create_workflow(different)
        assert taken.value.existing_id == cut
    assert store.create_workflow(swapped).workflow.id == cut  # the same graph, listed in another order


def test_a_create_the_reaper_removed_meanwhile_takes_back_what_it_wrote(
    mongo_store: MongoJobStore, mongo_db: Database[dict[str, Any]]
) -> None:
    store = mongo_store
    cut = half_written(store, "raced", 2)
    plan = planned(diamond("raced"), cut, utc_now(), held=True, ids=ids_of(store, cut))
    assert store.settle_workflows(utc_now() - CREATING_GRACE, 100) == 1  # removed: steps were missing
    stored_workflows.write_steps(store.database, plan, utc_now())  # the resend that was writing meanwhile
    with pytest.raises(StoreUnavailable, match="removed as it was written"):
        stored_workflows.all_written(store.database, plan)
    assert mongo_db["jobs"].count_documents({"workflowId": cut}) == 0
    assert store.create_workflow(diamond("raced")).workflow.id != cut  # sent again: a new workflow


def ids_of(store: MongoJobStore, workflow_id: str) -> dict[str, str]:
    view = store.workflow(workflow_id)
    assert view is not None
    return {s.name: s.jobId for s in view.workflow.steps}


def test_the_reaper_finishes_or_removes_what_a_crash_left(
    mongo_store: MongoJobStore, mongo_db: Database[dict[str, Any]]
) -> None:
    store = mongo_store
    whole = half_written(store, "whole", 4)
    partial = half_written(store, "partial", 2)
    fresh = store.create_workflow(diamond("fresh")).workflow.id
    assert store.settle_workflows(utc_now() - CREATING_GRACE, 100) == 2
    released = store.workflow(whole)
    assert released is not None
    assert released.status is WorkflowStatus.RUNNING
    assert reload(store, released.workflow.steps[0].jobId).status is Status.PENDING
    assert store.workflow(partial) is None
    assert mongo_db["jobs"].count_documents({"workflowId": partial}) == 0
    assert store.create_workflow(diamond("partial")).workflow.id != partial  # its key is free again
    assert store.settle_workflows(utc_now() - CREATING_GRACE, 100) == 0
    assert store.workflow(fresh) is not None
    # Left releasing (every step written, the roots not yet released) or removing: finished alike.
    releasing, removing = half_written(store, "releasing", 4), half_written(store, "removing", 1)
    for workflow_id, state in ((releasing, "releasing"), (removing, "removing")):
        mongo_db["workflows"].update_one({"_id": ObjectId(workflow_id)}, {"$set": {"state": state}})
    assert store.settle_workflows(utc_now() - CREATING_GRACE, 100) == 2
    assert store.workflow(releasing).status is WorkflowStatus.RUNNING  # type: ignore[union-attr]
    assert store.workflow(removing) is None
