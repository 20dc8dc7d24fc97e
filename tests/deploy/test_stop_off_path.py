"""Stopping a run's stdio server is off the run's path: closing a session waits for the
server to exit (the SDK gives it up to 2 s after closing its input), which neither a
resume's answer nor the run's next record needs. Not timed: the test holds every
``SourceSession.close`` of the resume until the resume has answered - before the change
the resume waited for it and never answered - then lets them go and waits for them
(`closing.drain`), so no server is left running.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flowledger.deploy.sources import closing
from flowledger.deploy.sources.session import SourceSession

from .test_deployed_runs import prepared, service
from .test_one_revalidation import counting_script, deployment, starts

HANG = 60.0  # seconds: only catches a hang


async def test_a_resume_answers_before_its_stdio_server_has_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = counting_script(tmp_path)
    holding = False
    gate = asyncio.Event()
    closes: list[str] = []
    close = SourceSession.close

    async def held(self: Any) -> None:
        if holding:
            closes.append("asked")
            await gate.wait()
        await close(self)
        if holding:
            closes.append("done")

    monkeypatch.setattr(SourceSession, "close", held)
    async with service(f"sqlite:///{tmp_path / 'stop.db'}") as (deploy, _store):
        await prepared(deploy, deployment(script))
        started = await deploy.run_deployment("env_dep", {})
        assert started["status"] == "interrupted", started
        await closing.drain()
        before = starts(tmp_path)
        holding = True
        done = await asyncio.wait_for(deploy.resume_run(started["run_id"], {"go": True}), HANG)
        assert done["status"] == "completed", done
        assert starts(tmp_path) == before + 1
        assert closes and set(closes) == {"asked"}  # answered while its server's stop waits
        gate.set()
        await asyncio.wait_for(closing.drain(), HANG)
        assert closes.count("done") == closes.count("asked")
