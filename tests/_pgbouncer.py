"""A real PgBouncer (Debian's ``/usr/sbin/pgbouncer``) in transaction mode in front of the
test server, for tests of the documented ``?prepare=off`` set-up.

`pgbouncer_url(tmp_path)` starts one on a free local port (``auth_type = any``: no password is
checked, and the server-side user is the test URL's), yields the test server's URL
rewritten to go through it, and stops it (by its own process id) on exit. Skipped when
PgBouncer is not installed (failing instead when ``CI=true``) or PostgreSQL is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ._postgres import require_postgres

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
STARTUP_DEADLINE = 30.0  # seconds: only catches a PgBouncer that never listens


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def pgbouncer_url(directory: Path) -> Iterator[str]:
    """The test server's base URL through a fresh transaction-mode PgBouncer."""
    base = require_postgres()
    if not os.access(PGBOUNCER, os.X_OK):
        reason = f"PgBouncer is not installed ({PGBOUNCER})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} [CI=true]", pytrace=False)
        pytest.skip(reason)
    parts = urlsplit(base)
    port = _free_port()
    config = directory / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        # auth_type = any needs the server-side user named here
        f"* = host={parts.hostname or '127.0.0.1'} port={parts.port or 5432} "
        f"user={parts.username or 'postgres'}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = any\n"
        "pool_mode = transaction\n"
        "default_pool_size = 20\nmax_client_conn = 200\n"
    )
    # PgBouncer refuses to run as root: there it drops to the postgres user (it reads
    # its configuration first; it logs to stderr, which goes to a file of ours).
    user = ["-u", "postgres"] if os.geteuid() == 0 else []
    log_path = directory / "pgbouncer.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [PGBOUNCER, *user, str(config)], stdout=subprocess.DEVNULL, stderr=log_file
        )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"PgBouncer did not start: {log}")
            time.sleep(0.05)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
        yield urlunsplit(parts._replace(netloc=netloc))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
