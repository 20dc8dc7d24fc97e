"""Generated artifacts with random ``retry`` / ``on_error`` combinations (Hypothesis):
each is refused with placed issues (the artifact, or the deployment's retry table for
the tool's real annotations), or it runs against the flaky test server, behaving as
generated, to a terminal state whose trace follows the table in docs/deploy.md."""

from __future__ import annotations

import asyncio
import functools
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowledger.deploy import ArtifactValidationError, StdioSource, validate_artifact
from flowledger.deploy.artifacts.failures import FAILURE_KINDS, may_retry
from flowledger.deploy.deployments.validation import call_sites, retry_table_diagnostics
from flowledger.deploy.sources.session import probe
from flowledger.deploy.sources.tool_info import ToolInfo

from .runs.failures_app import one_call
from .servers import REPO
from .test_failures import lines, run_one

KINDS = st.sampled_from([*FAILURE_KINDS, "bogus"])


def flaky(folder: Path) -> StdioSource:
    return StdioSource(
        sys.executable,
        ["-m", "tests.deploy.runs.flaky_server"],
        env={"FLAKY_DIR": str(folder)},
        cwd=str(REPO),
    )


@functools.cache
def listed() -> dict[str, ToolInfo]:
    """The flaky server's tools as it lists them (their real annotations)."""
    with tempfile.TemporaryDirectory() as folder:
        _, tools = asyncio.run(probe(flaky(Path(folder)), seconds=60))
    return {tool.name: tool for tool in tools}


cases = st.fixed_dictionaries(
    {
        "tool": st.sampled_from(["append", "peek"]),
        "errors": st.integers(0, 2),  # the first n calls answer isError
        "refused": st.integers(0, 2),  # the first n launches exit before the handshake
        "retry": st.none()
        | st.fixed_dictionaries(
            {
                "attempts": st.integers(0, 12),
                "on": st.lists(KINDS, max_size=3),
                "backoff": st.just({"initial": 0}),
            }
        ),
        "on_error": st.none()
        | st.fixed_dictionaries(
            {
                "next": st.sampled_from(["failed", "failed", "nowhere"]),
                "kinds": st.none() | st.lists(KINDS, max_size=3),
            }
        ),
    }
)


def refusals(case: dict[str, Any]) -> set[str]:
    """The places the generated values must be refused at (an independent reading of
    the rules: bounds, known kinds, each once, a target that exists)."""
    places = set()
    retry, on_error = case["retry"], case["on_error"]
    if retry is not None:
        if not 1 <= retry["attempts"] <= 10:
            places.add("nodes.call.retry.attempts")
        if not retry["on"]:
            places.add("nodes.call.retry.on")
        for index, kind in enumerate(retry["on"]):
            if kind not in FAILURE_KINDS or kind in retry["on"][:index]:
                places.add(f"nodes.call.retry.on[{index}]")
    if on_error is not None:
        if on_error["next"] == "nowhere":
            places.add("nodes.call.on_error.next")
        for index, kind in enumerate(on_error["kinds"] or []):
            if kind not in FAILURE_KINDS or kind in on_error["kinds"][:index]:
                places.add(f"nodes.call.on_error.kinds[{index}]")
    return places


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=cases)
def test_generated_failure_policies_validate_and_follow_the_table(case: dict[str, Any]) -> None:
    arguments = {"text": "${ input.text }"} if case["tool"] == "append" else {}
    on_error = None
    if case["on_error"] is not None:
        on_error = {"next": case["on_error"]["next"]}
        if case["on_error"]["kinds"] is not None:
            on_error["kinds"] = case["on_error"]["kinds"]
    document = one_call(case["tool"], arguments, retry=case["retry"], on_error=on_error)
    expected = refusals(case)
    try:
        validated = validate_artifact(document)
    except ArtifactValidationError as refused:
        places = {issue.place for issue in refused.issues}
        assert expected, refused.issues
        assert places == expected, (places, expected)
        assert all(issue.hint for issue in refused.issues if issue.code != "duplicate")
        return
    assert not expected
    info = listed()[case["tool"]]
    repeatable = info.repeatable
    table = retry_table_diagnostics(call_sites([validated]), "flaky", info, declared=False)
    retry_on = set(case["retry"]["on"]) if case["retry"] else set()
    if any(not may_retry(kind, repeatable) for kind in retry_on):
        assert [d.code for d in table] and all(d.code == "retry_not_allowed" for d in table)
        assert all(d.message.startswith("flaky_call.nodes.call.retry.on: ") for d in table)
        return
    assert table == []
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        if case["errors"]:
            (work / "error-upto").write_text(str(case["errors"]))
        if case["refused"]:
            (work / "refuse-launches").write_text(str(case["refused"]))
        got, state, trace = asyncio.run(run_one("memory://", document, flaky(work)))
        calls = len(lines(work / ("calls" if case["tool"] == "append" else "peeks")))
    assert got["run_status"] in {"completed", "failed"}, got
    attempts = case["retry"]["attempts"] if case["retry"] else 1
    retried, final = trace[:-1], trace[-1]
    for number, entry in enumerate(retried, start=1):  # each retried by the table
        assert entry.status == "error" and entry.failure in retry_on, trace
        assert may_retry(entry.failure, repeatable)
        assert entry.attempt == number
    assert len(trace) <= attempts
    reached = [e for e in trace if e.failure != "unavailable"]
    assert calls == len(reached)  # a call per attempt that reached the server
    if final.status == "ok":
        assert got["status_summary"] == "outcome done"
    elif final.status == "routed":
        kinds = case["on_error"]["kinds"]
        assert kinds is None or final.failure in kinds
        assert (state["kind"], got["status_summary"]) == (final.failure, "outcome failed")
    else:
        assert final.status == "error" and got["run_status"] == "failed"
        kinds = case["on_error"]["kinds"] if case["on_error"] else []
        assert case["on_error"] is None or (kinds is not None and final.failure not in kinds)
    if final.status != "ok" and final.failure in retry_on and may_retry(final.failure, repeatable):
        assert len(trace) == attempts  # a retryable failure ends only when attempts run out
