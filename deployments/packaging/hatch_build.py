"""How the wheel is laid out: the public `jobsched` package at the top, and the server's packages (`services`,
`shared`, `seed`) inside it as `jobsched._server.*`, so that installing jobsched adds no top-level name an
application may have as well. The repository keeps them at the top (the layout the project was designed
with); this hook copies them into the wheel under the private package and rewrites their absolute imports
(`from shared.store import ...` becomes `from jobsched._server.shared.store import ...`), in the public
package as well. Only `from X import ...` statements are rewritten: a plain `import services...` fails the
build rather than ship a module whose names would not resolve.

Editable installs (`uv sync`, the development environment) keep the repository's own layout.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SERVER_PACKAGES = ("services", "shared", "seed")
PUBLIC_PACKAGES = ("jobsched", "jobsched_client")
PRIVATE_ROOT = "jobsched._server"
FROM = re.compile(r"from\s+")


class UnrewritableImport(Exception):
    pass


def rewrite_imports(source: str, where: str) -> str:
    """`source` with every absolute import of a server package moved under PRIVATE_ROOT."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_server_module(alias.name):
                    raise UnrewritableImport(f"{where}:{node.lineno}: write `from {alias.name} import ...`")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_server_module(node.module):
            line = lines[node.lineno - 1]
            # ast's col_offset counts UTF-8 bytes; the statement begins a line's code, so its text is found from
            # the first non-blank character.
            keyword = FROM.match(line, len(line) - len(line.lstrip()))
            if keyword is None or not line.startswith(str(node.module), keyword.end()):
                raise UnrewritableImport(f"{where}:{node.lineno}: keep `from {node.module}` on one line")
            edits.append((node.lineno - 1, keyword.end(), f"{PRIVATE_ROOT}."))
    for index, column, text in sorted(edits, reverse=True):
        lines[index] = lines[index][:column] + text + lines[index][column:]
    return "".join(lines)


def is_server_module(name: str | None) -> bool:
    return name is not None and name.split(".")[0] in SERVER_PACKAGES


def packaged_files(root: Path, package: str) -> list[Path]:
    """The package's files: in a git checkout those git knows or would add (nothing ignored, nothing left over
    from local runs), else every file but bytecode."""
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", package],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
        return sorted(root / name for name in listed.split("\0") if name and (root / name).is_file())
    return sorted(
        path
        for path in (root / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")
    )


class WheelLayout(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        staging = root / "build" / "wheel-layout"
        shutil.rmtree(staging, ignore_errors=True)
        placed = {package: package for package in PUBLIC_PACKAGES}
        placed |= {package: f"{PRIVATE_ROOT.replace('.', '/')}/{package}" for package in SERVER_PACKAGES}
        for package, destination in placed.items():
            for path in packaged_files(root, package):
                relative = path.relative_to(root / package)
                target = staging / destination / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                if path.suffix == ".py":
                    target.write_text(rewrite_imports(path.read_text(), str(path.relative_to(root))))
                else:
                    shutil.copyfile(path, target)
        private = staging / PRIVATE_ROOT.replace(".", "/") / "__init__.py"
        private.write_text(
            '"""The server\'s packages (services, shared, seed), placed here by the wheel\'s build."""\n'
        )
        for path in sorted(p for p in staging.rglob("*") if p.is_file()):
            build_data["force_include"][str(path)] = str(path.relative_to(staging))

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        shutil.rmtree(Path(self.root) / "build" / "wheel-layout", ignore_errors=True)
