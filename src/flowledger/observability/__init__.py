"""Traces, metrics and logs for operators; optional libraries are imported only when enabled."""
