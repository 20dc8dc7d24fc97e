"""Atheris fuzz target for checkpoint decoding (run by hand, not collected by pytest):

    pip install atheris
    python tests/reliability/fuzz_checkpoint_decode.py -runs=100000

Feeds arbitrary bytes to `LedgerCheckpointStore` as checkpoint records (alone, in place of
one record of a real run's log, or appended to its prefix); any exception other than a
flow error is reported by atheris as a crash, with the input saved for replay
(``python tests/reliability/fuzz_checkpoint_decode.py crash-<hash>``). The seed corpus
(the records of a real run) and what atheris adds to it live in
``$TMPDIR/flowledger-fuzz-checkpoint-decode``, unless a corpus directory is given.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import atheris  # type: ignore[import-untyped]

with atheris.instrument_imports():
    from tests.reliability._decode_target import RECORDS, decode_log


def main() -> None:
    corpus = Path(tempfile.gettempdir()) / "flowledger-fuzz-checkpoint-decode"
    corpus.mkdir(exist_ok=True)
    for index, record in enumerate(RECORDS):
        for mode in (0, 1, 2):
            (corpus / f"seed-{index}-{mode}").write_bytes(bytes([mode + 3 * index]) + record)
    argv = [*sys.argv]
    if not any(not arg.startswith("-") for arg in argv[1:]):
        argv.append(str(corpus))
    atheris.Setup(argv, decode_log)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
