"""A nightly CI job replayed on this machine, night by night, as the nightly recipe of docs/history.md runs it: one
real run a night added with `run --history STORE --label branch=main --label night=N`, then `history check --store
STORE --run RUN_ID` on that run. Two plans:

- `commit-delay` (the default): benchmarks/scenarios/history-replay.yaml on the embedded PostgreSQL (a fresh
  server each night); from night FLAT + 1 on the run passes --param commit_delay=DELAY, which the scenario sets
  with commit_siblings 0, so every commit that wrote WAL waits DELAY microseconds; after SLOW nights it is 0 again
  (the fix). The first night the gate is red, its new findings are acknowledged (`history ack`), as a person would.
- `job-queue`: benchmarks/scenarios/job-queue.yaml (FOR UPDATE against SKIP LOCKED, 4 and 16 clients, --repeat 3)
  on a user's PostgreSQL 15 through `--target dsn`: Debian's PostgreSQL run by this script as a cluster of its
  own on a free loopback port as an unprivileged user, reached by a role `bench` that is not a superuser and logs
  in with a password, removed at the end. 36 nights: 1-3 beside a busy neighbour (a process that keeps one CPU
  busy through the night's run), 4-8 quiet, 9-11 the neighbour again, 12-18 quiet, 19-26 the server logs every
  statement (the cluster's owner runs ALTER SYSTEM SET log_statement = 'all' and reloads; reset on night 27),
  from night 27 to the end commit_delay = 300 with commit_siblings = 0. No `history ack` unless --ack-first.

Every night's run directory is kept under OUT/runs, the store is OUT/history.db, each check's output and JUnit
report under OUT/checks, and OUT/plan.json records the plan and each night (what was injected, the run id, the
labels, start and end times, the exit codes and cause lines), written again after every night. One row a night is
printed: the night, what was injected, the tps of each variant and client count (the mean of the run's repeats),
what others used of the CPUs while the run's load paused (the run's own record), the injected settings as the run
recorded them (`settings_in_effect`), the check's exit code (5 is red) and its cause lines; then the store's
findings. The neighbour is always stopped and the cluster always removed, also on Ctrl-C or an error.

`--rejudge OUT` replays the gate over an earlier replay's stored runs: night by night in the order of
OUT/plan.json, `history add RUN_DIR` with the night's labels into a fresh store, then `history check --run`,
printing the same table from the stored figures. It runs no server and takes a minute or two for 36 nights, so the
gate's code can be judged on real nights.

    python benchmarks/history_replay.py [--plan commit-delay] [--flat 14] [--slow 10] [--fixed 12] [--delay 2000]
    flock /work/heavy.lock python benchmarks/history_replay.py --plan job-queue --out DIR [--nights 1-36] [--ack-first]
    python benchmarks/history_replay.py --rejudge DIR [--store NEW.db] [--ack-first]

Run a recording alone on the machine (it measures). docs/history.md shows the output.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCENARIOS = {"commit-delay": HERE / "scenarios" / "history-replay.yaml", "job-queue": HERE / "scenarios" / "job-queue.yaml"}
LABELS = {"branch": "main"}  # the recipe's label; each night adds night=N
PASSWORD_ENV = "REPLAY_BENCH_PW"
RUN_TIMEOUT = 900  # seconds a night's run may take before it is stopped
PLAN_FILE = "plan.json"


class PlanError(Exception):
    """A plan file or an option the replay cannot use: one paragraph, exit 2."""


@dataclass
class Night:
    """One night of a plan: what is injected, and what came of it once run."""

    night: int
    injected: str
    neighbour: bool = False  # a process keeps one CPU busy through the night's run
    server: dict = field(default_factory=dict)  # ALTER SYSTEM settings in effect on the user's server that night
    params: dict = field(default_factory=dict)  # --param of the night's run
    labels: dict = field(default_factory=dict)
    run_id: str | None = None
    run_dir: str | None = None  # relative to OUT
    run_exit: int | None = None
    run_error: str | None = None
    neighbour_alive: bool | None = None  # the neighbour still ran when the night's run ended
    started: str | None = None
    ended: str | None = None
    check_exit: int | None = None
    causes: list = field(default_factory=list)
    acked: list = field(default_factory=list)


# -- the plans ---------------------------------------------------------------------------------------------------
def commit_delay_nights(flat: int, slow: int, fixed: int, delay: int) -> list[Night]:
    kinds = [0] * flat + [delay] * slow + [0] * fixed
    return [Night(n, f"commit_delay={d}µs" if d else "-", params={"commit_delay": d}) for n, d in enumerate(kinds, 1)]


LOGGING = {"log_statement": "all"}
DELAY = {"commit_delay": "300", "commit_siblings": "0"}


def job_queue_nights(first: dict | None = None) -> list[Night]:
    """The 36 nights of issue 46's replay; `first`: the settings of nights 19-26 (default: logging every
    statement)."""
    first = first or LOGGING
    nights = []
    for n in range(1, 37):
        if n <= 3 or 9 <= n <= 11:
            nights.append(Night(n, "busy neighbour (1 CPU)", neighbour=True))
        elif 19 <= n <= 26:
            nights.append(Night(n, ", ".join(f"{k}={v}" for k, v in first.items()), server=dict(first)))
        elif n >= 27:
            nights.append(Night(n, "commit_delay=300µs", server=dict(DELAY)))
        else:
            nights.append(Night(n, "-"))
    return nights


def chosen(nights: list[Night], spec: str | None) -> list[Night]:
    """The nights SPEC names ("1-36", "1,19,27", "1-3,9"), each with its own injection; all when None."""
    if not spec:
        return nights
    wanted: set[int] = set()
    try:
        for part in spec.split(","):
            low, _, high = part.strip().partition("-")
            wanted.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise PlanError(f"--nights {spec!r}: expected night numbers and ranges such as 1-3,19,27") from None
    unknown = sorted(wanted - {n.night for n in nights})
    if unknown:
        raise PlanError(f"--nights {spec!r}: the plan has nights 1-{len(nights)}, not {unknown}")
    return [n for n in nights if n.night in wanted]


# -- running things ----------------------------------------------------------------------------------------------
def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def cli(*args, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """A concurbench command in a process of its own; on Ctrl-C (or SIGTERM here) it is sent SIGTERM, which it takes
    as a Ctrl-C (a process started in the background ignores SIGINT), and given a minute to keep what it measured
    and let go of what it made; then it is killed."""
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@contextmanager
def neighbour():
    """A process that keeps one CPU busy until the block ends (a Python busy loop); always stopped. Yields a
    function that says whether it still runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        time.sleep(0.5)  # busy before the run looks at the machine
        yield lambda: proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


