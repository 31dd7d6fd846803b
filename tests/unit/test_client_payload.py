"""The client checks a payload is JSON before it sends it, and says what is not."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jobsched.client import Client


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"when": datetime(2026, 1, 1, tzinfo=UTC)}, "isoformat()"),
        ({"ids": {1, 2}}, "set"),
        ({"rate": float("nan")}, "not JSON"),
    ],
)
def test_a_payload_json_has_no_form_for_is_named_before_anything_is_sent(payload: dict[str, Any], says: str) -> None:
    client = Client("http://127.0.0.1:1", tenant_id="t")  # nothing listens: nothing may be sent
    with client, pytest.raises(ValueError, match="the payload is not JSON") as refused:
        client.create("noop", payload)
    assert says in str(refused.value)
