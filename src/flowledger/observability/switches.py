"""`otlp_requested`: how an environment variable turns an OpenTelemetry export on
(``FLOWLEDGER_TRACES``, ``FLOWLEDGER_METRICS``): unset or ``none`` is off, ``otlp`` on."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["otlp_requested"]


def otlp_requested(env: Mapping[str, str], variable: str) -> bool:
    """Whether ``variable`` asks for the OTLP export; `ValueError` names any other value."""
    choice = env.get(variable, "").strip().lower()
    if choice in ("", "none"):
        return False
    if choice != "otlp":
        raise ValueError(f"{variable}={choice!r}: expected 'otlp' or 'none'")
    return True
