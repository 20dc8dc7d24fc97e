"""Take the dashboard screenshots shown in docs/dashboard.md and the README.

    .venv/bin/python docs/screenshots.py

Starts ``flowledger web`` on a temporary SQLite database, runs the built-in
``document_review`` demo through the dashboard in Debian's chromium (Playwright's
``executable_path``; no browser download) and writes ``docs/dashboard-runs.png``,
``docs/dashboard-running.png``, ``docs/dashboard-paused.png`` and
``docs/dashboard-time.png`` (the finished run's time page).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

DOCS = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
DOCUMENTS = [
    ("Quarterly report", "Revenue grew 12 percent in the third quarter. Costs fell."),
    ("Release notes", "Version 2 ships three features. Upgrading takes 5 minutes."),
    ("Team update", "We hired two engineers. The office moves in May."),
]


def serve(db: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "flowledger", "web", "--db", f"sqlite:///{db}", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        match = re.search(r"serving (http://\S+/)", line)
        if match:
            return process, match.group(1)
    raise SystemExit("flowledger web did not start")


def start(page: Page, url: str, title: str, document: str) -> None:
    page.goto(url + "definitions/document_review/v1")
    page.fill("#f-title", title)
    page.fill("#f-document", document)
    page.click("#start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}$"))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        process, url = serve(Path(tmp) / "shots.db")
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM)
                page = browser.new_page(viewport={"width": 1280, "height": 860})
                for title, document in DOCUMENTS[:2]:
                    start(page, url, title, document)
                    page.wait_for_selector(".vertex[data-vertex=approval][data-state=paused]")
                page.select_option("#f-approved", "true")
                page.click("#resume-form button[type=submit]")
                page.wait_for_selector("#header .status-completed")
                finished = page.url
                start(page, url, *DOCUMENTS[2])
                page.wait_for_selector(".vertex[data-state=running]:not([data-vertex=intake])")
                page.screenshot(path=DOCS / "dashboard-running.png")
                page.wait_for_selector(".vertex[data-vertex=approval][data-state=paused]")
                page.wait_for_timeout(1500)  # let the new rows' highlight fade
                page.screenshot(path=DOCS / "dashboard-paused.png", full_page=True)
                page.set_viewport_size({"width": 1280, "height": 360})
                page.goto(url + "runs")
                page.screenshot(path=DOCS / "dashboard-runs.png")
                page.set_viewport_size({"width": 1280, "height": 640})
                page.goto(finished + "/time")
                page.screenshot(path=DOCS / "dashboard-time.png", full_page=True)
                browser.close()
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(30)


if __name__ == "__main__":
    main()
