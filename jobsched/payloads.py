"""How a job type's payload travels: the handler's payload annotation decides it.

A payload is a JSON object on the wire. A handler that takes it as `dict` (or a TypedDict, a Mapping, or no
annotation) receives the object as it was stored. A handler that takes a dataclass, or a pydantic v2 model
(anything with `model_validate` / `model_dump`), receives an instance built from the object, and typed
enqueueing turns an instance back into the object; nothing else is converted, so a payload never depends on
a library the handler did not choose.

A dataclass's fields are checked as far as JSON goes (str, int, float, bool, list, dict, and nested
dataclasses, each optionally None); fields of other types are passed as stored (use a model to validate
them). Keys the dataclass does not have are ignored, so that enqueuers may be deployed before the executors
that know a new field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import sys
import types
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

P = TypeVar("P")
T = TypeVar("T")

Payload = dict[str, Any]
_JSON_CHECKED: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float), bool: (bool,)}
_CONTAINERS: dict[Any, type] = {list: list, dict: dict}


class PayloadMismatch(Exception):
    """A stored payload does not fit the handler's payload type (a field missing, or of another type)."""


class PayloadType(Generic[P]):
    """A handler's payload type, resolved from its annotation when first needed (the annotation may name a
    class defined after the handler). `kind` is `object` (the JSON object itself), `dataclass` or `model`."""

    def __init__(self, function: Callable[..., Any]) -> None:
        self._function = function
        self._resolved: tuple[Any, str] | None = None
        with contextlib.suppress(TypeError):  # a forward reference: resolved at first use
            self._resolve()

    @property
    def type(self) -> Any:
        return self._resolve()[0]

    @property
    def kind(self) -> str:
        return self._resolve()[1]

    @property
    def converts(self) -> bool:
        return self.kind != "object"

    def decode(self, payload: Payload) -> P:
        cls, kind = self._resolve()
        return cast(P, _decoded(cls, kind, payload))

    def encode(self, payload: P) -> Payload:
        """The JSON object for `payload`; a TypeError names what was expected when it is of another type."""
        cls, kind = self._resolve()
        if kind == "object":
            if not isinstance(payload, dict):
                raise TypeError(f"the payload must be a dict (a JSON object), not {type(payload).__name__}")
            return payload
        if not isinstance(payload, cls):
            raise TypeError(f"the payload must be {with_article(cls.__name__)}, not {type(payload).__name__}")
        if kind == "dataclass":
            return dataclasses.asdict(cast(Any, payload))
        # By alias: what model_validate reads back.
        return cast(Payload, cast(Any, payload).model_dump(mode="json", by_alias=True))

    def _resolve(self) -> tuple[Any, str]:
        if self._resolved is None:
            try:
                annotation = _payload_annotation(self._function)
            except NameError as exc:
                raise TypeError(
                    f"the payload annotation of {getattr(self._function, '__qualname__', self._function)!r} does"
                    f" not resolve ({exc}): define its class at module level, and import it for real (not only"
                    " under TYPE_CHECKING)"
                ) from exc
            self._resolved = (annotation, _kind_of(annotation))
        return self._resolved


# Letters whose spoken name starts with a vowel sound: an acronym starting with one takes "an" (an SMS, an HTTP
# request), one starting with another "a" (a URL, a JSON document).
_VOWEL_SOUNDING_LETTERS = frozenset("AEFHILMNORSX")
# Words that start with a vowel letter but a consonant sound ("a User", "a OneOff"), and the reverse ("an Hour"),
# which are looked for first.
_CONSONANT_SOUNDING = ("uni", "use", "usa", "usu", "uti", "uri", "ure", "uu", "eu", "one", "once")
_VOWEL_SOUNDING = ("hour", "honest", "honor", "honour", "heir", "unin", "unim", "unid")  # an Uninstall


def with_article(name: str) -> str:
    """`name` (a class name, read aloud) with its indefinite article: "an Email", "a Report", "a User", "an
    HTTPRequest". By its first sound, which spelling only approximates: the common exceptions are known."""
    word = name.lstrip("_")
    if word[:2].isupper():  # an acronym (or one capital), spelled out letter by letter
        return f"{'an' if word[0] in _VOWEL_SOUNDING_LETTERS else 'a'} {name}"
    lower = word.lower()
    if lower.startswith(_VOWEL_SOUNDING):
        return f"an {name}"
    if lower.startswith(_CONSONANT_SOUNDING):
        return f"a {name}"
    return f"{'an' if lower[:1] in ('a', 'e', 'i', 'o', 'u') else 'a'} {name}"


def decoded(cls: type[T], value: Any) -> T:
    """A stored JSON value as `cls`: a dataclass or a model built from it (PayloadMismatch when it does not fit),
    any other class's value as it is."""
    return cast(T, _decoded(cls, _kind_of(cls), value))


