"""The import structure stays layered, read from the source (imports inside functions included):

    jobsched (the public package: handlers, payloads, client)   imports no server code
    shared                                                       imports jobsched only
    services, seed                                               import shared and jobsched; no service
                                                                 imports another, but the embedded mode's
                                                                 wiring (services.embedded, services.dev)
    jobsched.server, jobsched.testing, jobsched.cli, loadtest    may import anything

and no module reaches itself again through its imports."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support import REPO_ROOT

PACKAGES = ("jobsched", "jobsched_client", "shared", "services", "seed", "loadtest")
TOP = ("jobsched.server", "jobsched.testing", "jobsched.cli", "loadtest")
WIRING = ("services.embedded", "services.dev")


def module_files() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = module_files()


def project_module(name: str) -> str | None:
    """The project's module that importing `name` loads (a name inside a module counts as the module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imported(module: str, path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: None if path.name == "__init__.py" else -1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, *([node.module] if node.module else [])])
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            found = project_module(name)
            if found is not None and found != module:
                yield found


GRAPH = {module: set(imported(module, path)) for module, path in MODULES.items()}


def within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def layer(module: str) -> int:
    if within(module, TOP):
        return 3
    if within(module, ("services", "seed")):
        return 2
    if within(module, ("shared",)):
        return 1
    return 0


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if layer(target) > layer(module)
    )
    assert upward == []
    assert layer("jobsched.handlers") == 0  # the rule reads the public package as the bottom layer
    assert any(layer(target) == 2 for target in GRAPH["jobsched.server"])  # ... and sees imports at all


def test_no_service_imports_another_but_the_embedded_mode_that_wires_them() -> None:
    def service(module: str) -> str:
        return ".".join(module.split(".")[:2])

    crossing = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        if module.startswith("services.") and not within(module, WIRING)
        for target in targets
        if target.startswith("services.") and service(target) != service(module)
    )
    assert crossing == []


def test_there_is_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(GRAPH[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []
    assert "shared.store.browse" in GRAPH["shared.store.sqlite.browse"]  # the walk sees module-level imports
    assert "shared.store.sqlite.browse" in GRAPH["shared.backends"]  # ... and those inside functions


def test_nothing_but_the_tests_imports_the_tests() -> None:
    importing = sorted(
        module
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom | ast.Import)
        and any(
            name.split(".")[0] == "tests"
            for name in ([node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names])
        )
    )
    assert importing == []
