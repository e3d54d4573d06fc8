"""`cluster`: start a cluster of load hosts on this machine (`start`), join a host to one (`join`), list a
cluster's hosts with their versions and clock offsets (`hosts`). `run --cluster ADDRESS` drives a run's load
from them (docs/distributed.md)."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

import click

from ..errors import ConfigError, RunError
from .console import err, out
from .errors import fail


def tls_options(command):
    """--tls-ca-file, --tls-cert and --tls-key: the engine's TLS (docs/distributed.md)."""
    for flag, what in (("--tls-key", "this host's private key"), ("--tls-cert", "this host's certificate"),
                       ("--tls-ca-file", "the certificate authority that signed every part's certificate")):
        command = click.option(flag, type=click.Path(exists=True, dir_okay=False), default=None,
                               help=f"TLS: {what} (PEM); give all three, and tls:// addresses.")(command)
    return command


def _tls(ca_file: str | None, cert: str | None, key: str | None) -> dict[str, str] | None:
    given = {"ca-file": ca_file, "cert": cert, "key": key}
    if not any(given.values()):
        return None
    if not all(given.values()):
        missing = ", ".join(f"--tls-{k}" for k, v in given.items() if not v)
        raise ConfigError(f"TLS needs --tls-ca-file, --tls-cert and --tls-key together; missing: {missing}")
    return given


@click.group()
def cluster() -> None:
    """Load from many hosts: a cluster's scheduler and load hosts (Dask distributed; pip install
    'concurbench[cluster]')."""


@cluster.command()
@click.option("--local", "local", type=click.IntRange(min=0, max=64), default=0, show_default=True,
              help="Load hosts to start on this machine, each a process group of its own (0: the scheduler alone, "
                   "for hosts that join from other machines).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address the scheduler (and the local hosts) listen on, and only there.")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=0, show_default=True,
              help="The scheduler's port (0: a free one).")
@tls_options
def start(local: int, host: str, port: int, tls_ca_file: str | None, tls_cert: str | None,
          tls_key: str | None) -> None:
    """Start a cluster: its address is the last line printed; it runs until SIGTERM or Ctrl-C, then stops
    every process it started."""
    from ..cluster.engine import require
    from ..cluster.local import LocalCluster

    stop = {"now": False}

    def _stop(signum, frame):
        stop["now"] = True

    try:
        require()
        tls = _tls(tls_ca_file, tls_cert, tls_key)
    except ConfigError as exc:
        fail(exc)
        return
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    parts = LocalCluster(local, host=host, port=port, tls=tls)
    try:
        try:
            address = parts.start()
        except RunError as exc:
            fail(exc)
            return
        err.print(f"cluster: a scheduler and {local} load host{'s' if local != 1 else ''} "
                  f"({', '.join(parts.hosts) or 'none yet'}); SIGTERM or Ctrl-C stops them", highlight=False)
        out.print(address, soft_wrap=True, highlight=False)
        sys.stdout.flush()
        gone: set[str] = set()
        while not stop["now"]:
            if parts.scheduler_ended():
                fail(RunError(f"the cluster's scheduler exited; its last log lines:\n{parts.log_tail('scheduler')}"))
                return
            for part in parts.ended():
                if part not in gone:
                    gone.add(part)
                    err.print(f"[yellow]cluster:[/yellow] load host {part} has exited", highlight=False)
            time.sleep(0.2)
    finally:
        parts.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    err.print("cluster: stopped", highlight=False)


@cluster.command()
@click.argument("address")
@click.option("--name", default=None, help="This host's name in the cluster [default: its host name].")
@click.option("--host", default=None,
              help="The address this host listens on for the cluster [default: the one it reaches the scheduler "
                   "from].")
@click.option("--local-directory", default=None, type=click.Path(file_okay=False),
              help="Where the engine keeps its scratch files [default: a temporary directory].")
@tls_options
def join(address: str, name: str | None, host: str | None, local_directory: str | None, tls_ca_file: str | None,
         tls_cert: str | None, tls_key: str | None) -> None:
    """Join this machine to the cluster at ADDRESS as a load host, until SIGTERM or Ctrl-C. A host whose
    concurbench version differs from the scheduler's is refused."""
    from ..cluster import engine
    from ..cluster.hosts import differs, host_facts

    try:
        engine.require()
        tls = _tls(tls_ca_file, tls_cert, tls_key)
        name = name or socket.gethostname()
        client = engine.client(address)
        try:
            theirs = client.run_on_scheduler(host_facts)
        except Exception as exc:  # noqa: BLE001 - a scheduler without concurbench: the run checks each host at start
            err.print(f"[yellow]note:[/yellow] the scheduler could not tell its concurbench version ({type(exc).__name__}); "
                      f"the coordinator checks every host's at the start of a run", highlight=False)
            theirs = None
        finally:
            client.close(timeout=engine.CONNECT_S)
        why = None if theirs is None else differs(name, host_facts(), theirs, "the scheduler")
        if why is not None:
            raise ConfigError(f"refused: {why}; install the scheduler's version here")
    except ConfigError as exc:
        fail(exc)
        return
    command = engine.worker_command(address, name, host, tls, local_directory=local_directory)
    os.execv(command[0], command)  # this process becomes the engine's worker: one process (group) per host


@cluster.command()
@click.argument("address")
def hosts(address: str) -> None:
    """List the load hosts of the cluster at ADDRESS: name, address, versions, CPUs, clock offset."""
    from ..cluster.hosts import connect

    try:
        found = connect(address)
    except ConfigError as exc:
        fail(exc)
        return
    try:
        for h in found.hosts:
            out.print(f"{h.name}\t{h.address}\tconcurbench {h.version}\tPython {h.python}\t{h.cpus} CPUs\t"
                      f"clock {h.offset_ns / 1e6:+.3f} ms (± {h.rtt_ns / 2e6:.3f})", highlight=False, soft_wrap=True)
    finally:
        found.close()
