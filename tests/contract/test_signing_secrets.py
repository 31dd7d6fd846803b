"""The signing secrets' contract, on every store: a tenant's own, at most two live (decided atomically, also when
many add at once), its first made once however many executors ask together, removed by the tenant only."""

from __future__ import annotations

import pytest

from shared.http_jobs.secrets import MAX_LIVE, SigningSecrets, TooManySecrets
from shared.model import utc_now
from shared.store.base import JobStore
from tests.contract.store_kit import together
from tests.support import backend_beside


@pytest.fixture
def secrets(store: JobStore) -> SigningSecrets:
    return backend_beside(store).signing_secrets


def test_a_tenant_has_at_most_two_live_secrets_its_own(secrets: SigningSecrets) -> None:
    assert secrets.live("acme") == []
    first = secrets.add("acme", utc_now())
    second = secrets.add("acme", utc_now())
    assert first.secret.startswith("whsec_")
    assert first.secret != second.secret
    with pytest.raises(TooManySecrets):
        secrets.add("acme", utc_now())
    assert [s.id for s in secrets.live("acme")] == [first.id, second.id]  # oldest first
    assert secrets.live("other") == []
    assert secrets.remove("other", first.id) is False  # another tenant's id: not found for it
    assert secrets.remove("acme", first.id) is True
    assert secrets.remove("acme", first.id) is False
    assert [s.id for s in secrets.live("acme")] == [second.id]
    third = secrets.add("acme", utc_now())  # room again
    assert [s.id for s in secrets.live("acme")] == [second.id, third.id]


def test_many_adding_at_once_never_pass_the_limit(secrets: SigningSecrets) -> None:
    answers = together([lambda: secrets.add("race", utc_now()) for _ in range(6)])
    assert sum(1 for a in answers if not isinstance(a, BaseException)) == MAX_LIVE
    assert all(isinstance(a, TooManySecrets) for a in answers if isinstance(a, BaseException))
    assert len(secrets.live("race")) == MAX_LIVE


def test_a_tenants_first_secret_is_made_once_whoever_asks(secrets: SigningSecrets) -> None:
    answers = together([lambda: secrets.first("newcomer", utc_now()) for _ in range(5)])
    ids = {tuple(s.id for s in a) for a in answers if not isinstance(a, BaseException)}
    assert len(ids) == 1
    [(made,)] = ids
    assert [s.id for s in secrets.live("newcomer")] == [made]
    secrets.add("newcomer", utc_now())
    assert len(secrets.first("newcomer", utc_now())) == 2  # none made while some are live
