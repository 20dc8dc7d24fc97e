"""Reading ``/metrics`` as Prometheus does: with the client library's own parser."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO

DEADLINE = 60.0  # only catches a hang

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, keyed by sample name and label set."""
    from prometheus_client.parser import text_string_to_metric_families

    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value (0 when the label set has not been seen yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def fetch(url: str, headers: Mapping[str, str] | None = None) -> str:
    request = urllib.request.Request(url, headers=dict(headers or {}))
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        return str(response.read().decode())


def scrape_until(url: str, done: Callable[[Samples], bool], what: str) -> tuple[str, Samples]:
    """Scrape ``url`` until ``done(samples)`` (or fail after `DEADLINE`)."""
    deadline = time.monotonic() + DEADLINE
    while True:
        text = fetch(url)
        samples = parse(text)
        if done(samples):
            return text, samples
        assert time.monotonic() < deadline, f"never: {what}\n{text}"
        time.sleep(0.05)


@dataclass
class Stderr:
    """A child's stderr lines, read on a thread (so its pipe never fills)."""

    lines: list[str] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def follow(self, stream: IO[str]) -> threading.Thread:
        def read() -> None:
            for line in stream:
                with self.changed:
                    self.lines.append(line)
                    self.changed.notify_all()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread

    def wait_for(self, predicate: Callable[[str], bool], process: subprocess.Popen[str]) -> str:
        """The first line ``predicate`` accepts (fails if the process ends first)."""
        deadline = time.monotonic() + DEADLINE
        with self.changed:
            while True:
                for line in self.lines:
                    if predicate(line):
                        return line
                if process.poll() is not None:
                    raise AssertionError(f"exited {process.returncode}:\n{''.join(self.lines)}")
                assert time.monotonic() < deadline, f"never logged:\n{''.join(self.lines)}"
                self.changed.wait(0.1)

    def text(self) -> str:
        with self.changed:
            return "".join(self.lines)

    def records(self) -> list[dict[str, object]]:
        """Every line as the JSON object it must be."""
        return [json.loads(line) for line in self.text().splitlines() if line.strip()]
