"""A run longer than the run page's history window (`RECENT_REVISIONS`): its page and
its stream cursor come from the window and still say where the run ends (the loop
definition of bench/dashboard_pages.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.testclient import TestClient

from flowledger.web import Dashboard, Gate, SessionPool
from flowledger.web.views import RECENT_REVISIONS, Cursor, all_history

from .conftest import BASE, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import dashboard_pages

STEPS = RECENT_REVISIONS + 60


def test_a_long_runs_page_ends_where_the_run_ends(tmp_path: Path) -> None:
    pool = SessionPool(
        f"sqlite:///{tmp_path / 'long.db'}", dashboard_pages.catalog(), read_only=False
    )
    app = Dashboard(pool, Gate({}, loopback=True), read_only=False).asgi_app()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        try:
            served: Any = client.portal.call(pool.get, None)  # type: ignore[union-attr]
            started = client.portal.call(  # type: ignore[union-attr]
                served.tools.call,
                "workflow_run_start",
                {
                    "definition_name": "loop",
                    "definition_version": "v1",
                    "input": {"count": 0, "goal": STEPS},
                },
            )
            run_id = str(started["run_id"])
            wait_for(client, run_id, "completed")
            history = client.portal.call(all_history, served.tools, run_id)  # type: ignore[union-attr]
            assert len(history) > RECENT_REVISIONS
            page = client.get(f"/runs/{run_id}").text
            assert 'data-vertex="tick"' in page and 'data-vertex="stop"' in page
            stream = re.search(r'data-stream="([^"]+)"', page)
            assert stream is not None
            # The stream starts after the history's very last entry: nothing is sent twice.
            after = Cursor.after(history[-1]).text()
            assert stream.group(1) == f"/events/runs/{run_id}?" + urlencode({"after": after})
            end = client.get(f"/runs/{run_id}?after={Cursor.after(history[-2]).text()}").text
            assert 'data-at-end="true"' in end and 'id="timeline-later"' not in end
            runs = client.get("/runs").text
            assert run_id in runs
        finally:
            client.portal.call(pool.close)  # type: ignore[union-attr]
