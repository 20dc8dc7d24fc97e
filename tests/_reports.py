"""What tests report at the end of a run: the LangGraph conformance suite's report per
backend (tests/integrations/langgraph/test_conformance.py), printed in the CI log.

A test stores its report in `CONFORMANCE` (backend -> text). Under pytest-xdist the test
runs in a worker process: each worker hands what it stored to the controller when it
finishes, and the controller prints them all (the hooks in tests/conftest.py)."""

from __future__ import annotations

from typing import Any

CONFORMANCE: dict[str, str] = {}


def print_reports(terminalreporter: Any) -> None:
    if not CONFORMANCE:
        return
    terminalreporter.write_sep(
        "=", "LangGraph checkpoint conformance (langgraph-checkpoint-conformance)"
    )
    for backend, text in sorted(CONFORMANCE.items()):
        terminalreporter.write_line(f"backend: {backend}")
        for line in text.rstrip().splitlines():
            terminalreporter.write_line(line)
