"""Fixtures of the e2e tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.devmode import Dev


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[Dev]:
    made = Dev(tmp_path)
    yield made
    made.close()


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Dev]:
    made = Dev(tmp_path, standalone=True)
    yield made
    made.close()
