"""What bounded evaluation of artifact expressions costs, and what it buys.

    python bench/expression_eval.py [--rounds 1000] [--chain 200] [--repeat 3] [--before REV]

1. **Per-evaluation cost.** Representative templates (a field, a ``join``, an object of
   three expressions, a condition, a filter and multi-select over 100 items) are
   evaluated ``--rounds`` times each, interleaved, in three ways: the unbounded
   evaluator as it was at git revision ``--before`` (jmespath's own interpreter and the
   result copy; its ``expressions.py`` is loaded from ``git show``), the bounded one
   called directly, and the bounded one as a run calls it: awaited from an event loop
   through ``off_loop`` (a worker thread). Printed: the median per evaluation of each,
   and the medians' differences (the cost of the accounting; the cost of the thread hop).
2. **The worst cases now.** The doubling chains and an expression that does nothing but
   work, each refused at its limit: the time to the refusal, and the steps spent.
3. **The event loop meanwhile.** While a worker evaluates the work-bound expression, a
   coroutine on the loop asks to wake every millisecond: its largest and median lateness.
   Evaluations hold the GIL, so the loop waits for its switch interval (5 ms) at most per
   wake-up rather than for the whole evaluation.
4. **A node, end to end.** ``bench/deploy_nodes.py``'s chain of ``--chain`` `set` nodes
   (``count: ${ sum([state.count, `1`]) }``) run through the supervisor on SQLite, in a
   subprocess on the code at ``--before`` (``git archive``) and on this checkout,
   alternated ``--repeat`` times: the median of the set nodes' own time (from the run's
   trace: the evaluation, its thread hop and the trace entry) and the wall time per node.

Everything runs in one process; nothing here is a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

# The flowledger modules are imported where they are used: part 4 runs this file on the
# code at --before too, which has none of the bounded evaluation's modules.

ROOT = Path(__file__).resolve().parents[1]
BASE = "4a5e218"  # main before bounded evaluation
ITEMS = [{"name": f"item {i}", "price": i % 97, "tags": ["a", "b"]} for i in range(100)]
SCOPE = {
    "input": {"city": "Lyon", "items": ITEMS},
    "state": {"sections": ["Weather: sunny", "News: calm"], "score": 0.7, "go": True},
    "result": {"text": "sunny", "structured": {"titles": ["calm", "quiet"]}},
}
TEMPLATES: dict[str, Any] = {
    "field": "${ input.city }",
    "join": "${ [join('', ['News: ', join('; ', result.structured.titles)])] }",
    "object of 3": {
        "city": "${ input.city }",
        "briefing": "${ join(' | ', state.sections) }",
        "ok": "${ state.go }",
    },
    "condition": "${ state.score > `0.5` }",
    "100 items": "${ input.items[?price > `50`].{name: name, price: price} }",
}
WORST: dict[str, str] = {
    "join doubling x64": "input.city" + " | join('', [@, @])" * 64,
    "to_string doubling x64": "input.city" + " | to_string([@, @])" * 64,
    "list doubling x64, to_string": "input.city" + " | [@, @]" * 64 + " | to_string(@)",
}
WORK = "`true`"
for _ in range(7):
    WORK = f"[@, @, @, @, @, @, @, @, @, @][?{WORK}]"
WORST["work only (10**7 visits)"] = "input | " + WORK


def compiled(value: Any, module: Any = None) -> Any:
    from flowledger.deploy.artifacts.expressions import SCOPE_NAMES, compile_template

    issues: list[Any] = []
    compile = compile_template if module is None else module.compile_template
    found = compile(value, ("bench",), frozenset(SCOPE_NAMES), issues)
    assert found is not None, issues
    return found


def before_module(rev: str) -> ModuleType | None:
    """``expressions.py`` at ``rev``, loaded inside the package (its relative imports
    resolve to today's errors and limits, which kept what it uses)."""
    path = "src/flowledger/deploy/artifacts/expressions.py"
    try:
        text = subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"(no baseline: git show {rev}:{path} failed: {exc})", file=sys.stderr)
        return None
    name = "flowledger.deploy.artifacts._expressions_before"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "flowledger.deploy.artifacts"
    sys.modules[name] = module
    exec(compile(text, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def per_call(fn: Callable[[Any], Any], inner: int = 20) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn(SCOPE)
    return (time.perf_counter() - start) / inner


async def per_await(fn: Callable[[Any], Any], inner: int = 20) -> float:
    from flowledger.deploy.runs.offload import off_loop

    start = time.perf_counter()
    for _ in range(inner):
        await off_loop(fn, SCOPE)
    return (time.perf_counter() - start) / inner


async def costs(rounds: int, before: ModuleType | None) -> None:
    print("\n1. per evaluation, median of", rounds, "rounds (of 20 calls each), in us")
    print(
        f"{'template':<14}{'before':>10}{'bounded':>10}{'off loop':>10}"
        f"{'accounting':>12}{'thread hop':>12}"
    )
    for label, value in TEMPLATES.items():
        new = compiled(value)
        old = compiled(value, before) if before is not None else None
        samples: dict[str, list[float]] = {"before": [], "bounded": [], "off": []}
        for _ in range(rounds):
            if old is not None:
                samples["before"].append(per_call(old.evaluate))
            samples["bounded"].append(per_call(new.evaluate))
            samples["off"].append(await per_await(new.evaluate))
        medians = {
            key: statistics.median(found) * 1e6 if found else float("nan")
            for key, found in samples.items()
        }
        print(
            f"{label:<14}{medians['before']:>10.1f}{medians['bounded']:>10.1f}"
            f"{medians['off']:>10.1f}{medians['bounded'] - medians['before']:>+12.1f}"
            f"{medians['off'] - medians['bounded']:>+12.1f}"
        )


def worst_cases() -> None:
    from flowledger.deploy.artifacts.budget import EvaluationBudget
    from flowledger.deploy.artifacts.errors import ExpressionLimitError

    print("\n2. the worst cases, each refused at its limit")
    print(f"{'expression':<32}{'limit':>8}{'at':>30}{'steps':>10}{'ms':>9}")
    for label, source in WORST.items():
        template = compiled(f"${{ {source} }}")
        budget = EvaluationBudget()
        start = time.perf_counter()
        try:
            template.evaluate(SCOPE, budget)
        except ExpressionLimitError as exc:
            limit, node = exc.limit, exc.node
        else:
            limit, node = "none", "-"
        elapsed = (time.perf_counter() - start) * 1e3
        print(f"{label:<32}{limit:>8}{node:>30}{budget.steps:>10,}{elapsed:>9.0f}")


async def loop_lateness() -> None:
    from flowledger.deploy.artifacts.errors import ExpressionLimitError
    from flowledger.deploy.runs.offload import off_loop

    template = compiled(f"${{ {WORST['work only (10**7 visits)']} }}")
    late: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            asked = loop.time()
            await asyncio.sleep(0.001)
            late.append(loop.time() - asked - 0.001)

    stop = asyncio.Event()
    ticks = asyncio.create_task(ticker(stop))
    start = time.perf_counter()
    with contextlib.suppress(ExpressionLimitError):
        await off_loop(template.evaluate, SCOPE)
    elapsed = time.perf_counter() - start
    stop.set()
    await ticks
    print(
        "\n3. the loop while a worker evaluates the work-bound expression"
        f" ({elapsed * 1e3:.0f} ms): {len(late)} wake-ups of 1 ms, late by median"
        f" {statistics.median(late) * 1e3:.2f} ms, at most {max(late) * 1e3:.2f} ms"
    )


def chain_once(length: int) -> None:
    """One chain run in this process (whichever flowledger it imports): JSON on stdout."""
    sys.path.insert(0, str(ROOT / "bench"))
    from deploy_nodes import chain_artifact, run_artifact

    async def run() -> tuple[float, Any]:
        with tempfile.TemporaryDirectory() as folder:
            wall, _, entries = await run_artifact(
                f"sqlite:///{folder}/chain.db", chain_artifact(length), {}
            )
        return wall, entries

    wall, entries = asyncio.run(run())
    nodes = [(e.ended_at - e.started_at).total_seconds() for e in entries if e.kind == "set"]
    print(json.dumps({"node": statistics.median(nodes), "wall": wall / length}))


def chains(length: int, repeat: int, rev: str) -> None:
    print(f"\n4. a chain of {length} set nodes, medians of {repeat} alternated runs each, in ms")
    with tempfile.TemporaryDirectory() as base:
        archive = subprocess.run(
            ["git", "archive", rev, "src"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
        found: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for _ in range(repeat):
            for label, path in (("before", f"{base}/src"), ("after", str(ROOT / "src"))):
                env = {**os.environ, "PYTHONPATH": path}
                out = subprocess.run(
                    [sys.executable, __file__, "--chain-once", str(length)],
                    cwd=ROOT,
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                found[label].append(json.loads(out.splitlines()[-1]))
    print(f"{'code':<8}{'set node (trace)':>18}{'wall per node':>16}")
    for label, runs in found.items():
        node = statistics.median(run["node"] for run in runs) * 1e3
        wall = statistics.median(run["wall"] for run in runs) * 1e3
        print(f"{label:<8}{node:>18.3f}{wall:>16.3f}")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def main(args: argparse.Namespace) -> None:
    await costs(args.rounds, before_module(args.before))
    worst_cases()
    await loop_lateness()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", default=BASE, help="git revision of the unbounded evaluator")
    parser.add_argument("--chain-once", type=int, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.chain_once:
        chain_once(arguments.chain_once)
        sys.exit(0)
    print("load average at start:", load())
    asyncio.run(main(arguments))
    chains(arguments.chain, arguments.repeat, arguments.before)
    print("load average at end:", load())
