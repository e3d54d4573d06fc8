""".github/history-store.sh, the nightly workflow's and the ack procedure's way to the store's branch, run as
they run it: real git, a local bare repository as `origin`, the real `concurbench history init`, `merge`
and `ack`, on small stores made from records (tests/history_copies.py). A remote that cannot be reached is
a failure that makes nothing, a branch that does not exist yet starts the history; an empty file is never
pushed over the branch; two copies pushed at once (each with its own night) keep both nights; a person's
`history ack` pushed while the nightly job pushes keeps both the acknowledgement and the night's run."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from history_copies import add, finding, night, row

from concurbench.history.findings import FindingState
from concurbench.history.store import open_store

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".github" / "history-store.sh"
BRANCH = "concurbench-history"
pytestmark = pytest.mark.e2e

if shutil.which("git") is None or shutil.which("bash") is None:  # pragma: no cover - both are on every CI runner
    pytest.skip("git and bash are needed to run the store's script", allow_module_level=True)


@pytest.fixture()
def env(tmp_path) -> dict[str, str]:
    """No git configuration of this machine (so no identity: the script supplies one), and `concurbench` on
    PATH as this Python's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "concurbench"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m concurbench.cli.main "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    home = tmp_path / "home"
    home.mkdir()
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(home / "gitconfig"), "STORE_BRANCH": BRANCH}


def git(*args, cwd: Path, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, check=check,
                          timeout=60)


def copy(tmp_path: Path, name: str, env: dict, origin: Path | str) -> Path:
    """A checkout's stand-in: a repository whose `origin` is the bare one."""
    where = tmp_path / name
    where.mkdir()
    git("init", "-q", cwd=where, env=env)
    git("remote", "add", "origin", origin, cwd=where, env=env)
    return where


def script(where: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=where, env=env, capture_output=True, text=True,
                          timeout=120)


