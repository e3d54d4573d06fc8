"""The log drain as a program: `python -m concurbench.cli.log_drain FIFO BYTES_PER_SECOND [MARKER]`.

The `log_drain` observer starts it in a session of its own; it reads the server's log FIFO at a
throttled rate and prints what it read as one JSON line when the observer stops it.
"""

from __future__ import annotations

import json
import sys

from ..background.drain_process import drain


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        print("usage: python -m concurbench.cli.log_drain FIFO BYTES_PER_SECOND [MARKER]", file=sys.stderr)
        return 2
    print(json.dumps(drain(args[0], float(args[1]), args[2].encode() if len(args) == 3 else b"")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
