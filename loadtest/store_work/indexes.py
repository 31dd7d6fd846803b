"""Which index entries a write makes, from the indexes' definitions (as `listIndexes` answers them) and the
document before and after the write, under the two ways servers keep indexes:

- MongoDB writes an entry where a key changed: an index whose key (or partial-filter membership) is the same
  before and after is not touched.
- DocumentDB (FerretDB 2) keeps a document in one PostgreSQL column that every index covers, so an update is a
  new row version that every index it qualifies for gets an entry for (PostgreSQL's heap-only updates need no
  indexed column changed): every index but the partial ones whose filter the new document fails.

Entries a delete removes are not counted: MongoDB removes them at once, PostgreSQL when it vacuums.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

Doc = dict[str, Any]
MISSING = object()
COMPARISONS = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


@dataclass(frozen=True)
class Index:
    name: str
    fields: tuple[str, ...]
    partial: Doc | None

    @classmethod
    def from_spec(cls, spec: Doc) -> Index:
        return cls(str(spec["name"]), tuple(spec["key"]), spec.get("partialFilterExpression"))

    def entries(self, doc: Doc | None) -> frozenset[tuple[Any, ...]]:
        """The keys `doc` has in this index (several when a field is an array; none when it is filtered out)."""
        if doc is None or (self.partial is not None and not matches(doc, self.partial)):
            return frozenset()
        per_field = [values_at(doc, field) for field in self.fields]
        return frozenset(tuple(_comparable(v) for v in key) for key in itertools.product(*per_field))


def values_at(doc: Doc, path: str) -> list[Any]:
    """The values of a dotted path, one per element where an array is met; [None] when absent (indexed as null)."""
    values: list[Any] = [doc]
    for part in path.split("."):
        found: list[Any] = []
        for value in values:
            if isinstance(value, list):
                found.extend(item.get(part, MISSING) for item in value if isinstance(item, dict))
            elif isinstance(value, dict):
                found.append(value.get(part, MISSING))
        values = found
    flat = [v for value in values for v in (value if isinstance(value, list) and value else [value])]
    return [None if v is MISSING else v for v in flat] or [None]


def _comparable(value: Any) -> Any:
    return repr(value) if isinstance(value, (dict, list)) else value


def lookup(doc: Doc, path: str) -> Any:
    value: Any = doc
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def matches(doc: Doc, query: Doc) -> bool:
    """Whether `doc` satisfies a partial filter expression: equality, $eq, $exists, $gt/$gte/$lt/$lte, $in and
    $and (what partial filters may hold), at the top level or under $and."""
    for key, condition in query.items():
        if key == "$and":
            if not all(matches(doc, part) for part in condition):
                return False
            continue
        value = lookup(doc, key)
        is_operators = isinstance(condition, dict) and bool(condition) and next(iter(condition)).startswith("$")
        if not is_operators:
            if value is MISSING or value != condition:
                return False
        elif not all(_holds(value, op, operand) for op, operand in condition.items()):
            return False
    return True


def _holds(value: Any, op: str, operand: Any) -> bool:
    if op == "$exists":
        return (value is not MISSING) == bool(operand)
    if value is MISSING:
        return False
    if op == "$eq":
        return bool(value == operand)
    if op == "$in":
        return value in operand
    if op not in COMPARISONS:
        raise ValueError(f"a partial filter operator this model does not know: {op}")
    try:
        return bool(COMPARISONS[op](value, operand))
    except TypeError:  # values of different types do not compare (MongoDB's type bracketing)
        return False


def entries_written(indexes: list[Index], before: Doc | None, after: Doc) -> tuple[int, int]:
    """(MongoDB, DocumentDB): the index entries one write of a document makes."""
    mongodb = sum(len(index.entries(after) - index.entries(before)) for index in indexes)
    documentdb = sum(len(index.entries(after)) for index in indexes)
    return mongodb, documentdb
