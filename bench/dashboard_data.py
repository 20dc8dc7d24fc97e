"""Server time of a run's data page (`flowledger.web.run_data`) against the run page, on
one long run: the state at its latest revision (with its output), at revision 1, and the
run page, requested in turn (alternating, so the machine's load falls on all three
alike). The long run is executed for real (the loop definition of `dashboard_pages`).
The time is the client's wall time around ``client.get`` in Starlette's TestClient (no
network): median and min-max.

    python bench/dashboard_data.py [--revisions 2000] [--requests 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

from flowledger.web import Dashboard, Gate, SessionPool

sys.path.insert(0, str(Path(__file__).parent))
from dashboard_pages import BASE, build, catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp, "long.db")
        run_id = build(db, 0, args.revisions)
        pool = SessionPool(f"sqlite:///{db}", catalog(), read_only=False)
        app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
        pages = {
            "data page, latest revision": f"/runs/{run_id}/data",
            "data page, revision 1": f"/runs/{run_id}/data?revision=1",
            "run page": f"/runs/{run_id}",
        }
        times: dict[str, list[float]] = {name: [] for name in pages}
        with TestClient(app, base_url=BASE) as client:
            try:
                for path in pages.values():  # warm up
                    assert client.get(path).status_code == 200, path
                for _ in range(args.requests):
                    for name, path in pages.items():
                        begin = time.perf_counter()
                        response = client.get(path)
                        times[name].append(time.perf_counter() - begin)
                        assert response.status_code == 200, path
            finally:
                client.portal.call(pool.close)  # type: ignore[union-attr]
    print(f"a {args.revisions}-step run, {args.requests} requests a page")
    print("| page | median | min-max |")
    print("|---|---:|---:|")
    for name, values in times.items():
        print(
            f"| {name} | {statistics.median(values) * 1e3:.2f} ms | "
            f"{min(values) * 1e3:.2f}-{max(values) * 1e3:.2f} ms |"
        )


if __name__ == "__main__":
    main()
