"""Run a command with one directory read-only, as a user without write permission sees it.

As root, permissions do not stop writes, so the directory is bind-mounted read-only onto
itself in a private mount namespace (``unshare -m``) that only the command sees. As any
other user the directory's write permission is removed (and restored by the caller)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["read_only_command"]

_REMOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


def read_only_command(directory: Path, argv: list[str]) -> list[str]:
    """``argv`` to run with ``directory`` read-only (skips the test where that cannot be
    arranged: root without ``unshare``)."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        return argv
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to make a directory read-only for root")
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", _REMOUNT, str(directory), "true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot remount read-only here: {probe.stderr.decode(errors='replace')}")
    return ["unshare", "-m", "sh", "-c", _REMOUNT, str(directory), *argv]
