"""Loading job type collections (shared/handlers/plugins.py): by name and by entry point, all or nothing; and
the deprecated registry of the first releases, which handler modules written for it still use."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

import shared.handlers
import shared.handlers.plugins
from jobsched import Backoff, JobTypes
from jobsched.handlers import DuplicateHandler
from jobsched.type_defaults import TypeDefaults
from shared.handlers.builtin import builtin_types
from shared.handlers.plugins import PluginError, load_handlers
from shared.handlers.registry import HandlerRegistry
from tests.support import REPO_ROOT, installed_distribution


@pytest.fixture
def types() -> JobTypes:
    """What a binary loads into: the built-ins and the demo types."""
    return builtin_types(demo=True)


@pytest.fixture
def legacy(monkeypatch: pytest.MonkeyPatch) -> HandlerRegistry:
    """A fresh process-wide registry of the first releases: modules doing `from shared.handlers import registry`
    register into it."""
    fresh = HandlerRegistry()
    monkeypatch.setattr(shared.handlers, "registry", fresh)
    monkeypatch.setattr(shared.handlers.plugins, "legacy_registry", fresh)
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


COLLECTS = """
    import jobsched

    jobs = jobsched.JobTypes()

    @jobs.handler("{name}", timeout=7, max_attempts=4, backoff=jobsched.Backoff(base_s=2, cap_s=30, jitter=True))
    async def handle(payload: dict, ctx: jobsched.HandlerContext) -> None:
        return None
"""

REGISTERS = """
    from shared.handlers import registry
    from jobsched import Backoff

    @registry.register("{name}", timeout=7, max_attempts=4, backoff=Backoff(base_s=2, cap_s=30, jitter=True))
    async def handle(payload, ctx):
        return None
