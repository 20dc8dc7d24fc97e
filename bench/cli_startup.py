"""Start-up cost of the ``flowledger`` command line: two source trees side by side.

Each case is one ``python -m flowledger ...`` child process on an empty SQLite database:
``--help``, ``source list --json`` and ``runs list``. Every round runs each case once per
tree, alternating which tree goes first (the machine is shared: alternation spreads the
load evenly), and records the wall time and the child's CPU time (user + system). Prints
the median with min-max per case and tree, the load average, and checks that both trees
print the same output for every case.

Keep an old tree to compare with as a git worktree:

    git worktree add /work/wt/startup-old main
    python bench/cli_startup.py --old /work/wt/startup-old/src --runs 15

Without ``--old`` only this tree is measured.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"

CASES: dict[str, list[str]] = {
    "--help": ["--help"],
    "source list --json": ["source", "list", "--json", "--db", "{db}"],
    "runs list": ["runs", "list", "--db", "{db}"],
}


@dataclass
class Samples:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    output: str | None = None


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(python: str, tree: Path, argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """One child process of ``python -m flowledger ARGV`` importing ``tree``."""
    env = {k: v for k, v in os.environ.items() if k not in ("FLOWLEDGER_DB", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tree)
    env["COLUMNS"] = "100"
    cpu = _child_cpu()
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "flowledger", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{tree}: flowledger {' '.join(argv)} failed:\n{done.stderr}")
    return wall, _child_cpu() - cpu, done.stdout


def create_database(python: str, tree: Path, path: Path) -> None:
    """An empty database, made by the tree under test (reading commands create none)."""
    code = (
        "import asyncio, sys\n"
        "from flowledger.storage import open_store\n"
        "async def main():\n"
        "    async with open_store(sys.argv[1]):\n"
        "        pass\n"
        "asyncio.run(main())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([python, "-c", code, f"sqlite:///{path}"], env=env, check=True, timeout=300)


def verify_tree(python: str, tree: Path) -> None:
    """Refuse a tree that is not the one ``python`` would import with PYTHONPATH set."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [python, "-c", "import flowledger; print(flowledger.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    found = Path(done.stdout.strip()).resolve()
    if not found.is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree}: python imports flowledger from {found} instead")


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, help="The src directory of the tree to compare.")
    parser.add_argument("--new", type=Path, default=HERE, help="\\[default: this tree's src]")
    parser.add_argument("--runs", type=int, default=10, help="Rounds (default 10).")
    parser.add_argument("--python", default=sys.executable, help="The interpreter to use.")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    trees: dict[str, Path] = {"new": args.new}
    if args.old is not None:
        trees = {"old": args.old, "new": args.new}
    for tree in trees.values():
        verify_tree(args.python, tree)

    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        db = cwd / "empty.db"
        create_database(args.python, args.new, db)
        samples = {(case, label): Samples() for case in CASES for label in trees}
        labels = list(trees)
        for round_number in range(args.runs):
            order = labels if round_number % 2 == 0 else labels[::-1]
            for case, template in CASES.items():
                argv = [part.format(db=f"sqlite:///{db}") for part in template]
                for label in order:
                    wall, cpu, output = run_once(args.python, trees[label], argv, cwd)
                    sample = samples[(case, label)]
                    sample.wall.append(wall)
                    sample.cpu.append(cpu)
                    sample.output = output

    print(f"python -m flowledger, {args.runs} rounds; median (min-max)")
    print(f"{'case':<20} {'tree':<4} {'wall':<22} {'cpu (user+sys)':<22}")
    for case in CASES:
        for label in trees:
            sample = samples[(case, label)]
            print(f"{case:<20} {label:<4} {summary(sample.wall):<22} {summary(sample.cpu):<22}")
        if len(trees) == 2 and samples[(case, "old")].output != samples[(case, "new")].output:
            print(f"  warning: {case}: the trees print different output")
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
