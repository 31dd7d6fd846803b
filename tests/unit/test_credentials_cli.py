"""`jobsched credentials set` takes the value from a pipe, or from a prompt that does not echo it (typed twice),
never from its arguments."""

from __future__ import annotations

import io

import pytest

from jobsched.commands.credentials import NoValue, read_value
from jobsched.commands.parser import parser


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_piped_value_loses_one_line_break_only() -> None:
    assert read_value(io.StringIO("s3cret\n")) == "s3cret"
    assert read_value(io.StringIO("s3cret\r\n")) == "s3cret"
    assert read_value(io.StringIO("s3cret")) == "s3cret"
    with pytest.raises(NoValue, match="no value given"):
        read_value(io.StringIO(""))


def test_at_a_terminal_the_value_is_typed_twice_unechoed() -> None:
    typed = iter(["s3cret", "s3cret"])
    prompts: list[str] = []

    def prompt(text: str) -> str:
        prompts.append(text)
        return next(typed)

    assert read_value(Terminal(), prompt) == "s3cret"
    assert prompts == ["value: ", "again: "]
    differing = iter(["one", "two"])
    with pytest.raises(NoValue, match="differ"):
        read_value(Terminal(), lambda _: next(differing))
    with pytest.raises(NoValue, match="no value given"):
        read_value(Terminal(), lambda _: "")


def test_set_takes_a_name_and_no_value_argument() -> None:
    args = parser("jobsched").parse_args(["credentials", "set", "billing-token"])
    assert (args.group, args.command, args.name) == ("credentials", "set", "billing-token")
    with pytest.raises(SystemExit):
        parser("jobsched").parse_args(["credentials", "set", "billing-token", "s3cret"])