"""


def test_collections_named_are_loaded_with_their_defaults(types: JobTypes, plugin_dir: Path) -> None:
    by_attribute = module(plugin_dir, COLLECTS.format(name="send-email"))
    by_module = module(plugin_dir, COLLECTS.format(name="resize"))
    names = [f"{by_attribute}:jobs", by_module]
    assert load_handlers(types, names, use_entry_points=False) == names
    assert {"send-email", "resize"} <= set(types.names())
    assert types["send-email"].is_async
    assert types["send-email"].defaults == TypeDefaults(7, 4, Backoff(base_s=2, cap_s=30, jitter=True))
    assert types["noop"].defaults == TypeDefaults()  # the built-ins keep today's behaviour


def test_a_name_that_is_not_a_collection_is_refused(types: JobTypes, plugin_dir: Path) -> None:
    name = module(plugin_dir, "jobs = 42\n")
    with pytest.raises(PluginError, match=r"TypeError: 42 is neither a JobTypes"):
        load_handlers(types, [f"{name}:jobs"], use_entry_points=False)
    with pytest.raises(PluginError, match=r"AttributeError: .* has no attribute 'missing'"):
        load_handlers(types, [f"{name}:missing"], use_entry_points=False)


def test_nothing_is_half_loaded_when_a_later_module_fails(types: JobTypes, plugin_dir: Path) -> None:
    good = module(plugin_dir, COLLECTS.format(name="send-email"))
    bad = module(plugin_dir, "raise RuntimeError('no config for the mailer')\n")
    with pytest.raises(PluginError) as failed:
        load_handlers(types, [good, bad], use_entry_points=False)
    assert str(failed.value) == f"handler module {bad!r} failed to load: RuntimeError: no config for the mailer"
    assert "send-email" not in types
    assert types.names() == ["flaky", "log-message", "noop", "slow"]


@pytest.mark.parametrize("taken", ["noop", "send-email"])
def test_a_name_registered_twice_names_both_modules(types: JobTypes, plugin_dir: Path, taken: str) -> None:
    first = module(plugin_dir, COLLECTS.format(name="send-email"))
    again = module(plugin_dir, COLLECTS.format(name=taken))
    with pytest.raises(PluginError) as failed:
        load_handlers(types, [first, again], use_entry_points=False)
    assert f"handler module {again!r} failed to load: DuplicateHandler: handler {taken!r} is registered twice" in str(
        failed.value
    )
    assert "send-email" not in types


def test_a_module_that_does_not_exist(types: JobTypes) -> None:
    with pytest.raises(PluginError, match=r"module 'no_such_plugin\.jobs:jobs' failed to load: ModuleNotFound") as e:
        load_handlers(types, ["no_such_plugin.jobs:jobs"], use_entry_points=False)
    assert "is the folder that holds no_such_plugin/ on PYTHONPATH" in str(e.value)


def test_a_dependency_the_module_misses_is_not_mistaken_for_a_path_problem(types: JobTypes, plugin_dir: Path) -> None:
    (plugin_dir / "needs_more.py").write_text("import no_such_dependency\n")
    with pytest.raises(PluginError, match="No module named 'no_such_dependency'") as refused:
        load_handlers(types, ["needs_more"], use_entry_points=False)
    assert "PYTHONPATH" not in str(refused.value)


def test_bad_registrations_are_refused_at_once() -> None:
    jobs = JobTypes()
    with pytest.raises(ValueError, match="max_attempts must be a positive integer"):
        jobs.handler("x", max_attempts=0)
    with pytest.raises(ValueError, match="cap_s >= base_s"):
        Backoff(base_s=10, cap_s=1)
    with pytest.raises(ValueError, match="non-empty string"):
        jobs.handler(" spaced ")
    jobs.handler("once")(lambda payload, ctx: None)
    with pytest.raises(DuplicateHandler):
        jobs.handler("once")(lambda payload, ctx: None)


def test_entry_points_load_collections_modules_and_registration_functions(
    types: JobTypes, legacy: HandlerRegistry, plugin_dir: Path
) -> None:
    by_collection = module(plugin_dir, COLLECTS.format(name="from-collection"))
    by_import = module(plugin_dir, COLLECTS.format(name="from-module"))
    by_function = module(
        plugin_dir,
        """
        def register(registry):
            registry.register("from-function", max_attempts=9)(lambda payload, ctx: None)
        """,
    )
    installed_distribution(
        plugin_dir, f"dist_{by_import}", f"a = {by_collection}:jobs\nb = {by_import}\nc = {by_function}:register"
    )
    with pytest.warns(DeprecationWarning, match="registry.register is deprecated"):
        loaded = load_handlers(types, [])
    assert {f"{by_collection}:jobs", by_import, f"{by_function}:register"} <= set(loaded)
    assert {"from-collection", "from-module"} <= set(types.names())
    assert types["from-function"].defaults == TypeDefaults(max_attempts=9)


def test_a_broken_entry_point_names_its_distribution(types: JobTypes, plugin_dir: Path) -> None:
    installed_distribution(plugin_dir, "brokenplugin", "broken = missing_module_of_brokenplugin")
    with pytest.raises(PluginError) as failed:
        load_handlers(types, [])
    assert "entry point 'broken' = 'missing_module_of_brokenplugin' of brokenplugin 1.0 failed to load" in str(
        failed.value
    )
    assert "ModuleNotFoundError" in str(failed.value)


def test_modules_written_for_the_first_releases_still_load_with_a_warning(
    types: JobTypes, legacy: HandlerRegistry, plugin_dir: Path
) -> None:
    old = module(plugin_dir, REGISTERS.format(name="send-email"))
    with pytest.warns(DeprecationWarning, match="registry.register is deprecated"):
        assert load_handlers(types, [old], use_entry_points=False) == [old]
    assert types["send-email"].defaults == TypeDefaults(7, 4, Backoff(base_s=2, cap_s=30, jitter=True))
    bad = module(plugin_dir, REGISTERS.format(name="resize") + "\n    raise RuntimeError('half way')\n")
    with pytest.warns(DeprecationWarning, match="deprecated"), pytest.raises(PluginError, match="half way"):
        load_handlers(types, [bad], use_entry_points=False)
    assert "resize" not in types
    assert "resize" not in legacy  # what the failed module registered was dropped
    with pytest.warns(DeprecationWarning, match="use jobsched.HandlerContext"):
        from shared.handlers.registry import HandlerContext  # noqa: F401
    with pytest.warns(DeprecationWarning, match="use jobsched.Payload"):
        from shared.handlers import Payload  # noqa: F401


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
    name = module(tmp_path, COLLECTS.format(name="send-email"))
    listed = run_listing({"JOBSCHED_HANDLERS": f"{name}:jobs", "PYTHONPATH": str(tmp_path)})
    assert (listed.returncode, listed.stdout.split()) == (
        0,
        ["flaky", "http", "log-message", "noop", "send-email", "slow"],
    )
    without_demo = run_listing({"JOBSCHED_HANDLERS": name, "PYTHONPATH": str(tmp_path), "DEMO_JOB_TYPES": "false"})
    assert (without_demo.returncode, without_demo.stdout.split()) == (0, ["http", "log-message", "noop", "send-email"])
    broken = run_listing({"JOBSCHED_HANDLERS": "no_such_plugin_module"})
    assert broken.returncode == 2
    assert "handler module 'no_such_plugin_module' failed to load" in broken.stderr
