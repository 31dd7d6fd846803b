"""The limits routes' answers for names the API does not serve: a 404 unless an operator's limits are stored for
that name (a type whose executors are gone keeps them, and they must stay removable). Both stores, both auth
modes (with AUTH=required the test's key is not an admin, so the removals are made with an admin key)."""

from __future__ import annotations

from starlette.testclient import TestClient

from jobsched.limits import Limits
from shared.keys.base import KeyStore, Role
from shared.keys.manage import issue_key
from shared.model import utc_now
from shared.store.base import JobStore
from tests.support import backend_beside


def admin(auth_mode: str, keys: KeyStore) -> dict[str, str]:
    if auth_mode == "off":
        return {}
    key, _ = issue_key(keys, "tenant-a", Role.ADMIN, "tests", by="tests")
    return {"Authorization": f"Bearer {key}"}


def test_removing_the_limits_of_a_type_the_api_never_served_is_a_404(
    api: TestClient, auth_mode: str, api_keys: KeyStore
) -> None:
    answer = api.delete("/job-types/no-such-type/limits", headers=admin(auth_mode, api_keys))
    assert answer.status_code == 404
    assert "no-such-type" in answer.json()["error"]
    assert api.get("/job-types/no-such-type/limits").status_code == 404


def test_an_operators_limits_outlive_the_types_executors_and_stay_removable(
    api: TestClient, api_store: JobStore, auth_mode: str, api_keys: KeyStore
) -> None:
    registry = backend_beside(api_store).job_types
    registry.set_limits("retired-type", Limits(concurrency=2), utc_now())
    answer = api.delete("/job-types/retired-type/limits", headers=admin(auth_mode, api_keys))
    assert answer.status_code == 200
    assert (answer.json()["override"], answer.json()["limits"]) == (None, None)
    assert "retired-type" not in registry.limit_overrides()
    # Gone, the name is unknown again.
    assert api.delete("/job-types/retired-type/limits", headers=admin(auth_mode, api_keys)).status_code == 404


def test_a_type_without_limits_shows_null_as_the_listing_does(api: TestClient) -> None:
    answer = api.get("/job-types/log-message/limits").json()
    [listed] = [t for t in api.get("/job-types").json() if t["name"] == "log-message"]
    assert (answer["limits"], answer["registered"], answer["override"], listed["limits"]) == (None, None, None, None)


def test_an_operators_empty_limits_lift_every_limit_until_removed(
    api: TestClient, auth_mode: str, api_keys: KeyStore
) -> None:
    answer = api.put("/job-types/log-message/limits", json={}, headers=admin(auth_mode, api_keys)).json()
    assert (answer["source"], answer["limits"], answer["override"]) == ("api", None, Limits().to_document())
