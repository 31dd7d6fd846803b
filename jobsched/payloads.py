"""How a job type's payload travels: the handler's payload annotation decides it.

A payload is a JSON object on the wire. A handler that takes it as `dict` (or a TypedDict, a Mapping, or no
annotation) receives the object as it was stored. A handler that takes a dataclass, or a class with pydantic's
`model_validate` / `model_dump` (pydantic v2 models), receives an instance built from the object, and typed
enqueueing turns an instance back into the object; nothing else is converted, so a payload never depends on
a library the handler did not choose.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

P = TypeVar("P")

Payload = dict[str, Any]


class PayloadMismatch(Exception):
    """A stored payload does not fit the handler's payload type (a field missing, unknown or invalid)."""


@dataclasses.dataclass(frozen=True)
class PayloadCodec(Generic[P]):
    """The handler's payload type, and how a JSON object becomes one and back. `kind` is `object` (the JSON
    object itself), `dataclass` or `model` (pydantic-style)."""

    type: Any
    kind: str

    @property
    def converts(self) -> bool:
        return self.kind != "object"

    def decode(self, payload: Payload) -> P:
        if self.kind == "dataclass":
            try:
                return cast(P, self.type(**payload))
            except TypeError as exc:
                raise PayloadMismatch(f"the payload does not fit {self.type.__name__}: {exc}") from exc
        if self.kind == "model":
            try:
                return cast(P, self.type.model_validate(payload))
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                raise PayloadMismatch(f"the payload does not fit {self.type.__name__}: {exc}") from exc
        return cast(P, payload)

    def encode(self, payload: P) -> Payload:
        """The JSON object for `payload`; a TypeError names what was expected when it is of another type."""
        if self.kind == "object":
            if not isinstance(payload, dict):
                raise TypeError(f"the payload must be a dict (a JSON object), not {type(payload).__name__}")
            return payload
        if not isinstance(payload, self.type):
            raise TypeError(f"the payload must be a {self.type.__name__}, not {type(payload).__name__}")
        if self.kind == "dataclass":
            return dataclasses.asdict(cast(Any, payload))
        return cast(Payload, cast(Any, payload).model_dump(mode="json"))


def codec_of(function: Callable[..., Any]) -> PayloadCodec[Any]:
    """The codec of a handler's first parameter's annotation."""
    annotation = _first_parameter_annotation(function)
    if inspect.isclass(annotation):
        if dataclasses.is_dataclass(annotation):
            return PayloadCodec(annotation, "dataclass")
        if callable(getattr(annotation, "model_validate", None)) and callable(getattr(annotation, "model_dump", None)):
            return PayloadCodec(annotation, "model")
    return PayloadCodec(annotation, "object")


def _first_parameter_annotation(function: Callable[..., Any]) -> Any:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return Any
    if not parameters:
        raise TypeError(f"a handler takes the payload and a context: {function!r} takes no parameter")
    try:
        hints = typing.get_type_hints(function)
    except Exception:
        # An annotation that does not resolve (a name imported only for type checking): the object as stored.
        return Any
    return hints.get(parameters[0].name, Any)