class Cluster:
    """Debian's PostgreSQL as a user's server: a cluster of its own on a free port of 127.0.0.1, started as an
    unprivileged user (initdb refuses root), a role `bench` (LOGIN CREATEDB, a password, not a superuser) for the
    runs; the script, as the cluster's owner, changes its settings with ALTER SYSTEM and a reload."""

    def __init__(self):
        from concurbench.provisioners.local import LocalPostgres

        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
        if not found:
            raise PlanError("the job-queue plan runs on Debian's PostgreSQL (/usr/lib/postgresql/N), and none is "
                            "installed: apt-get install postgresql (.ci/run does it)")
        self.pg = LocalPostgres(found[-1].parent.parent, {}, name="debian", database="postgres", mark=False)
        self.password = secrets.token_urlsafe(18)
        self.settings: dict = {}  # what ALTER SYSTEM holds now

    def __enter__(self) -> "Cluster":
        try:
            self.admin = self.pg.start().conninfo
            self.sql("SET password_encryption = 'scram-sha-256'",
                     f"CREATE ROLE bench LOGIN CREATEDB PASSWORD '{self.password}'")
            hba = self.pg.data / "pg_hba.conf"
            hba.write_text("host all bench 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
            self.sql("SELECT pg_reload_conf()")
            self.version = self.query("SHOW server_version")
        except BaseException:
            self.pg.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.pg.stop()  # stops the server and removes its directory, ALTER SYSTEM's file with it

    @property
    def dsn(self) -> str:
        return f"postgresql://bench@127.0.0.1:{self.pg.port}/"

    def sql(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)

    def query(self, sql: str) -> str:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            return conn.execute(sql).fetchone()[0]

    def configure(self, wanted: dict) -> None:
        """ALTER SYSTEM as `wanted` says (a setting no longer wanted is reset), a reload, and a wait until a new
        session sees every one of them."""
        if wanted == self.settings:
            return
        from concurbench.engines.quoting import pg_literal, pg_setting

        statements = [f"ALTER SYSTEM RESET {pg_setting(k)}" for k in self.settings if k not in wanted]
        statements += [f"ALTER SYSTEM SET {pg_setting(k)} = {pg_literal(str(v))}" for k, v in wanted.items()]
        self.sql(*statements, "SELECT pg_reload_conf()")
        self.settings = dict(wanted)
        import psycopg

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with psycopg.connect(self.admin, autocommit=True) as conn:
                pending = conn.execute("SELECT count(*) FROM pg_file_settings WHERE applied = false").fetchone()[0]
            if pending == 0:
                return
            time.sleep(0.1)
        raise PlanError(f"the server did not take its new settings {wanted} within 10 s of pg_reload_conf()")


# -- what a night shows ------------------------------------------------------------------------------------------
def figures(run_dir: Path, watched: set[str]) -> dict:
    """From a stored run: the mean tps of each variant@clients over its runs that ended ok, what others used of
    the CPUs while the run's load paused, and the watched settings as the server recorded them."""
    import concurbench

    run = concurbench.load(run_dir)
    tps: dict[str, list[float]] = {}
    for vr in run.variant_runs:
        label = vr.variant + (f"@{vr.point}" if vr.point is not None else "")
        values = [vr.own(name).get("tps") for name, p in vr.pools.items() if p.measure]
        if vr.complete and values and all(isinstance(v, (int, float)) for v in values):
            tps.setdefault(label, []).append(sum(values))
    server = run.servers[0] if run.servers else None
    in_effect = (server.settings_in_effect or {}) if server is not None else {}
    return {"tps": {k: sum(v) / len(v) for k, v in tps.items()},
            "others": run.machine.others if run.machine is not None else None,
            "others_cpus": list(run.machine.others_cpus) if run.machine is not None else [],
            "settings": {k: in_effect[k] for k in sorted(watched) if k in in_effect},
            "recorded": server is not None and server.settings_in_effect is not None}


def cause_lines(junit: Path, stdout: str) -> list[str]:
    """The check's cause lines: its JUnit report's failures (one per cause), else the summary's list items."""
    try:
        return [f.get("message", "") for f in ET.parse(junit).getroot().iter("failure")]
    except (OSError, ET.ParseError):
        return [line[2:] for line in stdout.splitlines() if line.startswith("- ")]


def check(store: Path, run_id: str, checks: Path, night: int) -> tuple[int, list[str]]:
    checks.mkdir(parents=True, exist_ok=True)
    junit = checks / f"night-{night:02d}.xml"
    junit.unlink(missing_ok=True)
    done = cli("history", "check", "--store", store, "--run", run_id, "--junit", junit)
    (checks / f"night-{night:02d}.txt").write_text(done.stdout + done.stderr)
    causes = cause_lines(junit, done.stdout) if done.returncode in (0, 5) else [last_line(done.stderr)]
    told = ("Resolved by this check", "New machine:", "No baseline:", "Expectation for", "Made on a busy machine")
    causes += [line for line in done.stdout.splitlines() if line.startswith(told)]
    return done.returncode, causes


def ack_new(store: Path, reason: str) -> list[str]:
    """`history ack` of every new finding; the ids acknowledged."""
    findings = show_findings(store)
    new = [f["id"] for f in findings if f.get("state") == "new"]
    if new:
        done = cli("history", "ack", *new, "--reason", reason, "--store", store)
        if done.returncode != 0:
            return [f"ack failed ({done.returncode}): {last_line(done.stderr)}"]
    return new


def show_findings(store: Path) -> list[dict]:
    done = cli("history", "show", "--store", store, "--format", "json")
    try:
        return json.loads(done.stdout).get("findings") or []
    except json.JSONDecodeError:
        return []


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class Table:
    """The night-by-night table, its columns (variant@clients) fixed by the first night that has them."""

    def __init__(self, watched: set[str]):
        self.watched = watched
        self.columns: list[str] = []

    def row(self, night: Night, shown: dict | None) -> str:
        if shown is not None and not self.columns:
            self.columns = sorted(shown["tps"], key=lambda c: (c.split("@")[0], int(c.split("@")[1]) if "@" in c else 0))
            print("| night | injected | " + " | ".join(f"{c} tps" for c in self.columns) +
                  " | others' CPUs | settings recorded | exit | cause lines |")
            print("|---:|---|" + "---:|" * len(self.columns) + "---:|---|---:|---|")
        if shown is None:
            return (f"| {night.night} | {night.injected} | no run: {night.run_error or 'exit ' + str(night.run_exit)} "
                    f"|" + " |" * (len(self.columns) + 2) + f" {night.check_exit if night.check_exit is not None else '–'} | |")
        tps = " | ".join(f"{shown['tps'][c]:,.0f}" if c in shown["tps"] else "–" for c in self.columns)
        others = "–" if shown["others"] is None else f"{shown['others']:.2f}"
        settings = ", ".join(f"{k}={v}" for k, v in shown["settings"].items()) or ("-" if shown["recorded"] else "not recorded")
        said = "<br>".join(night.causes) if night.causes else ""
        if night.check_exit == 0:
            said = "green" + (f"<br>{said}" if said else "")
        if night.acked:
            said += f"<br>then `history ack {' '.join(night.acked)}`"
        return f"| {night.night} | {night.injected} | {tps} | {others} | {settings} | {night.check_exit} | {said} |"


def print_findings(store: Path) -> None:
    print("\nfindings at the end:")
    for f in show_findings(store):
        where = "/".join(str(f.get(k)) for k in ("variant", "pool") if f.get(k) is not None)
        clients = f" · {f['clients']} clients" if f.get("clients") is not None else ""
        change = f"{f['change']:+.1%}" if isinstance(f.get("change"), (int, float)) else f.get("change", "")
        extra = "".join(f", {k} {f[k]}" for k in ("resolved_run", "reason") if f.get(k))
        print(f"  {f.get('id')} {f.get('state')}: {where}{clients} {f.get('metric')} {change} from {f.get('first_run')}"
              f"{extra}")


# -- the plan file -------------------------------------------------------------------------------------------------
def write_plan(out: Path, meta: dict, nights: list[Night]) -> None:
    path = out / PLAN_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({**meta, "nights": [asdict(n) for n in nights]}, indent=1, ensure_ascii=False))
    partial.replace(path)


