"""JSON in and out: strict parsing of what clients send, and rendering that never fails.

A value is accepted only if it comes back out exactly as it went in, on every store: finite numbers, integers
within 64 bits, strings without lone surrogates or NUL characters, object keys that are unique, and nesting no
deeper than MAX_DEPTH. Anything else is refused with a message for the client (JsonRejected).

Rendering (responses, bus messages) takes what a store returns, including values written by older versions
that JSON cannot carry, and always produces valid UTF-8 JSON: non-finite numbers become null, lone surrogates
become U+FFFD, and nesting deeper than RENDER_MAX_DEPTH becomes null.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

MAX_DEPTH = 32  # levels of nesting in a request body; the body object itself is level 1
RENDER_MAX_DEPTH = 200  # what rendering keeps of a stored value; far below the interpreter's recursion limit
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a Python str every surrogate code point is a lone one
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JsonRejected(ValueError):
    """The body is not JSON this API accepts; the message says why, for the client."""


def parse_request(raw: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The value of a request body, or JsonRejected."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raise JsonRejected("malformed JSON: the body starts with a byte order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonRejected(f"malformed JSON: the body is not UTF-8 (invalid byte at offset {exc.start})") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except JsonRejected:
        raise
    except json.JSONDecodeError as exc:
        raise JsonRejected(f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg.lower()}") from None
    except ValueError:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        raise JsonRejected("an integer with thousands of digits is outside the 64-bit range a store can hold") from None
    except RecursionError:
        raise JsonRejected(f"JSON nested deeper than {max_depth} levels") from None
    check_value(value, max_depth=max_depth)
    return value


def check_value(value: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse what a store could not carry back out: non-finite numbers, integers past 64 bits, strings with
    lone surrogates or NUL, nesting deeper than `max_depth` (parsing has refused the rest)."""
    _check_scalar(value, None)
    for container, depth, trail in containers(value):
        if depth > max_depth:
            raise JsonRejected(f"JSON nested deeper than {max_depth} levels (at {describe_trail(trail)})")
        if isinstance(container, dict):
            for key, item in container.items():
                _check_string(key, trail, key_of=True)
                _check_scalar(item, (trail, key))
        else:
            for index, item in enumerate(container):
                _check_scalar(item, (trail, index))


def encoded_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON of a value: the size a store keeps, whatever the script of the text."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of any value a store returns (see the module docstring for the replacements)."""
    try:
        return _dumps(value)
    except (ValueError, UnicodeEncodeError, RecursionError):
        return _dumps(renderable(value))


def renderable(value: Any, depth: int = 1) -> Any:
    """`value` with what JSON cannot carry replaced: non-finite numbers and too-deep nesting by None, lone
    surrogates by U+FFFD."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict | list | tuple) and depth > RENDER_MAX_DEPTH:
        return None
    if isinstance(value, dict):
        return {renderable(str(k)): renderable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [renderable(v, depth + 1) for v in value]
    return value


def storable_text(text: str) -> str:
    """`text` with what no store can hold (lone surrogates, NUL) replaced by U+FFFD: for text we write that did
    not come from a client, such as a handler's error message."""
    return _UNSTORABLE.sub("\ufffd", text)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


Trail = tuple[Any, str | int] | None  # (parent's trail, key or index): a path built only when reported


def containers(value: Any, trail: Trail = None) -> Iterator[tuple[dict[str, Any] | list[Any], int, Trail]]:
    """Every object and array inside `value` (itself included) with its nesting depth and trail, without
    recursion; scalars are skipped, which keeps this fast on large arrays of numbers."""
    stack: list[tuple[Any, int, Trail]] = [(value, 1, trail)]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict):
            yield item, depth, where
            stack.extend((v, depth + 1, (where, k)) for k, v in item.items() if isinstance(v, dict | list))
        elif isinstance(item, list):
            yield item, depth, where
            stack.extend((v, depth + 1, (where, i)) for i, v in enumerate(item) if isinstance(v, dict | list))


def describe_trail(trail: Trail, limit: int = 80) -> str:
    parts: list[str] = []
    while trail is not None:
        trail, key = trail
        parts.append(f"[{key}]" if isinstance(key, int) else f".{shorten(key, 32)}")
    return shorten("".join(reversed(parts)).lstrip(".") or "the top level", limit)


def check_field_names(value: Any, name: str) -> None:
    """Refuse object keys a document database reserves: MongoDB reads a leading `$` as an operator and a `.`
    as a path into nested documents, so such a key can be neither stored reliably nor queried."""
    for container, _, trail in containers(value, (None, name)):
        if isinstance(container, dict):
            for key in container:
                if key.startswith("$") or "." in key:
                    where = describe_trail(trail)
                    raise JsonRejected(f"the key {shorten(key, 32)!r} in {where} starts with '$' or contains '.'")


def _check_scalar(item: Any, trail: Trail) -> None:
    kind = type(item)  # exact types: bool is an int subclass, and JSON gives only these
    if kind is str:
        _check_string(item, trail)
    elif kind is int and not INT64_MIN <= item <= INT64_MAX:
        raise JsonRejected(f"the integer at {describe_trail(trail)} is outside the 64-bit range a store can hold")
    elif kind is float and not math.isfinite(item):
        raise JsonRejected(f"the number at {describe_trail(trail)} is too large for a 64-bit float")


def _check_string(text: str, trail: Trail, *, key_of: bool = False) -> None:
    if text.isascii() and "\x00" not in text:
        return
    where = f"a key of {describe_trail(trail)}" if key_of else describe_trail(trail)
    if "\x00" in text:
        raise JsonRejected(f"a NUL character (\\u0000) in {where} cannot be stored")
    if _SURROGATE.search(text):
        raise JsonRejected(f"a lone surrogate (an unpaired \\ud800-\\udfff escape) in {where} is not text")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonRejected(f"duplicate key {shorten(key)!r} in a JSON object")
            seen.add(key)
    return result


def _no_constant(name: str) -> Any:
    raise JsonRejected(f"{name} is not a JSON number")


def shorten(text: str, limit: int = 64) -> str:
    """At most `limit` characters of client input, for echoing it in an error message."""
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"
