"""docs/architecture.md's layout is the repository's tree: every path it names exists, and every module and
package folder of the public package (jobsched/), the services and shared/ is named in its own folder.

The layout reads as a tree: a folder that begins a line (`store/`) holds the rest of that line and the lines
indented deeper than it; any other name belongs to the folder whose lines it is on."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from tests.support import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "architecture.md").read_text()
LAYOUT = DOC.split("## Layout", 1)[1].split("```")[1]
COMPLETE = ("jobsched", "services", "shared")  # the layout names every module and package folder of these
IMPLIED = {"__init__.py", "__main__.py"}  # a package's, named by its folder
# A folder (`store/`) or a module (`jobs.py`) standing alone, not a part of a path, a URL or a dotted name.
NAME = re.compile(r"(?<![\w/.])[a-z_][a-z0-9_]*(?:/|\.py)(?![\w/])")


def named_paths(layout: str) -> set[str]:
    named: set[str] = set()
    folders: list[tuple[int, PurePosixPath]] = []  # the folders whose lines these are: (column, path)
    for line in filter(str.strip, layout.splitlines()):
        indent = len(line) - len(line.lstrip())
        while folders and folders[-1][0] >= indent:
            folders.pop()
        names = NAME.findall(line)
        if names and names[0].endswith("/") and line.lstrip().startswith(names[0]):
            head = names.pop(0).rstrip("/")
            folders.append((indent, folders[-1][1] / head if folders else PurePosixPath(head)))
            named.add(str(folders[-1][1]))
        folder = folders[-1][1] if folders else PurePosixPath()
        named.update(str(folder / name.rstrip("/")) for name in names)
    return named


def repository_parts() -> set[str]:
    """Every module and package folder the layout must name."""
    parts: set[str] = set()
    for root in COMPLETE:
        for module in (REPO_ROOT / root).rglob("*.py"):
            relative = module.relative_to(REPO_ROOT)
            parts.add(str(relative.parent))
            if module.name not in IMPLIED:
                parts.add(str(relative))
    return parts


NAMED = named_paths(LAYOUT)


def test_the_layout_is_read_as_a_tree() -> None:
    assert {"shared/store/base.py", "services/api/routes", "services/api/routes/jobs.py", "tests/unit"} <= NAMED


def test_every_path_the_layout_names_exists() -> None:
    assert sorted(path for path in NAMED if not (REPO_ROOT / path).exists()) == []


def test_every_module_and_package_is_in_the_layout() -> None:
    assert sorted(repository_parts() - NAMED) == []
