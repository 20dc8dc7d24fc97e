"""Everything issues #18 and #33 measure, in one command: ``bash bench/run.sh all [--quick]``
``[--out FILE]``.

In order, each part a subprocess of this interpreter (bench/run.sh runs it in bench/.venv):

1. ``sqlite``   - bench/compare.py on SQLite: workloads a) to g), c) at widths 8, 16 and 32,
   with the chain, fan-out and g) latency plots;
2. ``postgres`` - bench/compare.py ``--backend postgres``: a), b), f) and g);
3. ``workers``  - bench/workers.py with 1, 2 and 3 worker processes (PostgreSQL);
4. ``wakeups``  - bench/wakeups.py: start latency and idle storage calls, the last polling
   code against this checkout, alternated (PostgreSQL);
   ``--breakdown``: where the ms of one start go, phase by phase;
5. ``scale``    - bench/scale.py (workload h), on SQLite and, when reachable, PostgreSQL;
6. ``prune``    - bench/prune.py: a retention pass's KV keys/s, the code before batching
   (92a9e59) against this checkout, alternated (SQLite, and PostgreSQL when reachable);
7. ``resume``   - bench/deploy_runs.py: a deployed run's start and revalidation, and a
   stdio and an HTTP ``resume_run`` to completion with where its time goes;
8. ``step-cpu`` - bench/step_cpu.py: CPU per durable step of a) at ``synchronous=OFF``.

Parts 6 to 8 run with the project's interpreter (``FLOWLEDGER_PYTHON``, default
``.venv/bin/python``): they need its test helpers and MCP servers.

The PostgreSQL server (``--postgres-url``) is checked once: when it cannot be reached, one
line says so and the PostgreSQL parts are skipped (h) then runs on SQLite only).

With ``--out FILE`` every part writes its own generated block of FILE, between markers
named ``results`` (the SQLite comparison), ``results-postgres``, ``results-workers``,
``results-wakeups``, ``results-scale``, ``results-prune``, ``results-resume`` and
``results-step-cpu`` (see compare.write_out: a block is replaced in
place, or appended under a heading of its own when FILE does not have it yet), and the
plots go next to FILE. A part that is skipped or fails leaves its block as it was.
``--quick`` runs every part at its smallest size (seconds to a few minutes in all);
``--only`` and ``--reps`` go to both comparisons.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402

PARTS = ("sqlite", "postgres", "workers", "wakeups", "scale", "prune", "resume", "step-cpu")
PRUNE_BEFORE = "92a9e59"  # the last prune without batches (issue #33 item 4's baseline)
# workers.py at its smallest: enough runs that every worker count gets work in each phase
QUICK_WORKERS = (
    "--runs", "24", "--sessions", "3", "--concurrency", "12", "--repeat", "1",
    "--latency-runs", "5", "--latency-rate", "10",
)  # fmt: skip


@dataclass(frozen=True)
class Part:
    name: str
    argv: list[str]
    block: str | None = None  # the block this part's stdout goes to (None: it writes its own)
    heading: str = ""


def parts(args: argparse.Namespace, postgres: bool) -> list[Part]:
    py = sys.executable
    common = ["--quick"] if args.quick else []
    common += [x for system in args.only or () for x in ("--only", system)]
    common += ["--reps", str(args.reps)] if args.reps else []
    common += ["--dir", args.dir] if args.dir else []
    out = ["--out", args.out] if args.out else []
    folder = Path(args.out).parent if args.out else None

    def plot(option: str, name: str) -> list[str]:
        return [option, str(folder / name)] if folder else []

    sqlite = [
        py,
        str(HERE / "compare.py"),
        *common,
        *plot("--plot", "benchmarks.png"),
        *plot("--fanout-plot", "benchmarks-fanout.png"),
        *plot("--concurrent-plot", "benchmarks-concurrent.png"),
        *out,
    ]
    chosen = [Part("sqlite", sqlite)]
    if postgres:
        pg_compare = [
            py,
            str(HERE / "compare.py"),
            "--backend",
            "postgres",
            "--postgres-url",
            args.postgres_url,
            *common,
            *plot("--concurrent-plot", "benchmarks-concurrent-postgres.png"),
            *out,
        ]
        workers = [py, str(HERE / "workers.py"), "--db", args.postgres_url, "--workers", "1"]
        workers += ["2", "3", *(QUICK_WORKERS if args.quick else ())]
        wakeups = [py, str(HERE / "wakeups.py"), "--db", args.postgres_url]
        wakeups += ["--breakdown", "5" if args.quick else "20"]
        wakeups += ["--rounds", "1", "--idle", "5", "--latency-runs", "10"] if args.quick else []
        chosen += [
            Part("postgres", pg_compare),
            Part("workers", workers, "results-workers", "Workers on PostgreSQL (generated)"),
            Part("wakeups", wakeups, "results-wakeups", "Wake-ups against polling (generated)"),
        ]
    scale = [py, str(HERE / "scale.py"), *(["--quick"] if args.quick else [])]
    scale += ["--cache", args.scale_cache] if args.scale_cache else []
    scale += ["--postgres", args.postgres_url] if postgres else []
    chosen.append(Part("scale", scale, "results-scale", "h) scale (generated)"))
    own = os.environ.get("FLOWLEDGER_PYTHON") or str(HERE.parent / ".venv" / "bin" / "python")
    prune = [own, str(HERE / "prune.py"), "--before", PRUNE_BEFORE]
    prune += ["--backends", "sqlite,postgres" if postgres else "sqlite"]
    prune += ["--runs", "50", "--repeat", "1"] if args.quick else ["--runs", "150", "--repeat", "5"]
    resume = [own, str(HERE / "deploy_runs.py"), *(["--quick"] if args.quick else [])]
    step_cpu = [own, str(HERE / "step_cpu.py"), "--settled"]
    step_cpu += ["--n", "300", "--reps", "1"] if args.quick else ["--n", "2000"]
    chosen += [
        Part("prune", prune, "results-prune", "Retention: prune in batches (generated)"),
        Part("resume", resume, "results-resume", "Deploy layer: runs and resumes (generated)"),
        Part("step-cpu", step_cpu, "results-step-cpu", "CPU per durable step (generated)"),
    ]
    return [part for part in chosen if part.name not in (args.skip or ())]


def shown(argv: Sequence[str]) -> str:
    """A part's command as a reader would type it from the checkout's root."""
    words = ["python", *(os.path.relpath(w) if w.startswith(str(HERE)) else w for w in argv[1:])]
    return shlex.join(words)


def run(part: Part) -> tuple[int, str]:
    """Run ``part``, echoing its stdout as it comes; its exit code and stdout."""
    proc = subprocess.Popen(part.argv, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    return proc.wait(), "".join(lines)


def block_text(part: Part, stdout: str, command: str) -> str:
    # scale.py's progress lines ("generating ...", "N runs, M checkpoints ...") are not results
    kept = [line for line in stdout.splitlines() if not line.rstrip().endswith("...")]
    body = "\n".join(kept).strip("\n")
    own = shown(part.argv)
    made = f"Made by `{command}`" + ("." if own in body else f": `{own}`.")
    return f"{made}\n\n{body}\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every part at its smallest size")
    parser.add_argument("--out", help="write each part's results into its block of this file")
    parser.add_argument("--only", action="append", choices=compare.SYSTEMS)
    parser.add_argument("--reps", type=int, help="repetitions of both comparisons")
    parser.add_argument("--postgres-url", default=compare.PG_URL)
    parser.add_argument("--dir", help="where the comparisons' SQLite databases go")
    parser.add_argument("--scale-cache", help="bench/scale.py's --cache (default its own)")
    parser.add_argument("--skip", action="append", choices=PARTS, help="leave out this part")
    args = parser.parse_args(argv)
    command = "bash bench/run.sh all " + " ".join(argv if argv is not None else sys.argv[1:])
    command = command.strip()

    # bench/prune.py finds the server the way the tests do (tests/_postgres.py)
    os.environ.setdefault("FLOWLEDGER_TEST_POSTGRES_URL", args.postgres_url)
    reason = compare.postgres_unreachable(args.postgres_url)
    if reason is not None:
        line = (
            f"PostgreSQL at {args.postgres_url} unreachable ({reason}): skipped the PostgreSQL "
            "comparison (a, b, f, g), the workers bench and h) on PostgreSQL"
        )
        print(line, flush=True)
    timings: list[str] = []
    failed: list[str] = []
    for part in parts(args, postgres=reason is None):
        print(f"== {part.name}: {shown(part.argv)}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        code, stdout = run(part)
        seconds = time.perf_counter() - started
        timings.append(f"{part.name} {seconds:.0f} s")
        if code != 0:
            failed.append(f"{part.name} (exit {code})")
        elif args.out and part.block:
            compare.write_out(args.out, block_text(part, stdout, command), part.block, part.heading)
    print(f"== done: {', '.join(timings)}", file=sys.stderr, flush=True)
    if failed:
        print(f"== failed: {', '.join(failed)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
