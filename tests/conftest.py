"""What every test shares.

The CLI sizes its tables to ``COLUMNS`` when that is set, and wide when its output is not
a terminal. pytest-xdist's workers start with ``COLUMNS=80`` and ``LINES=24`` in their
environment, so without this the in-process CLI tests' tables would depend on how pytest
was started (truncated ids under ``-n``, whole ones without). Tests that want a width set
it themselves.

The LangGraph conformance reports (`_reports`) are printed at the end of the run; under
pytest-xdist each worker hands its reports to the controller, which prints them.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from ._reports import CONFORMANCE, print_reports

for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:  # a pytest-xdist worker: what it reported goes to the controller
        output["conformance"] = dict(CONFORMANCE)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: the controller, a worker done
def pytest_testnodedown(node: Any, error: Any) -> None:
    CONFORMANCE.update(getattr(node, "workeroutput", {}).get("conformance", {}))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    print_reports(terminalreporter)
