"""docs/reference.md is the public package's reference as the code states it (jobsched/_reference.py)."""

from __future__ import annotations

from jobsched._reference import reference
from tests.support import REPO_ROOT


def test_the_reference_page_is_what_the_code_says() -> None:
    page = (REPO_ROOT / "docs" / "reference.md").read_text()
    assert page == reference(), "run: .venv/bin/python -m jobsched._reference > docs/reference.md"
    for name in ("JobTypes", "enqueue", "HandlerContext", "testing", "Embedded"):
        assert name in page
