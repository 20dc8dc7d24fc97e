"""Before and after in one run: `bench/deploy_runs.py` over two source trees, alternated.

    python bench/compare_trees.py --old ../revalidate-old [--rounds 4] [--runs 5]

Each round runs this tree's ``bench/deploy_runs.py --runs N --json FILE`` twice in fresh
processes, once with ``--old``'s ``src`` first on ``PYTHONPATH`` (the old code) and once
with this tree's (the new code), the order swapped every round, so a change in the
machine's load hits both alike. The bench script, its servers and the artifact are the
same for both; only ``flowledger`` differs. Printed per source and measure: the median
and min-max (ms; counts as they are) of all rounds' samples, old beside new. Keep a copy
of the old tree with ``git worktree add ../revalidate-old main``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def one(tree: Path, runs: int, folder: Path) -> dict[str, dict[str, list[float]]]:
    out = folder / "samples.json"
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    command = [sys.executable, str(REPO / "bench" / "deploy_runs.py"), "--runs", str(runs)]
    subprocess.run([*command, "--json", str(out)], cwd=REPO, env=env, check=True)
    found: dict[str, dict[str, list[float]]] = json.loads(out.read_text())
    return found


def merge(into: dict[str, Any], found: dict[str, dict[str, list[float]]]) -> None:
    for source, measures in found.items():
        for what, values in measures.items():
            into.setdefault(source, {}).setdefault(what, []).extend(values)


def shown(values: list[float], what: str) -> str:
    ordered = sorted(values)
    if what.endswith("(count)"):
        return f"{statistics.median(ordered):g} ({ordered[0]:g}-{ordered[-1]:g})"
    ms = [value * 1000 for value in ordered]
    return f"{statistics.median(ms):,.0f} ({ms[0]:,.0f}-{ms[-1]:,.0f})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--old", required=True, help="the old source tree (a git worktree)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--runs", type=int, default=5, help="runs per source per round and tree")
    args = p.parse_args()
    trees = {"old": Path(args.old).resolve(), "new": REPO}
    samples: dict[str, dict[str, Any]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(args.rounds):
            order = ["old", "new"] if round_ % 2 == 0 else ["new", "old"]
            for label in order:
                print(f"round {round_ + 1}: {label}", file=sys.stderr, flush=True)
                merge(samples[label], one(trees[label], args.runs, Path(folder)))
    total = args.rounds * args.runs
    print(f"\nmedian (min-max) over {total} runs each, alternated over {args.rounds} rounds")
    for source, measures in samples["old"].items():
        print(f"\n{source}:                         old              new")
        for what, values in measures.items():
            new = samples["new"].get(source, {}).get(what)
            after = shown(new, what) if new else "-"
            print(f"  {what:38} {shown(values, what):>18}   {after:>18}")


if __name__ == "__main__":
    main()
