"""The log drain's own process: reads the server's log FIFO at a set rate until told to stop.

It is a program of its own, `python -m concurbench.background.drain_process FIFO BYTES_PER_SECOND
[MARKER]` (see background/log_drain.py for why and how): it prints what it read as one JSON line when
the observer stops it, and imports nothing but the standard library and concurbench.errors, so it
starts quickly.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from ..errors import ConfigError


class _Stop(Exception):
    pass


def drain(fifo: str, rate: float, marker: bytes = b"") -> dict:
    """Read the FIFO at most `rate` bytes a second until SIGTERM; SIGUSR1 lifts the limit.

    Prints `ready` once the FIFO is open and `marker` when `marker` has come through it.
    """
    parent = os.getppid()
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # does not wait for a writer
    keep = os.open(fifo, os.O_WRONLY)  # a writer of our own: no end-of-file when the server closes it
    os.set_blocking(fd, True)
    throttled = [True]
    for sig in (signal.SIGINT, signal.SIGHUP):  # the harness stops us, not the terminal
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, lambda signum, frame: throttled.__setitem__(0, False))

    def stop(signum, frame):
        raise _Stop

    signal.signal(signal.SIGTERM, stop)

    def orphaned() -> None:  # the harness died without stopping us: leave nothing behind
        while os.getppid() == parent:
            time.sleep(0.5)
        for path in (fifo, os.path.dirname(fifo)):
            try:
                os.unlink(path) if path == fifo else os.rmdir(path)
            except OSError:
                pass
        os._exit(3)

    threading.Thread(target=orphaned, daemon=True).start()
    chunk = int(min(65536, max(512, rate / 20)))  # about 20 reads a second when throttled
    stats = {"bytes": 0, "lines": 0, "throttled_bytes": 0, "throttled_s": 0.0}
    started = time.monotonic()
    tail = b""
    print("ready", flush=True)
    try:
        while True:
            t0 = time.monotonic()
            data = os.read(fd, chunk if throttled[0] else 1 << 20)
            stats["bytes"] += len(data)
            stats["lines"] += data.count(b"\n")
            if marker:
                if marker in tail + data:
                    print("marker", flush=True)
                    marker = b""
                tail = (tail + data)[-len(marker):] if marker else b""
            if throttled[0]:
                stats["throttled_bytes"] += len(data)
                # a chunk "takes" len/rate seconds; time spent waiting for data counts towards it
                pause = len(data) / rate - (time.monotonic() - t0)
                if pause > 0:
                    time.sleep(pause)
                stats["throttled_s"] += time.monotonic() - t0
    except _Stop:
        pass
    finally:
        os.close(keep)
        os.close(fd)
    stats["seconds"] = round(time.monotonic() - started, 3)
    stats["throttled_s"] = round(stats["throttled_s"], 3)
    stats["throttled_rate_bytes_s"] = round(stats["throttled_bytes"] / stats["throttled_s"]) \
        if stats["throttled_s"] else None
    return stats


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3):
        raise ConfigError("usage: python -m concurbench.background.drain_process FIFO BYTES_PER_SECOND [MARKER]")
    print(json.dumps(drain(args[0], float(args[1]), args[2].encode() if len(args) == 3 else b"")), flush=True)


if __name__ == "__main__":
    main()
