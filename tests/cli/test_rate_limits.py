"""``flowledger limits set|show|clear --source``: call rate limits of registered sources;
bad input is a usage error naming the option, with nothing written."""

from __future__ import annotations

import json
import sys

import pytest

from .conftest import Cli


def register(cli: Cli) -> None:
    document = {
        "format": "flowledger.source/v1",
        "name": "paid",
        "stdio": {"command": sys.executable, "args": ["-m", "tests.deploy.runs.counting_server"]},
    }
    path = cli.cwd / "paid.json"
    path.write_text(json.dumps(document))
    added = cli("source", "add", str(path))
    assert added.exit_code == 0, added.output


def test_a_source_limit_is_set_shown_and_cleared(cli: Cli) -> None:
    register(cli)
    result = cli.json("limits", "set", "--source", "paid", "--calls", "60", "--per", "1m")
    assert result == {"scope": "source/paid", "calls": 60, "per_seconds": 60.0}
    shown = cli.json("limits", "show")
    assert shown == {
        "limits": [{"scope": "source/paid", "calls": 60, "per_seconds": 60.0, "in_window": 0}]
    }
    assert "60 calls per 60s" in cli("limits", "show").stdout
    assert cli("limits", "clear", "--source", "paid").exit_code == 0
    assert cli.json("limits", "show") == {"limits": []}


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--source", "paid", "--calls", "0", "--per", "60s"], "--calls"),
        (["--source", "paid", "--calls", "-3", "--per", "60s"], "--calls"),
        (["--source", "paid", "--calls", "10001", "--per", "60s"], "--calls"),
        (["--source", "paid", "--calls", "5", "--per", "0s"], "--per"),
        (["--source", "paid", "--calls", "5", "--per", "-1m"], "--per"),
        (["--source", "paid", "--calls", "5", "--per", "often"], "--per"),
        (["--source", "nobody", "--calls", "5", "--per", "60s"], "--source"),
    ],
)
def test_bad_source_limits_are_usage_errors_naming_the_option(
    cli: Cli, args: list[str], option: str
) -> None:
    register(cli)
    result = cli("limits", "set", *args)
    assert result.exit_code == 2, result.output
    assert option in result.output
    assert "Traceback" not in result.output
    assert cli.json("limits", "show") == {"limits": []}
