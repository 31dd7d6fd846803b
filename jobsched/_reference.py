"""The reference of the public package, generated from its own signatures and docstrings:
`python -m jobsched._reference > docs/reference.md` (a test keeps the file equal to this output)."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator
from typing import Any

MODULES = ("jobsched", "jobsched.testing", "jobsched.server")
WIRE_ONLY = ("from_wire",)  # how the client reads the API's answers, not for applications
ADDRESS = re.compile(r" at 0x[0-9a-f]+>")
INTRO = """# Reference

Generated from the code (`python -m jobsched._reference > docs/reference.md`; a test fails when this page and
the code differ). What an application imports: `jobsched` (the wheel `make dist` builds), `jobsched.testing`, and
`jobsched.server` (the wheel with its `server` extra; [installing](operations.md#installing)). How to use them:
[handlers](handlers.md), [client](client.md), [operations](operations.md#inside-your-application).
"""


def reference() -> str:
    return "\n".join([INTRO, *(line for name in MODULES for line in _module(name))]).rstrip() + "\n"


def _module(name: str) -> Iterator[str]:
    module = importlib.import_module(name)
    yield f"## `{name}`\n"
    yield _doc(module)
    names = getattr(module, "__all__", None) or [
        n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None) == name
    ]
    for attribute in names:
        value = getattr(module, attribute)
        if inspect.isclass(value):
            yield from _class(attribute, value)
        elif inspect.isfunction(value):
            yield f"### `{attribute}{_signature(value)}`\n"
            yield _doc(value)
        elif attribute == "__version__":
            continue
        else:
            yield f"### `{attribute}`\n"
            yield f"`{value!r}`\n" if not isinstance(value, frozenset) else f"`{sorted(value)}`\n"


def _class(name: str, cls: type[Any]) -> Iterator[str]:
    bases = [b.__name__ for b in cls.__bases__ if b is not object and not b.__name__.startswith("_")]
    yield f"### class `{name}`" + (f" ({', '.join(bases)})" if bases else "") + "\n"
    yield _doc(cls)
    if issubclass(cls, BaseException):
        return
    own = {n: v for n, v in vars(cls).items() if not n.startswith("_") or n in ("__init__", "__call__")}
    for member, value in own.items():
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if not inspect.isfunction(function):
            continue
        if member in WIRE_ONLY:
            continue
        shown = name if member == "__init__" else f".{member}"
        described = _one_line(function)
        if isinstance(value, property):
            yield f"- `.{member}`" + (f": {described}" if described else "")
        else:
            yield f"- `{shown}{_signature(function, drop_self=True)}`" + (f": {described}" if described else "")
    yield ""


def _signature(function: Any, *, drop_self: bool = False) -> str:
    """The signature as the source spells its annotations (they are strings here: postponed evaluation)."""
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())
    if drop_self and parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    parts: list[str] = []
    starred = False
    for parameter in parameters:
        text = parameter.name
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            text, starred = f"*{text}", True
        elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
            text = f"**{text}"
        elif parameter.kind is inspect.Parameter.KEYWORD_ONLY and not starred:
            parts.append("*")
            starred = True
        if parameter.annotation is not inspect.Parameter.empty:
            text += f": {_annotation(parameter.annotation)}"
        if parameter.default is not inspect.Parameter.empty:
            # A default's repr may hold an address (`<built-in method ... at 0x...>`): the page must not change.
            text += f" = {ADDRESS.sub('>', repr(parameter.default))}"
        parts.append(text)
    returned = signature.return_annotation
    arrow = f" -> {_annotation(returned)}" if returned is not inspect.Signature.empty else ""
    return f"({', '.join(parts)}){arrow}"


def _annotation(annotation: Any) -> str:
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def _own_doc(value: Any) -> str:
    """The object's own docstring (not one inherited from a base class or from object)."""
    return inspect.cleandoc(value.__doc__) if isinstance(value.__doc__, str) else ""


def _doc(value: Any) -> str:
    text = _own_doc(value)
    return f"{text}\n" if text else ""


def _one_line(function: Any) -> str:
    text = _own_doc(function)
    return " ".join(text.split("\n\n")[0].split())


if __name__ == "__main__":
    print(reference(), end="")
