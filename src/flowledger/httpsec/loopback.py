"""Loopback addresses: who may serve without tokens.

A server without tokens serves one session to whoever reaches it, so it listens only on
an address that names this machine alone (`open_bind_refusal`); such a server also
answers only requests whose ``Host`` names this machine (`flowledger.httpsec.origins`).
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback", "open_bind_refusal"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost`` or a loopback address,
    with or without IPv6 brackets)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def open_bind_refusal(host: str, *, tokens: bool, how: str) -> str | None:
    """Why serving on ``host`` must be refused, or ``None``: binding anything but a
    loopback address without tokens would let anyone who reaches it run workflows.
    ``how`` says where tokens come from (``"--tokens-file"``...)."""
    if tokens or is_loopback(host):
        return None
    return (
        f"refusing to serve on non-loopback address {host!r} without tokens: anyone who "
        f"can reach it could run workflows; give {how}, or bind 127.0.0.1"
    )