def _decoded(cls: Any, kind: str, value: Any) -> Any:
    if kind == "dataclass":
        return _dataclass_of(cls, value, cls.__name__)
    if kind == "model":
        try:
            return cls.model_validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise PayloadMismatch(f"the payload does not fit {cls.__name__}: {exc}") from exc
    return value


def _kind_of(annotation: Any) -> str:
    if inspect.isclass(annotation):
        if dataclasses.is_dataclass(annotation):
            _refuse_init_vars(annotation)
            return "dataclass"
        if callable(getattr(annotation, "model_validate", None)) and callable(getattr(annotation, "model_dump", None)):
            return "model"
    return "object"


def _payload_annotation(function: Callable[..., Any]) -> Any:
    """The first parameter's annotation, evaluated (NameError when it names what is not defined yet), without
    `| None` and `Annotated[...]`. A partial, a callable object and a decorated function count as the
    function they call."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return Any
    if not parameters:
        raise TypeError(f"a handler takes the payload and a context: {function!r} takes no parameter")
    annotation = parameters[0].annotation
    if annotation is inspect.Parameter.empty:
        return Any
    if isinstance(annotation, str):
        annotation = eval(annotation, _globals_of(function))  # the annotation as the handler's module wrote it
    return _without_none(annotation)


def called_function(function: Callable[..., Any]) -> Callable[..., Any]:
    """The function that runs when `function` is called: through partials, decorators that kept `__wrapped__`,
    and a callable object's `__call__`."""
    target: Any = function
    while isinstance(target, functools.partial):
        target = target.func
    target = inspect.unwrap(target)
    if not inspect.isfunction(target) and not inspect.ismethod(target) and callable(target):
        target = inspect.unwrap(type(target).__call__)
    return cast(Callable[..., Any], target)


def _globals_of(function: Callable[..., Any]) -> dict[str, Any]:
    target = called_function(function)
    found = getattr(target, "__globals__", None)
    if found is None:
        module = sys.modules.get(getattr(target, "__module__", ""), None)
        found = vars(module) if module is not None else {}
    return cast(dict[str, Any], found)


def _without_none(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _without_none(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        others = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(others) == 1:
            return _without_none(others[0])
    return annotation


def _refuse_init_vars(cls: type[Any]) -> None:
    hints = typing.get_type_hints(cls)
    init_vars = [name for name, hint in hints.items() if isinstance(hint, dataclasses.InitVar)]
    if init_vars:
        raise TypeError(f"{cls.__name__}: InitVar fields ({', '.join(init_vars)}) cannot come from a payload")


def _dataclass_of(cls: type[Any], payload: Any, where: str) -> Any:
    if not isinstance(payload, dict):
        raise PayloadMismatch(f"the payload does not fit {where}: expected an object, got {_json_name(payload)}")
    hints = _field_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.name not in payload:
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise PayloadMismatch(f"the payload does not fit {where}: {field.name!r} is missing")
            continue
        values[field.name] = _field_value(hints.get(field.name, Any), payload[field.name], f"{where}.{field.name}")
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:  # the class's own checks (__post_init__, a pydantic dataclass)
        raise PayloadMismatch(f"the payload does not fit {where}: {exc}") from exc


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _field_hints(cls: type[Any]) -> dict[str, Any]:
    """The dataclass's field types, evaluated once per class rather than at every attempt's decode (two threads
    that race here compute the same thing)."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _field_value(hint: Any, value: Any, where: str) -> Any:
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
    hint = _without_none(hint)
    if value is None and optional:
        return None
    if inspect.isclass(hint) and dataclasses.is_dataclass(hint):
        return _dataclass_of(hint, value, where)
    item = _dataclass_items(hint)
    if item is not None:
        if not isinstance(value, list):
            raise PayloadMismatch(f"the payload does not fit {where}: expected an array, got {_json_name(value)}")
        return [_dataclass_of(item, v, f"{where}[{n}]") for n, v in enumerate(value)]
    accepted = _JSON_CHECKED.get(hint) or _CONTAINERS.get(typing.get_origin(hint) or hint)
    if accepted is None:
        return value  # a type JSON has no form for: as stored
    wanted = accepted if isinstance(accepted, tuple) else (accepted,)
    is_bool_for_number = isinstance(value, bool) and bool not in wanted
    if not isinstance(value, wanted) or is_bool_for_number:
        raise PayloadMismatch(f"the payload does not fit {where}: expected {_type_name(hint)}, got {_json_name(value)}")
    return value


def _dataclass_items(hint: Any) -> type[Any] | None:
    """X of `list[X]` when X is a dataclass."""
    if typing.get_origin(hint) is not list:
        return None
    (item,) = typing.get_args(hint) or (None,)
    return item if inspect.isclass(item) and dataclasses.is_dataclass(item) else None


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))


def _json_name(value: Any) -> str:
    names = {
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "an array",
        dict: "an object",
    }
    return "null" if value is None else names.get(type(value), type(value).__name__)
