"""`jobsched workflows` is an operator command group (jobsched/commands); what its commands print against a real
API is tested in tests/e2e/test_operator_cli.py."""

from __future__ import annotations

import pytest

from jobsched.commands import GROUPS, is_operator_command
from jobsched.commands.parser import parser

WORKFLOW_ID = "6650f0c2a1b2c3d4e5f60718"


def test_workflows_is_an_operator_group() -> None:
    assert {"workflows", "batches"} <= GROUPS
    assert is_operator_command(["--output", "json", "workflows", "list"])
    args = parser("jobsched").parse_args(["workflows", "get", WORKFLOW_ID, "-o", "json"])
    assert (args.group, args.command, args.workflow_id, args.output) == ("workflows", "get", WORKFLOW_ID, "json")
    with pytest.raises(SystemExit):
        parser("jobsched").parse_args(["workflows", "list", "--status", "completed"])  # a job's status
