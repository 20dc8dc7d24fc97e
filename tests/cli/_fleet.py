"""A fleet of ``flowledger worker`` processes that a seeded plan SIGKILLs and restarts.

The plan is drawn from one seed before anything starts: when to SIGKILL a worker from
outside and which one (an index into the live workers), and for the n-th worker started
the write at which it SIGKILLs itself (`tests.cli._kill_points`: which method around a
wake, a deadline or a firing, and at which of its calls) and how long after a death its
replacement starts. The machine's timing still varies, but a failing seed replays the
same choices.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import _kill_points as kill_points

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.cli._time_faults_app:app"
WORKER = (sys.executable, "-m", "flowledger", "worker")


@dataclass
class Plan:
    kill_every: tuple[float, float] = (2.0, 6.0)  # seconds between outside kills
    # (of a worker that is up: it has logged its start; on a busy machine starting a
    # Python process takes seconds, and a worker killed before it began tests nothing)
    self_kill_within: int = 6  # a worker kills itself at point 1..this of its method
    restart_within: float = 1.0  # seconds before a dead worker's replacement starts


@dataclass
class Worker:
    proc: subprocess.Popen[bytes]
    armed: bool
    log: Path

    def up(self) -> bool:
        return self.log.exists() and "polling every" in self.log.read_text(errors="replace")


@dataclass
class Fleet:
    """``size`` workers on ``db`` (the marks file and logs under ``tmp``)."""

    db: str
    tmp: Path
    seed: int
    size: int
    plan: Plan = field(default_factory=Plan)
    workers: list[Worker] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)  # pids that died by SIGKILL
    outside_kills: int = 0
    self_kills: int = 0
    started: int = 0

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        self._self_kill_at = [rng.randint(1, self.plan.self_kill_within) for _ in range(1000)]
        self._self_kill_point = [rng.choice(kill_points.names()) for _ in range(1000)]
        self._restart_in = [rng.uniform(0.0, self.plan.restart_within) for _ in range(1000)]
        self._kill_in = [rng.uniform(*self.plan.kill_every) for _ in range(1000)]
        self._victims = [rng.randrange(1000) for _ in range(1000)]
        self._restarts: list[float] = []
        self._next_kill = 0.0
        self._calm = False

    @property
    def marks(self) -> Path:
        return self.tmp / "marks.txt"

    @property
    def kill_log(self) -> Path:
        return self.tmp / "kills.txt"

    @property
    def kills(self) -> int:
        return self.outside_kills + self.self_kills

    def env(self, armed: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "FLOWLEDGER_DB"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        env["FLOWLEDGER_FAULT_MARKS"] = str(self.marks)
        env.pop("FLOWLEDGER_KILL_AT", None)
        if armed:
            env["FLOWLEDGER_KILL_POINT"] = self._self_kill_point[self.started]
            env["FLOWLEDGER_KILL_AT"] = str(self._self_kill_at[self.started])
            env["FLOWLEDGER_KILL_LOG"] = str(self.kill_log)
        return env

    def spawn(self, *, armed: bool) -> None:
        log = self.tmp / f"worker-{self.started}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [*WORKER, "--db", self.db, "--app", APP, "--lease-ttl", "1", "--poll", "0.2"],
                cwd=self.tmp,
                env=self.env(armed),
                stdout=subprocess.DEVNULL,
                stderr=out,
            )
        self.workers.append(Worker(proc, armed, log))
        self.started += 1

    def start(self) -> None:
        for _ in range(self.size):
            self.spawn(armed=True)
        self._next_kill = time.monotonic() + self._kill_in[0]

    def step(self) -> None:
        """One turn of the chaos: reap the workers that died (restarts planned), kill one
        from outside when that is due, start the replacements that are due."""
        now = time.monotonic()
        for worker in list(self.workers):
            code = worker.proc.poll()
            if code is None:
                continue
            assert not self._calm, (code, worker.log.read_text(errors="replace"))
            self.workers.remove(worker)
            assert code == -signal.SIGKILL, (code, worker.log.read_text(errors="replace"))
            self.killed.add(worker.proc.pid)
            self.self_kills += 1
            self._restarts.append(now + self._restart_in[self.started % 1000])
        up = [worker for worker in self.workers if worker.up()]
        if not self._calm and now >= self._next_kill and up:
            victim = up[self._victims[self.outside_kills % 1000] % len(up)]
            self._kill(victim)
            self.outside_kills += 1
            self._restarts.append(now + self._restart_in[self.started % 1000])
            self._next_kill = now + self._kill_in[self.outside_kills % 1000]
        due = [at for at in self._restarts if at <= now]
        self._restarts = [at for at in self._restarts if at > now]
        for _ in due:
            self.spawn(armed=True)

    def _kill(self, worker: Worker) -> None:
        self.workers.remove(worker)
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait(30)
        self.killed.add(worker.proc.pid)

    def calm(self) -> None:
        """End the chaos: SIGKILL every armed worker (counted), start ``size`` unarmed."""
        self.step()
        for worker in list(self.workers):
            if worker.armed:
                self._kill(worker)
                self.outside_kills += 1
        self._restarts = []
        self._calm = True
        while len(self.workers) < self.size:
            self.spawn(armed=False)

    def up(self) -> bool:
        """Every worker has started (a SIGTERM before that is not a clean stop)."""
        return all(worker.up() for worker in self.workers)

    def stop(self) -> None:
        """SIGTERM every worker; a calm one must have stopped cleanly, without a traceback."""
        for worker in self.workers:
            worker.proc.send_signal(signal.SIGTERM)
        for worker in self.workers:
            code = worker.proc.wait(60)
            text = worker.log.read_text(errors="replace")
            assert code == 0 and "Traceback" not in text, (code, text)
        self.workers = []

    def kill_all(self) -> None:
        """Cleanup after a failure: nothing outlives the test."""
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.proc.kill()
            worker.proc.wait()
        self.workers = []

    def kill_points(self) -> list[str]:
        """Where the workers killed themselves (the points named in the kill log)."""
        if not self.kill_log.exists():
            return []
        return [line.split()[1] for line in self.kill_log.read_text().splitlines()]

    def summary(self) -> str:
        return (
            f"seed={self.seed} workers_started={self.started} kills={self.kills} "
            f"(outside={self.outside_kills} self={self.self_kills})"
        )
