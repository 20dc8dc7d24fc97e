#!/usr/bin/env bash
# Compare flowledger with LangGraph and DBOS: bash bench/run.sh [compare.py options]
#
# The peers live in their own virtual environment (bench/.venv, git-ignored) so the product
# never depends on them. It is created on first use, and refreshed when
# bench/requirements-peers.txt or pyproject.toml changes; flowledger is installed editable
# from this checkout. Options are passed to bench/compare.py (see --help), for example:
#
#   bash bench/run.sh --out docs/benchmarks.md --plot docs/benchmarks.png
#   bash bench/run.sh --quick --only flowledger
#   bash bench/run.sh --profile chain
#
# "dashboard" as the first argument runs bench/dashboard_pages.py instead (the dashboard's
# page times on a small and a full database; options after it go to that script):
#
#   bash bench/run.sh dashboard --quick
#
# "all" runs bench/all.py in bench/.venv: everything of issues #18 and #33 in one command -
# the SQLite comparison, the PostgreSQL comparison (a, b, f, g), bench/workers.py with 1, 2
# and 3 workers, bench/wakeups.py (with its start breakdown), bench/scale.py, and with the
# project's interpreter bench/prune.py, bench/deploy_runs.py (resume breakdown) and
# bench/step_cpu.py; the PostgreSQL parts are skipped, with one line saying so, when the
# server is unreachable. With --out each part writes its own block:
#
#   bash bench/run.sh all [--quick] [--out docs/benchmarks.md] [--postgres-url URL]
#
# Environment: PYTHON (the interpreter that creates the venv, default python3),
# BENCH_VENV (default bench/.venv).
# The deploy-run bench (bench/deploy_runs.py) needs no peers but the project's own dev
# environment (mcp-server-time, server-everything in tests/deploy/npm), so it runs with
# the project's interpreter (FLOWLEDGER_PYTHON, default .venv/bin/python):
#
#   bash bench/run.sh deploy-runs [--quick] [--runs N]
#
# "scale" runs bench/scale.py (workload h: 100,000 runs and 1,000,000 checkpoints against
# an empty database; generated databases are cached in bench/.scale-cache) with the
# project's interpreter too:
#
#   bash bench/run.sh scale [--quick] [--postgres postgresql://postgres@127.0.0.1:5432/test]
#
# "langgraph" runs bench/langgraph_saver.py (LangGraph graphs on SqliteSaver / PostgresSaver
# and on FlowledgerSaver, side by side) with the project's interpreter, whose dev extra
# has LangGraph and both of its savers:
#
#   bash bench/run.sh langgraph [--quick] [--reps N] [--out docs/benchmarks.md]
#
# "prune" runs bench/prune.py (a retention pass over N finished runs; with --before REV it
# alternates the code at REV and this checkout, on SQLite and PostgreSQL) with the
# project's interpreter, which has the test helpers it builds its runs with:
#
#   bash bench/run.sh prune --runs 150 --repeat 5 --before REV --backends sqlite,postgres
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
if [ "${1:-}" = "deploy-runs" ]; then
    shift
    cd "$root"
    exec "${FLOWLEDGER_PYTHON:-$root/.venv/bin/python}" "$here/deploy_runs.py" "$@"
fi
if [ "${1:-}" = "langgraph" ]; then
    shift
    cd "$root"
    exec "${FLOWLEDGER_PYTHON:-$root/.venv/bin/python}" "$here/langgraph_saver.py" "$@"
fi
if [ "${1:-}" = "prune" ]; then
    shift
    cd "$root"
    exec "${FLOWLEDGER_PYTHON:-$root/.venv/bin/python}" "$here/prune.py" "$@"
fi
if [ "${1:-}" = "scale" ]; then
    shift
    cd "$root"
    exec "${FLOWLEDGER_PYTHON:-$root/.venv/bin/python}" "$here/scale.py" "$@"
fi
venv="${BENCH_VENV:-$here/.venv}"
stamp="$venv/.flowledger-bench-installed"

if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
if [ ! -f "$stamp" ] || [ "$here/requirements-peers.txt" -nt "$stamp" ] \
    || [ "$root/pyproject.toml" -nt "$stamp" ]; then
    echo "installing flowledger and the peers into $venv ..." >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        -e "$root" -r "$here/requirements-peers.txt"
    touch "$stamp"
fi
if [ "${1:-}" = "all" ]; then
    shift
    cd "$root"
    exec "$venv/bin/python" "$here/all.py" "$@"
fi
if [ "${1:-}" = "dashboard" ]; then
    shift
    exec "$venv/bin/python" "$here/dashboard_pages.py" "$@"
fi
exec "$venv/bin/python" "$here/compare.py" "$@"
