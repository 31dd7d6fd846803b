"""What a handler's payload annotation makes of a payload, however the handler is written (jobsched/payloads.py,
JobType.is_async): annotations postponed or naming a class defined later, Optional and Annotated, partials,
callable objects and decorated functions."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import pytest

from jobsched import JobTypes, PayloadMismatch, testing
from jobsched.payloads import with_article

if TYPE_CHECKING:
    from jobsched import HandlerContext  # a name only type checkers see: the payload's type still resolves

jobs = JobTypes()


@jobs.handler("later")
def uses_a_class_defined_below(payload: Later, ctx: HandlerContext) -> str:
    return payload.name


@dataclass
class Later:
    name: str


@dataclass
class Line:
    sku: str
    quantity: int


@dataclass
class Order:
    lines: list[Line]
    first: Line
    note: str | None = None
    tags: list[str] = field(default_factory=list)


@jobs.handler("optional")
def takes_an_optional(payload: Order | None, ctx: HandlerContext) -> Any:
    return payload


@jobs.handler("annotated")
def takes_an_annotated(payload: Annotated[Later, "metadata"], ctx: HandlerContext) -> str:
    return payload.name


def test_a_forward_reference_resolves_at_first_use() -> None:
    assert uses_a_class_defined_below.payload.kind == "dataclass"
    assert testing.run(uses_a_class_defined_below, Later("x")) == "x"


def test_optional_and_annotated_payload_types_are_their_class() -> None:
    assert takes_an_optional.payload.type is Order
    assert takes_an_annotated.payload.type is Later
    order = testing.run(takes_an_optional, Order(lines=[Line("a", 1)], first=Line("b", 2)))
    assert order == Order(lines=[Line("a", 1)], first=Line("b", 2))  # nested dataclasses come back as such
    assert isinstance(order.first, Line)
    with pytest.raises(PayloadMismatch, match=r"Order.first.quantity: expected int, got a string"):
        takes_an_optional.fn({"lines": [], "first": {"sku": "a", "quantity": "1"}}, testing.context())


def test_partials_callable_objects_and_decorated_functions_keep_their_payload_type_and_asynchrony() -> None:
    def report(prefix: str, payload: Later, ctx: HandlerContext) -> str:
        return prefix + payload.name

    class AsyncHandler:
        async def __call__(self, payload: Later, ctx: HandlerContext) -> str:
            return "object " + payload.name

    def logged(function: Callable[[Later, HandlerContext], Awaitable[str]]) -> Callable[..., Awaitable[str]]:
        @functools.wraps(function)
        def wrapper(payload: Later, ctx: HandlerContext) -> Awaitable[str]:
            return function(payload, ctx)

        return wrapper

    async def wrapped(payload: Later, ctx: HandlerContext) -> str:
        return "wrapped " + payload.name

    collection = JobTypes()
    partial = collection.handler("partial")(functools.partial(report, "p:"))
    callable_object = collection.handler("object")(AsyncHandler())
    decorated = collection.handler("decorated")(logged(wrapped))
    assert (partial.payload.kind, partial.is_async) == ("dataclass", False)
    assert (callable_object.payload.kind, callable_object.is_async) == ("dataclass", True)
    assert (decorated.payload.kind, decorated.is_async) == ("dataclass", True)
    assert testing.run(partial, Later("x")) == "p:x"
    assert testing.run(callable_object, Later("x")) == "object x"
    assert testing.run(decorated, Later("x")) == "wrapped x"


def test_a_plain_handler_that_returns_a_coroutine_fails_instead_of_succeeding_unrun() -> None:
    async def hidden(payload: dict[str, Any], ctx: HandlerContext) -> None:
        raise AssertionError("never run")

    def not_marked(payload: dict[str, Any], ctx: HandlerContext) -> Any:  # a decorator that lost __wrapped__
        return hidden(payload, ctx)

    job_type = JobTypes().handler("hidden")(not_marked)
    assert not job_type.is_async
    with pytest.raises(TypeError, match="returned a coroutine"):
        testing.run(job_type, {})


@dataclass
class Secret:
    name: str
    key: InitVar[str]


def test_a_dataclass_with_init_vars_is_refused_as_a_payload_type() -> None:
    def handler(payload: Secret, ctx: HandlerContext) -> None: ...

    job_type = JobTypes().handler("secret")(handler)
    with pytest.raises(TypeError, match="InitVar fields"):
        job_type.encode(Secret("n", "k"))


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("Email", "an Email"),
        ("Invoice", "an Invoice"),
        ("Order", "an Order"),
        ("Update", "an Update"),
        ("Report", "a Report"),
        ("User", "a User"),  # a vowel letter, a consonant sound
        ("UnitOfWork", "a UnitOfWork"),
        ("UninstallRequest", "an UninstallRequest"),
        ("OneOffJob", "a OneOffJob"),
        ("Hour", "an Hour"),  # a consonant letter, a vowel sound
        ("HTTPRequest", "an HTTPRequest"),  # an acronym: by the name of its first letter
        ("SMS", "an SMS"),
        ("URLCheck", "a URLCheck"),
        ("X", "an X"),
    ],
)
def test_a_class_name_gets_the_article_it_is_read_with(name: str, said: str) -> None:
    assert with_article(name) == said


@dataclass
class Email:
    to: str


@jobs.handler("send-email")
def send_email(payload: Email, ctx: HandlerContext) -> str:
    return payload.to


def test_a_payload_of_another_type_is_refused_in_good_english() -> None:
    with pytest.raises(TypeError, match=r"^the payload must be an Email, not dict$"):
        send_email.encode({"to": "ada@example.com"})  # type: ignore[arg-type]
