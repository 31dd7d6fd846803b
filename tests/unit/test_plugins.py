"""Loading handler modules (shared/handlers/plugins.py): by name and by entry point, all or nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import shared.handlers
from shared.backoff import Backoff
from shared.handlers.builtin import register_builtins
from shared.handlers.plugins import PluginError, load_handlers
from shared.handlers.registry import DuplicateHandler, HandlerRegistry
from shared.type_defaults import TypeDefaults
from tests.support import REPO_ROOT, installed_distribution


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> HandlerRegistry:
    """A fresh registry with the built-ins in place of the process's: modules doing
    `from shared.handlers import registry` register into it."""
    fresh = HandlerRegistry()
    register_builtins(fresh)
    monkeypatch.setattr(shared.handlers, "registry", fresh)
    return fresh


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def module(directory: Path, body: str) -> str:
    """A module of its own name (imports are cached per name) on sys.path; its name."""
    name = f"plugin_{uuid.uuid4().hex[:12]}"
    (directory / f"{name}.py").write_text(textwrap.dedent(body))
    return name


REGISTERS = """
    from shared.handlers import Backoff, registry

    @registry.register("{name}", timeout=7, max_attempts=4, backoff=Backoff(base_s=2, cap_s=30, jitter=True))
    async def handle(payload, ctx):
        return None
"""


def test_modules_named_are_loaded_with_their_defaults(registry: HandlerRegistry, plugin_dir: Path) -> None:
    first = module(plugin_dir, REGISTERS.format(name="send-email"))
    second = module(plugin_dir, REGISTERS.format(name="resize"))
    assert load_handlers(registry, [first, second], use_entry_points=False) == [first, second]
    assert {"send-email", "resize"} <= set(registry.names())
    assert registry.is_async("send-email")
    assert registry.defaults("send-email") == TypeDefaults(7, 4, Backoff(base_s=2, cap_s=30, jitter=True))
    assert registry.defaults("noop") == TypeDefaults()  # the built-ins keep today's behaviour


def test_nothing_is_half_loaded_when_a_later_module_fails(registry: HandlerRegistry, plugin_dir: Path) -> None:
    good = module(plugin_dir, REGISTERS.format(name="send-email"))
    bad = module(plugin_dir, "raise RuntimeError('no config for the mailer')\n")
    with pytest.raises(PluginError) as failed:
        load_handlers(registry, [good, bad], use_entry_points=False)
    assert str(failed.value) == f"handler module {bad!r} failed to load: RuntimeError: no config for the mailer"
    assert "send-email" not in registry
    assert registry.names() == ["flaky", "log-message", "noop", "slow"]


@pytest.mark.parametrize("taken", ["noop", "send-email"])
def test_a_name_registered_twice_names_both_modules(registry: HandlerRegistry, plugin_dir: Path, taken: str) -> None:
    first = module(plugin_dir, REGISTERS.format(name="send-email"))
    again = module(plugin_dir, REGISTERS.format(name=taken))
    with pytest.raises(PluginError) as failed:
        load_handlers(registry, [first, again], use_entry_points=False)
    assert f"handler module {again!r} failed to load: DuplicateHandler: handler {taken!r} is registered twice" in str(
        failed.value
    )
    assert again in str(failed.value)
    assert "send-email" not in registry


def test_a_module_that_does_not_exist(registry: HandlerRegistry) -> None:
    with pytest.raises(PluginError, match=r"handler module 'no_such_plugin\.jobs' failed to load: ModuleNotFound") as e:
        load_handlers(registry, ["no_such_plugin.jobs"], use_entry_points=False)
    assert "is the folder that holds no_such_plugin/ on PYTHONPATH" in str(e.value)


def test_a_dependency_the_module_misses_is_not_mistaken_for_a_path_problem(
    registry: HandlerRegistry, plugin_dir: Path
) -> None:
    (plugin_dir / "needs_more.py").write_text("import no_such_dependency\n")
    with pytest.raises(PluginError, match="No module named 'no_such_dependency'") as refused:
        load_handlers(registry, ["needs_more"], use_entry_points=False)
    assert "PYTHONPATH" not in str(refused.value)


def test_bad_registrations_are_refused_at_once(registry: HandlerRegistry) -> None:
    with pytest.raises(ValueError, match="max_attempts must be a positive integer"):
        registry.register("x", max_attempts=0)
    with pytest.raises(ValueError, match="cap_s >= base_s"):
        Backoff(base_s=10, cap_s=1)
    with pytest.raises(ValueError, match="non-empty string"):
        registry.register(" spaced ")
    registry.register("once")(lambda payload, ctx: None)
    with pytest.raises(DuplicateHandler):
        registry.register("once")(lambda payload, ctx: None)


def test_entry_points_load_modules_and_registration_functions(registry: HandlerRegistry, plugin_dir: Path) -> None:
    by_import = module(plugin_dir, REGISTERS.format(name="from-module"))
    by_function = module(
        plugin_dir,
        """
        def register(registry):
            registry.register("from-function", max_attempts=9)(lambda payload, ctx: None)
        """,
    )
    installed_distribution(plugin_dir, f"dist_{by_import}", f"a = {by_import}\nb = {by_function}:register")
    loaded = load_handlers(registry, [])
    assert {by_import, f"{by_function}:register"} <= set(loaded)
    assert "from-module" in registry
    assert registry.defaults("from-function") == TypeDefaults(max_attempts=9)


def test_a_broken_entry_point_names_its_distribution(registry: HandlerRegistry, plugin_dir: Path) -> None:
    installed_distribution(plugin_dir, "brokenplugin", "broken = missing_module_of_brokenplugin")
    with pytest.raises(PluginError) as failed:
        load_handlers(registry, [])
    assert "entry point 'broken' = 'missing_module_of_brokenplugin' of brokenplugin 1.0 failed to load" in str(
        failed.value
    )
    assert "ModuleNotFoundError" in str(failed.value)


def run_listing(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shared.handlers.plugins"],
        env={**os.environ, **env},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_listing_that_make_up_starts_executors_for_includes_the_plugins(tmp_path: Path) -> None:
    name = module(tmp_path, REGISTERS.format(name="send-email"))
    listed = run_listing({"JOBSCHED_HANDLERS": name, "PYTHONPATH": str(tmp_path)})
    assert (listed.returncode, listed.stdout.split()) == (0, ["flaky", "log-message", "noop", "send-email", "slow"])
    broken = run_listing({"JOBSCHED_HANDLERS": "no_such_plugin_module"})
    assert broken.returncode == 2
    assert "handler module 'no_such_plugin_module' failed to load" in broken.stderr
