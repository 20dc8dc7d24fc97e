"""flowledger: durable graph workflows with append-only checkpoints."""

__version__ = "0.1.0"
