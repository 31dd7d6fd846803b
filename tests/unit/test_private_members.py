"""A module's private names (a leading underscore) are its own, read from the source:

    product code (every package but tests)   imports no private name of another module, and touches no private
                                             attribute it does not define itself (other than on self and cls)
    a store backend's folder                 the same holds for every module outside it, tests included: a test
    (shared/store/sqlite/, .../mongo/)       goes through the database object's public surface

so that a backend's insides can change without a hunt through the tree. (Importing a private module of one's own
package, as jobsched.client does with _calls, is that package's business.)"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

pytestmark = pytest.mark.unit

PRODUCT = ("jobsched", "jobsched_client", "shared", "services", "seed", "loadtest", "examples")
BACKENDS = ("shared/store/sqlite", "shared/store/mongo")
# Private by the standard library's naming, public in use.
STANDARD = frozenset({"_replace", "_asdict", "_fields", "_make", "_SubParsersAction"})


def defined(tree: ast.AST) -> set[str]:
    """Every name the module binds: its functions, classes, variables and attributes (self._x = ...)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def is_module(dotted: str) -> bool:
    path = REPO_ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def reach_ins(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, private name, where it belongs) of each use of another module's private name."""
    tree = ast.parse(path.read_text(), str(path))
    own = defined(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and not is_module(f"{node.module}.{alias.name}"):
                    yield node.lineno, alias.name, node.module
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            on_itself = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not on_itself and node.attr not in own and node.attr not in STANDARD:
                yield node.lineno, node.attr, ast.unparse(node.value)


def files(*roots: str) -> list[Path]:
    return sorted(path for root in roots for path in (REPO_ROOT / root).rglob("*.py"))


def test_product_code_touches_no_private_name_of_another_module() -> None:
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {name} of {owner}"
        for path in files(*PRODUCT)
        for line, name, owner in reach_ins(path)
    ]
    assert offenders == []


def test_nothing_outside_a_backend_touches_its_private_names() -> None:
    """Tests included: `store._jobs`, `store._read()` or an import of `_to_ms` from outside the folder fails."""
    backend_modules = {".".join(Path(folder).parts) for folder in BACKENDS}
    offenders = []
    for path in files(*PRODUCT, "tests"):
        relative = path.relative_to(REPO_ROOT).as_posix()
        if relative.startswith(BACKENDS):
            continue
        text = path.read_text()
        if not any(module in text for module in backend_modules) and "store" not in text:
            continue
        for line, name, owner in reach_ins(path):
            if owner.startswith(tuple(backend_modules)) or "store" in owner or "database" in owner:
                offenders.append(f"{relative}:{line}: {name} of {owner}")
    assert offenders == []
    assert all((REPO_ROOT / folder / "__init__.py").is_file() for folder in BACKENDS), "each backend is one folder"
