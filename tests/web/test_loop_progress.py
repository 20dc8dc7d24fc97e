"""A paused run of a graph with a loop never reads as finished (issue #31: "a paused
run's progress shows 7/7"): the activity journal counts vertex completions, and a loop
completes vertices twice. Through HTTP on a real SQLite file (`revise`: write, review,
write and review again, then a pause for approval, then publish)."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from flowledger.web.graph import graph_shape
from flowledger.web.loop_progress import loops

from .conftest import start, wait_for
from .web_app import kinds_definition, review_definition, revise_definition


def test_a_paused_loop_counts_each_vertex_once(client: TestClient) -> None:
    run = start(client, "revise", "v1", topic="loops")
    wait_for(client, run, "interrupted")
    page = client.get(f"/runs/{run}").text
    header = page[page.index("<dt>Progress</dt>") :]
    header = header[: header.index("</dd>")]
    # write and review are done (twice each), approve is paused, publish not reached
    assert re.search(r'<meter min="0" max="4" value="2"></meter> 2/4', header), header
    assert "4/4" not in page

    listing = client.get("/runs").text
    row = listing[listing.index(f'data-run="{run}"') :]
    row = row[: row.index("</tr>")]
    assert 'class="muted progress-loops"' in row, row
    # The progress cell alone: the row's link holds the run id, which may contain "/4".
    progress = row[row.index('<span class="muted progress-loops"') :]
    assert not re.search(r"\d+\s*/\s*\d+", progress), progress


def test_only_graphs_that_go_back_loop() -> None:
    shapes = [graph_shape(d()) for d in (revise_definition, kinds_definition, review_definition)]
    assert [shape is not None and loops(shape) for shape in shapes] == [True, True, False]