def read_plan(out: Path) -> tuple[dict, list[Night]]:
    """An earlier replay's plan file: its meta and its nights in night order. A PlanError names the file and what is
    wrong with it (missing, not JSON, a night without its number or run, a night twice, a run directory gone)."""
    path = out / PLAN_FILE
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the replay's plan ({exc.strerror or exc}); --rejudge takes the --out "
                        f"folder of an earlier replay") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("nights"), list):
        raise PlanError(f"{path}: expected an object with a list `nights`")
    known = set(Night.__dataclass_fields__)
    nights = []
    for i, entry in enumerate(data["nights"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("night"), int):
            raise PlanError(f"{path}: nights[{i}]: expected an object with a whole number `night`")
        try:
            nights.append(Night(**{k: v for k, v in entry.items() if k in known}))
        except TypeError as exc:
            raise PlanError(f"{path}: nights[{i}]: {exc}") from None
    seen = [n.night for n in nights]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise PlanError(f"{path}: night {twice[0]} is recorded more than once")
    nights.sort(key=lambda n: n.night)
    for n in nights:
        if n.run_dir and not (out / n.run_dir / "manifest.json").is_file():
            raise PlanError(f"{path}: night {n.night}: its run directory {out / n.run_dir} has no manifest.json")
    return {k: v for k, v in data.items() if k != "nights"}, nights


def watched_settings(nights: list[Night]) -> set[str]:
    return {k for n in nights for k in n.server} | {k for n in nights for k in n.params}


# -- the two modes ---------------------------------------------------------------------------------------------------
def _settings(text: str | None) -> dict | None:
    """`--first NAME=VALUE[,NAME=VALUE]` as settings (None: the plan's own)."""
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise PlanError(f"--first {text!r}: expected NAME=VALUE[,NAME=VALUE], such as log_statement=all")
        out[name.strip()] = value.strip()
    return out


def record(args) -> None:
    from concurbench.results.store import cpu_model

    plan = args.plan
    nights = chosen(commit_delay_nights(args.flat, args.slow, args.fixed, args.delay) if plan == "commit-delay"
                    else job_queue_nights(_settings(args.first)), args.nights)
    ack_first = args.ack_first or plan == "commit-delay"
    out = args.out or Path(tempfile.mkdtemp(prefix="history-replay-"))
    out.mkdir(parents=True, exist_ok=True)
    if (out / PLAN_FILE).exists():
        raise PlanError(f"{out} holds a replay already ({out / PLAN_FILE}): give another --out, or --rejudge {out}")
    store, runs, checks = out / "history.db", out / "runs", out / "checks"
    scenario = SCENARIOS[plan]
    watched = watched_settings(nights)
    table = Table(watched)
    started = time.perf_counter()
    with ExitStack() as stack:
        cluster = stack.enter_context(Cluster()) if plan == "job-queue" else None
        target = ["--target", "dsn", "--dsn", cluster.dsn, "--password-env", PASSWORD_ENV] if cluster else []
        env = {PASSWORD_ENV: cluster.password} if cluster else {}
        where = (f"Debian's PostgreSQL {cluster.version} as a user's cluster at {cluster.dsn} (--target dsn)"
                 if cluster else "the embedded PostgreSQL")
        meta = {"plan": plan, "scenario": str(scenario.relative_to(HERE.parent)), "where": where,
                "dsn": cluster.dsn if cluster else None, "store": store.name, "ack_first": ack_first,
                "repeat": 3 if plan == "job-queue" else 1, "cpu_model": cpu_model(), "cpus": os.cpu_count(),
                "started": now(), "ended": None}
        print(f"{date_line()}; {len(nights)} nights of {scenario.name} on {where}; out {out}\n")
        acked, done_nights = False, []
        for night in nights:
            done_nights.append(night)
            if cluster is not None:
                cluster.configure(night.server)
            night.labels = {**LABELS, "night": str(night.night)}
            night.started = now()
            try:
                with ExitStack() as busy:
                    alive = busy.enter_context(neighbour()) if night.neighbour else None
                    done = cli("run", scenario, *target, "--repeat", meta["repeat"], "--out", runs, "--history",
                               store, *[a for k, v in night.params.items() for a in ("--param", f"{k}={v}")],
                               *[a for k, v in night.labels.items() for a in ("--label", f"{k}={v}")],
                               env=env, timeout=RUN_TIMEOUT)
                    night.neighbour_alive = alive() if alive else None
            except KeyboardInterrupt:
                night.ended, night.run_error = now(), "interrupted (its run directory, if any, is under runs/)"
                write_plan(out, meta, done_nights)
                raise
            night.ended, night.run_exit = now(), done.returncode
            run_dir = Path(last_line(done.stdout)) if done.stdout.strip() else None
            if run_dir is not None and (run_dir / "manifest.json").is_file():
                night.run_id, night.run_dir = run_dir.name, str(run_dir.resolve().relative_to(out.resolve()))
            if done.returncode != 0:
                night.run_error = last_line(done.stderr)
            shown = None
            if night.run_id and done.returncode in (0, 1):  # 1: a run that failed is added as it ended, and gated
                night.check_exit, night.causes = check(store, night.run_id, checks, night.night)
                if night.check_exit == 5 and ack_first and not acked:
                    night.acked, acked = ack_new(store, f"{night.injected} on purpose (replay night {night.night})"), True
                shown = figures(out / night.run_dir, watched)
            write_plan(out, meta, done_nights)
            print(table.row(night, shown), flush=True)
        meta["ended"] = now()
        write_plan(out, meta, done_nights)
    print_findings(store)
    print(f"\n{time.perf_counter() - started:.0f} s")


def rejudge(args) -> None:
    out = args.rejudge
    meta, nights = read_plan(out)
    if args.store is not None and args.store.exists():
        raise PlanError(f"--store {args.store}: the file exists; --rejudge adds the nights to a fresh store")
    store = args.store or Path(tempfile.mkdtemp(prefix="history-rejudge-")) / "history.db"
    checks = store.parent / f"{store.stem}-checks"
    ack_first = args.ack_first or bool(meta.get("ack_first"))
    watched = watched_settings(nights)
    table = Table(watched)
    started = time.perf_counter()
    print(f"{date_line()}; rejudging {len(nights)} nights of {out / PLAN_FILE} ({meta.get('plan')}: "
          f"{meta.get('where')}, recorded {meta.get('started')}) into {store}\n")
    acked = False
    for night in nights:
        night.check_exit, night.causes, night.acked = None, [], []
        if not night.run_dir:
            print(table.row(night, None))
            continue
        labels = night.labels or {**LABELS, "night": str(night.night)}
        added = cli("history", "add", out / night.run_dir, "--store", store,
                    *[a for k, v in labels.items() for a in ("--label", f"{k}={v}")])
        if added.returncode != 0:
            night.check_exit, night.causes = added.returncode, [f"history add failed: {last_line(added.stderr)}"]
        else:
            night.check_exit, night.causes = check(store, night.run_id, checks, night.night)
            if night.check_exit == 5 and ack_first and not acked:
                night.acked, acked = ack_new(store, f"{night.injected} on purpose (replay night {night.night})"), True
        print(table.row(night, figures(out / night.run_dir, watched)), flush=True)
    print_findings(store)
    print(f"\n{time.perf_counter() - started:.0f} s (store {store})")


def date_line() -> str:
    from concurbench.results.store import cpu_model

    return f"{datetime.now().date().isoformat()}, {cpu_model()}, {os.cpu_count()} CPUs"


def interrupted(signum, frame) -> None:
    """SIGTERM as a Ctrl-C: the night's run is stopped and kept, the neighbour stopped, the cluster removed."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", choices=sorted(SCENARIOS), default="commit-delay")
    ap.add_argument("--flat", type=int, default=14, help="commit-delay: quiet nights before the regression")
    ap.add_argument("--slow", type=int, default=10, help="commit-delay: nights with commit_delay")
    ap.add_argument("--first", default=None, metavar="NAME=VALUE[,...]",
                    help="job-queue: the server settings of nights 19-26, the first regression (default "
                         "log_statement=all); the owner sets them with ALTER SYSTEM and takes them back on night 27")
    ap.add_argument("--fixed", type=int, default=12, help="commit-delay: nights after the fix")
    ap.add_argument("--delay", type=int, default=2000, help="commit-delay: commit_delay of the slow nights, µs")
    ap.add_argument("--nights", default=None, help="only these nights of the plan, each with its own injection "
                                                   "(1-3,19,27): a short trial")
    ap.add_argument("--ack-first", action="store_true",
                    help="acknowledge the new findings the first night the gate is red (commit-delay always does)")
    ap.add_argument("--out", type=Path, default=None, help="where the runs, the store and plan.json go (default: a "
                                                           "temp dir)")
    ap.add_argument("--rejudge", type=Path, default=None, metavar="OUT",
                    help="replay the gate over the runs of an earlier replay's OUT, into a fresh store")
    ap.add_argument("--store", type=Path, default=None, help="--rejudge: the fresh store (default: a temp dir)")
    args = ap.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, interrupted)
    try:
        (rejudge if args.rejudge is not None else record)(args)
    except PlanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the nights so far are in plan.json; the neighbour and the cluster are gone",
              file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
