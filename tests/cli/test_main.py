"""``python -m flowledger`` and the console script's entry point."""

from __future__ import annotations

from flowledger import __version__

from .conftest import Cli


def test_python_dash_m_help(cli: Cli) -> None:
    done = cli.process("--help")
    assert done.returncode == 0, done.stderr
    for command in ("demo", "definitions", "start", "runs", "history", "resume", "cancel", "mcp"):
        assert command in done.stdout
    assert "Traceback" not in done.stderr


def test_version(cli: Cli) -> None:
    result = cli("--version", db=False)
    assert result.exit_code == 0
    assert result.stdout.strip() == f"flowledger {__version__}"


def test_every_command_has_help(cli: Cli) -> None:
    for command in (
        ["demo"],
        ["definitions"],
        ["start"],
        ["runs", "list"],
        ["runs", "show"],
        ["history"],
        ["resume"],
        ["cancel"],
        ["mcp"],
    ):
        result = cli(*command, "--help", db=False)
        assert result.exit_code == 0, (command, result.output)
        assert "--db" in result.stdout


def test_no_arguments_shows_help(cli: Cli) -> None:
    result = cli(db=False)
    assert result.exit_code in (0, 2)
    assert "demo" in result.output
