"""Running artifacts: compilation onto the flow engine, tool intents, the per-run trace, what a
node raises.

The public names are re-exported by `flowledger.deploy`.
"""
