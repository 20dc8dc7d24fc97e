"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``,
the one LangGraph's SQLite and PostgreSQL savers run) against FlowledgerSaver on every
backend: every base capability and the three optional ones (``delete_for_runs``,
``copy_thread``, ``prune``) must be detected and pass. The reports are printed at the
end of the test run (tests/_reports.py), from every pytest-xdist worker."""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from flowledger.integrations.langgraph import FlowledgerSaver

from ..._postgres import postgres_url
from ..._reports import CONFORMANCE


async def test_langgraph_conformance_suite(store_url: str, tmp_path: Path) -> None:
    backend = store_url.partition(":")[0]
    files = itertools.count()

    @checkpointer_test(name=f"FlowledgerSaver ({backend})")
    async def fresh_saver() -> AsyncIterator[BaseCheckpointSaver[int]]:
        # The suite asks for a fresh checkpointer per capability: a store of its own.
        with contextlib.ExitStack() as stack:
            if store_url.startswith("sqlite"):
                url = f"sqlite:///{tmp_path / f'conformance-{next(files)}.db'}"
            elif store_url.startswith("postgres"):
                url = stack.enter_context(postgres_url())
            else:
                url = store_url
            async with FlowledgerSaver.from_url(url) as saver:
                yield saver

    report = await validate(fresh_saver)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        report.print_report()
    counts = ", ".join(
        f"{name} {result.tests_passed}/{result.tests_passed + result.tests_failed}"
        for name, result in sorted(report.results.items())
    )
    CONFORMANCE[backend] = printed.getvalue() + f"  tests passed per capability: {counts}\n"

    assert {cap.value for cap in ALL_CAPABILITIES} == set(report.results)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert not failures, failures
    assert all(r.detected and r.passed for r in report.results.values()), report.to_dict()
    assert report.passed_all() and report.conformance_level() == "FULL"


def test_the_report_reaches_the_log_from_a_pytest_xdist_worker() -> None:
    """The suite's report is printed by the process that writes the log: under ``-n`` the
    test runs in a worker, which must hand the report over (it did not, once)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            "-q",
            "tests/integrations/langgraph/test_conformance.py",
            "-k",
            "suite and memory",
        ],
        cwd=root,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Checkpointer Validation: FlowledgerSaver (memory)" in done.stdout, done.stdout
    assert "Result: FULL (8/8)" in done.stdout
