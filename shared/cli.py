"""How every command of the project fails: one line on stderr naming the problem, and a non-zero exit.

A traceback is for bugs. A bad argument, a bad setting, a taken port or a dependency that cannot be reached
are the operator's to fix, and the line says what to fix.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from shared.config import ConfigError
from shared.ports import ListenError
from shared.store.base import StoreError

USAGE_EXIT = 2
FAILURE_EXIT = 1
F = TypeVar("F", bound=Callable[..., Any])


def fail(command: str, message: str, code: int = FAILURE_EXIT) -> NoReturn:
    print(f"{command}: {message}", file=sys.stderr)
    raise SystemExit(code)


def one_line_errors(command: str, *expected: type[BaseException]) -> Callable[[F], F]:
    """Run a command's main so that the operator's errors (and the `expected` ones) end it with one line."""

    reported: tuple[type[BaseException], ...] = (StoreError, *expected)

    def decorate(main: F) -> F:
        @functools.wraps(main)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return main(*args, **kwargs)
            except ConfigError as exc:
                fail(command, f"configuration: {exc}", USAGE_EXIT)
            except ListenError as exc:
                fail(command, str(exc))
            except reported as exc:
                fail(command, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            except KeyboardInterrupt:
                fail(command, "interrupted", 130)

        return run  # type: ignore[return-value]

    return decorate


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (`prog: message; see --help`), not the usage block."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, f"{message} (see --help)", USAGE_EXIT)
