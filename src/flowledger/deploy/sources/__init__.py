"""MCP capability sources: specs, sessions on the official SDK, a per-run pool, tool listings
and fingerprints.

The public names are re-exported by `flowledger.deploy`.
"""