def start(where: Path, env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(["bash", str(SCRIPT), *args], cwd=where, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture()
def origin(tmp_path, env) -> Path:
    bare = tmp_path / "origin.git"
    git("init", "-q", "--bare", bare, cwd=tmp_path, env=env)
    return bare


def branch_head(origin: Path, env: dict) -> str | None:
    done = git("rev-parse", "--verify", "--quiet", f"refs/heads/{BRANCH}", cwd=origin, env=env, check=False)
    return done.stdout.strip() or None


def branch_store(origin: Path, env: dict, tmp_path: Path) -> Path:
    """The store the branch holds now, as a file."""
    out = tmp_path / f"on-branch-{len(list(tmp_path.glob('on-branch-*')))}.db"
    out.write_bytes(subprocess.run(["git", "show", f"refs/heads/{BRANCH}:history.db"], cwd=origin, env=env,
                                   capture_output=True, check=True).stdout)
    return out


def run_ids(path: Path) -> set[str]:
    with open_store(path) as s:
        return {r.record.run_id for r in s.runs()}


def seeded(tmp_path: Path, env: dict, origin: Path, nights: range) -> str:
    """The branch made as the first night makes it (fetch: no branch; runs added; push), with these nights."""
    first = copy(tmp_path, "first", env, origin)
    done = script(first, env, "fetch")
    assert done.returncode == 0, done.stderr
    assert "no store yet: this night starts the history" in done.stderr
    assert (first / "history.db.lease").read_text().strip() == "none"
    add(first / "history.db", *nights)
    done = script(first, env, "push")
    assert done.returncode == 0, done.stderr
    return branch_head(origin, env)


def test_an_unreachable_remote_fails_and_makes_nothing_while_a_missing_branch_starts_the_history(tmp_path, env,
                                                                                                   origin):
    lost = copy(tmp_path, "lost", env, tmp_path / "no-such-remote.git")
    done = script(lost, env, "fetch")
    assert done.returncode == 1, done.stderr
    assert "cannot list origin's branches (git ls-remote exited 128)" in done.stderr
    assert sorted(p.name for p in lost.iterdir()) == [".git"]  # no store, empty or not, and no lease
    done = script(lost, env, "push")  # nor can anything be pushed from there
    assert done.returncode == 2 and "fetch the store first" in done.stderr

    head = seeded(tmp_path, env, origin, range(3))
    assert head is not None
    done = script(tmp_path / "first", env, "push")  # again, nothing changed: no new commit
    assert done.returncode == 0 and "nothing to push" in done.stderr and branch_head(origin, env) == head
    assert git("show", "-s", "--format=%P %an", head, cwd=origin, env=env).stdout.strip() == "concurbench history"
    assert git("ls-tree", "--name-only", head, cwd=origin, env=env).stdout.split() == ["history.db"]
    assert run_ids(branch_store(origin, env, tmp_path)) == {night(i).run_id for i in range(3)}
    later = copy(tmp_path, "later", env, origin)
    done = script(later, env, "fetch")
    assert done.returncode == 0 and "fetched history.db" in done.stderr, done.stderr
    assert (later / "history.db.lease").read_text().strip() == head
    assert run_ids(later / "history.db") == {night(i).run_id for i in range(3)}
    assert not list(later.glob("history.db.fetched.*"))  # the temporary file is gone

    # a branch whose commit holds no store: a failure, not a new history, and no empty file
    other = copy(tmp_path, "other", env, origin)
    (other / "README").write_text("not a store\n")
    git("add", "README", cwd=other, env=env)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x", cwd=other, env=env)
    git("push", "-q", "origin", f"HEAD:refs/heads/{BRANCH}-wrong", cwd=other, env=env)
    done = script(copy(tmp_path, "wrong", env, origin), {**env, "STORE_BRANCH": f"{BRANCH}-wrong"}, "fetch")
    assert done.returncode == 1 and "holds no history.db" in done.stderr
    assert sorted(p.name for p in (tmp_path / "wrong").iterdir()) == [".git"]


def test_an_empty_or_foreign_file_is_never_pushed_over_the_branch(tmp_path, env, origin):
    head = seeded(tmp_path, env, origin, range(3))
    mine = copy(tmp_path, "mine", env, origin)
    assert script(mine, env, "fetch").returncode == 0
    (mine / "history.db").write_bytes(b"")  # what a failed copy leaves
    done = script(mine, env, "push")
    assert done.returncode == 2 and "never pushed" in done.stderr
    (mine / "history.db").write_text("a text file, not a store\n" * 50)
    done = script(mine, env, "push")
    assert done.returncode == 1 and "nothing was pushed" in done.stderr and "not an SQLite database" in done.stderr
    assert branch_head(origin, env) == head
    assert run_ids(branch_store(origin, env, tmp_path)) == {night(i).run_id for i in range(3)}


def test_two_copies_pushed_at_once_keep_both_nights(tmp_path, env, origin):
    seeded(tmp_path, env, origin, range(3))
    copies = [copy(tmp_path, name, env, origin) for name in ("night-a", "night-b")]
    for where, i in zip(copies, (3, 4)):
        assert script(where, env, "fetch").returncode == 0
        add(where / "history.db", i)
    procs = [start(where, env, "push") for where in copies]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    said = [err for _, err in outs]
    assert sum("someone pushed concurbench-history meanwhile" in err for err in said) == 1, said  # the second
    assert run_ids(branch_store(origin, env, tmp_path)) == {night(i).run_id for i in range(5)}
    assert git("rev-list", "--count", f"refs/heads/{BRANCH}", cwd=origin, env=env).stdout.strip() == "1"


def test_an_ack_pushed_while_the_nightly_job_pushes_keeps_both(tmp_path, env, origin):
    first = copy(tmp_path, "first", env, origin)
    assert script(first, env, "fetch").returncode == 0
    add(first / "history.db", *range(8))
    with open_store(first / "history.db") as s:
        (found,) = s.save_findings([finding(s, 5, low=4, high=6)], [])
    assert script(first, env, "push").returncode == 0
    person, nightly = copy(tmp_path, "person", env, origin), copy(tmp_path, "nightly", env, origin)
    for where in (person, nightly):
        assert script(where, env, "fetch").returncode == 0
    done = subprocess.run([sys.executable, "-m", "concurbench.cli.main", "history", "ack", found.name, "--reason",
                           "new index on purpose", "--store", person / "history.db"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    add(nightly / "history.db", 8)
    procs = [start(where, env, "push") for where in (nightly, person)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    kept = branch_store(origin, env, tmp_path)
    assert run_ids(kept) == {night(i).run_id for i in range(9)}
    with open_store(kept) as s:
        (f,) = s.findings()
        assert f.state is FindingState.ACKNOWLEDGED and f.reason == "new index on purpose"
        assert f.first_run == row(s, 5)


WORKFLOW = ROOT / ".github" / "workflows" / "history.yml"
FIXTURE_RUN = ROOT / "tests" / "fixtures" / "runs" / "temp-table-churn"


def steps() -> dict[str, str]:
    """The workflow's shell steps by name, with GitHub's expressions filled in as a run would."""
    doc = YAML(typ="safe").load(WORKFLOW.read_text())
    return {s["name"]: s["run"].replace("${{ github.ref_name }}", "main").replace("${{ github.run_id }}", "42")
            for s in doc["jobs"]["nightly"]["steps"] if "run" in s}


def test_the_workflow_reaches_the_store_only_through_the_script():
    shell = steps()
    for name, text in shell.items():
        done = subprocess.run(["bash", "-n", "-c", text], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, (name, done.stderr)
    store_steps = "\n".join(text for text in shell.values() if "history-store.sh" in text)
    assert ".github/history-store.sh fetch" in store_steps and ".github/history-store.sh push" in store_steps
    everything = "\n".join(shell.values())
    assert "--force " not in everything and "git show" not in everything and "git push" not in everything


def test_the_workflow_gates_only_the_runs_the_store_holds_with_a_stand_in_for_the_runs(tmp_path, env):
    """The night's runs step and the gate, as the workflow has them, with a stand-in for `concurbench run`
    (a real night is three runs of minutes each): on PostgreSQL 16 the run is added, on 17 its add fails
    (exit 6), on 18 no run directory is made (exit 2). RUNS holds the first alone, so the gate checks it
    (exit 0) instead of refusing a run the store does not hold (exit 2) and leaving 16 ungated."""
    real = Path(env["PATH"].split(os.pathsep)[0]) / "concurbench"
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    (stand_in / "concurbench").write_text(f"""#!/bin/bash
[ "$1" = run ] || exec "{real}" "$@"
while [ $# -gt 0 ]; do [ "$1" = --server-version ] && version=$2; shift; done
dir=runs/20261201T0241${{version}}Z-row-lock
case $version in
  16) mkdir -p runs && cp -r "{FIXTURE_RUN}" "$dir" && "{real}" history add "$dir" --store history.db >&2 || exit 1
      echo "$dir"; exit 0 ;;
  17) mkdir -p runs && cp -r "{FIXTURE_RUN}" "$dir"; echo "$dir"; exit 6 ;;
  *) echo "error: no PostgreSQL $version here" >&2; exit 2 ;;
esac
""")
    (stand_in / "concurbench").chmod(0o755)
    night_dir = tmp_path / "job"
    night_dir.mkdir()
    job = {**env, "PATH": f"{stand_in}{os.pathsep}{env['PATH']}", "SCENARIO": "row-lock.yaml",
           "GITHUB_ENV": str(tmp_path / "github_env"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    shell = steps()
    done = subprocess.run(["bash", "-c", shell["The history as a page"]], cwd=night_dir, env=job, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "no history store here" in done.stdout  # the fetch failed: no page, said so
    assert subprocess.run([str(real), "history", "init", "history.db"], cwd=night_dir, env=job,
                          capture_output=True).returncode == 0
    done = subprocess.run(["bash", "-e", "-c", shell["Tonight's runs, added to the store"]], cwd=night_dir, env=job,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 6, done.stdout + done.stderr  # the first failure's code
    assert "the run on PostgreSQL 17 ended with exit code 6" in done.stdout
    assert "PostgreSQL 17: tonight's run is not in the store" in done.stdout
    assert "PostgreSQL 18: tonight's run is not in the store" in done.stdout
    (line,) = (tmp_path / "github_env").read_text().splitlines()
    key, _, runs = line.partition("=")
    assert key == "RUNS" and runs.split() == ["20261201T024116Z-row-lock"]
    gate = {**job, "RUNS": line.partition("=")[2]}
    done = subprocess.run(["bash", "-e", "-c", shell["Gate on tonight's runs"]], cwd=night_dir, env=gate,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(["bash", "-e", "-c", shell["Gate on tonight's runs"]], cwd=night_dir,
                          env={**gate, "RUNS": " "}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "nothing to gate" in done.stdout
