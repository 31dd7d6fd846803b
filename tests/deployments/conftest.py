"""What the install tests share: one `make dist` per run."""

from __future__ import annotations

import pytest

from tests.deployments.installs import Dist, build_dist


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    return build_dist(tmp_path_factory.mktemp("dist"))
