"""docs/architecture.md's layout names what the repository holds: every file it names exists, and every package
of the server and of the public package is in it."""

from __future__ import annotations

import re

from tests.support import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "architecture.md").read_text()
LAYOUT = DOC.split("## Layout", 1)[1].split("```")[1]
PACKAGES = ("jobsched", "services", "shared", "seed", "loadtest")


def python_files() -> set[str]:
    return {p.name for package in PACKAGES for p in (REPO_ROOT / package).rglob("*.py")}


def test_every_file_the_layout_names_exists() -> None:
    named = set(re.findall(r"\b([a-z_]+\.py)\b", LAYOUT))
    assert named, "the layout names files"
    assert sorted(named - python_files()) == []


def test_every_package_is_in_the_layout() -> None:
    packages = {
        path.parent.name
        for root in ("jobsched", "services", "shared", "services/api")
        for path in (REPO_ROOT / root).glob("*/__init__.py")
    }
    assert "routes" in packages  # the walk finds the API's rooms
    assert sorted(p for p in packages if f"{p}/" not in LAYOUT) == []
