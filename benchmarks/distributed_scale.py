"""Does load from more hosts give more throughput? `run --cluster` with 1, 2 and 3 load hosts against one server.

Every load host is the engine's real worker process (`concurbench cluster join`), in a network namespace of its
own, and held to a fraction of a CPU (a cgroup's CPU quota, --quota), so that the client side is the bottleneck
and throughput should follow the number of hosts. The server (the embedded PostgreSQL), the cluster's scheduler
and the coordinator (`concurbench.run(..., cluster=...)`, the dsn target) share a namespace of their own, joined
to the hosts' by a bridge; every address is inside the namespaces this script makes (10.231.7.0/24), and it
deletes them, and the cgroups, at the end, also after a failure or a Ctrl-C.

For each host count it prints the merged throughput and its ratio to one host's (goals: 2 hosts >= 1.8x, 3 hosts
>= 2.5x), each host's throughput and CPUs used, whether the merged p50/p95/p99 equal those of the hosts'
histograms added by hand, and how closely the hosts' windows started: the spread of their starts on
CLOCK_MONOTONIC (which every namespace of one machine shares, so it is the true spread) and the clock offsets'
uncertainty. `--neighbour N` runs N busy processes beside it (outside the hosts' cgroups).

    flock /work/heavy.lock python benchmarks/distributed_scale.py [--quota 0.25] [--clients 12] [--seconds 8]
        [--neighbour 1] [--rounds 1]

Needs root (ip netns, cgroups), iproute2, and concurbench installed with its [cluster] extra.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "benchmarks" / "scenarios" / "distributed-scale.yaml"
NET = "10.231.7"  # the namespaces' subnet: .1 the server's namespace, .11, .12, .13 the hosts
CGROUP_V1 = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000
HOSTS = 3


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def cpu_model() -> str:
    names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
             if line.startswith("model name")]
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} CPUs"


# -- outside: namespaces, bridge, cgroups ---------------------------------------------------------------

class Network:
    """The server's namespace with a bridge, and HOSTS namespaces each joined to it by a veth pair."""

    def __init__(self, tag: str):
        self.server = f"cbs-{tag}"
        self.hosts = [f"cbh{i}-{tag}" for i in range(1, HOSTS + 1)]
        self.made: list[str] = []

    def up(self) -> None:
        sh("ip", "netns", "add", self.server)
        self.made.append(self.server)
        inside = ("ip", "netns", "exec", self.server)
        sh(*inside, "ip", "link", "set", "lo", "up")
        sh(*inside, "ip", "link", "add", "cbbr0", "type", "bridge")
        sh(*inside, "ip", "addr", "add", f"{NET}.1/24", "dev", "cbbr0")
        sh(*inside, "ip", "link", "set", "cbbr0", "up")
        for i, ns in enumerate(self.hosts, start=1):
            sh("ip", "netns", "add", ns)
            self.made.append(ns)
            # made inside the server's namespace, so no interface ever appears in the machine's own
            sh(*inside, "ip", "link", "add", f"cbv{i}", "type", "veth", "peer", "name", f"cbp{i}")
            sh(*inside, "ip", "link", "set", f"cbp{i}", "netns", ns)
            sh(*inside, "ip", "link", "set", f"cbv{i}", "master", "cbbr0", "up")
            host = ("ip", "netns", "exec", ns)
            sh(*host, "ip", "link", "set", "lo", "up")
            sh(*host, "ip", "addr", "add", f"{NET}.{10 + i}/24", "dev", f"cbp{i}")
            sh(*host, "ip", "link", "set", f"cbp{i}", "up")

    def down(self) -> None:
        for ns in reversed(self.made):
            sh("ip", "netns", "del", ns, check=False)  # takes its veth ends (and the bridge) with it


class Quotas:
    """One CPU cgroup per host, each held to `quota` of a CPU (cgroup v1's cpu controller, or v2's cpu.max)."""

    def __init__(self, tag: str, quota: float):
        v2 = Path("/sys/fs/cgroup/cgroup.controllers")
        self.base = CGROUP_V1 if CGROUP_V1.is_dir() else Path("/sys/fs/cgroup")
        self.v2 = not CGROUP_V1.is_dir() and v2.exists()
        self.dirs = [self.base / f"cb-{tag}-h{i}" for i in range(1, HOSTS + 1)]
        self.quota = quota

    def up(self) -> None:
        for path in self.dirs:
            path.mkdir()
            if self.v2:
                (path / "cpu.max").write_text(f"{int(self.quota * PERIOD_US)} {PERIOD_US}\n")
            else:
                (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
                (path / "cpu.cfs_quota_us").write_text(f"{int(self.quota * PERIOD_US)}\n")

    def down(self) -> None:
        for path in self.dirs:
            if not path.exists():
                continue
            procs = path / "cgroup.procs"
            for _ in range(50):
                if not procs.read_text().split():
                    break
                time.sleep(0.1)
            try:
                path.rmdir()
            except OSError as exc:
                print(f"could not remove the cgroup {path}: {exc}", file=sys.stderr)


def neighbours(count: int) -> list[subprocess.Popen]:
    """`count` processes that keep a CPU busy each, outside the hosts' cgroups."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(count)]


def seen_from_here(path: Path) -> str:
    """`path` as another mount namespace reaches it (`ip netns exec` mounts a /sys of its own, without cgroups)."""
    return f"/proc/{os.getpid()}/root{path}"


def outside(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        sys.exit("distributed_scale.py needs root (ip netns, cgroups)")
    tag = uuid.uuid4().hex[:6]
    net, quotas = Network(tag), Quotas(tag, args.quota)
    hogs: list[subprocess.Popen] = []
    try:
        net.up()
        quotas.up()
        hogs = neighbours(args.neighbour)
        inner = ["ip", "netns", "exec", net.server, sys.executable, __file__, "--inside", "--hosts-ns",
                 ",".join(net.hosts), "--cgroups", ",".join(seen_from_here(d) for d in quotas.dirs), "--quota", str(args.quota),
                 "--clients", str(args.clients), "--seconds", str(args.seconds), "--rounds", str(args.rounds),
                 "--neighbour", str(args.neighbour)]
        return subprocess.run(inner).returncode
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        quotas.down()
        net.down()


# -- inside the server's namespace: the server, the cluster, the runs ------------------------------------

def start_server(workdir: Path):
    from concurbench.provisioners.embedded import embedded_install
    from concurbench.provisioners.local import LocalPostgres

    hba = workdir / "pg_hba.conf"
    hba.write_text(f"local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all {NET}.0/24 trust\n")
    hba.chmod(0o644)
    server = LocalPostgres(embedded_install(), {"listen_addresses": f"127.0.0.1,{NET}.1", "hba_file": str(hba),
                                                "max_connections": "300"}, name="distributed-scale")
    server.start()
    return server


class Cluster:
    """A scheduler on the bridge's address and `count` hosts, each `concurbench cluster join` in its namespace
    and cgroup."""

    def __init__(self, workdir: Path, namespaces: list[str], cgroups: list[str], count: int):
        from concurbench.cluster import engine

        file = workdir / f"scheduler-{count}.json"
        self.procs = [subprocess.Popen(engine.scheduler_command(f"{NET}.1", 0, str(file)),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
        deadline = time.monotonic() + 60
        while not file.exists() or not file.read_text().strip():
            if time.monotonic() > deadline:
                raise RuntimeError("the scheduler gave no address within 60 s")
            time.sleep(0.05)
        time.sleep(0.1)
        self.address = json.loads(file.read_text())["address"]
        for i in range(count):
            join = (f"echo $$ > {cgroups[i]}/cgroup.procs && exec ip netns exec {namespaces[i]} {sys.executable} "
                    f"-m concurbench.cli.main cluster join {self.address} --name h{i + 1} --host {NET}.{11 + i} "
                    f"--local-directory {workdir}/h{i + 1}-{count}")
            with open(workdir / f"h{i + 1}-{count}.log", "wb") as log:
                self.procs.insert(0, subprocess.Popen(["sh", "-c", join], stdout=log, stderr=subprocess.STDOUT,
                                                      start_new_session=True))
        from concurbench.cluster.hosts import workers_of

        client = engine.client(self.address)
        try:
            while len(workers_of(client)) < count:
                if time.monotonic() > deadline:
                    tail = (workdir / f"h1-{count}.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"only {len(workers_of(client))} of {count} hosts joined within 60 s; "
                                       f"h1's log:\n{tail}")
                time.sleep(0.1)
        finally:
            client.close()

    def stop(self) -> None:
        import signal

        for proc in self.procs:  # the hosts first, then the scheduler
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)


def measured(run_dir: Path) -> dict:
    """The figures of one run: merged tps and percentiles, the hosts' own, the by-hand merge, the alignment."""
    from hdrh.histogram import HdrHistogram

    summary = json.loads((run_dir / "summary.json").read_text())
    (result,) = summary["results"]
    metrics = result["pools"]["readers"]["metrics"]
    hosts = result["hosts"]
    by_hand = None
    for h in hosts:
        hist = HdrHistogram.decode(h["txn_hist"].encode())
        if by_hand is None:
            by_hand = hist
        else:
            by_hand.add(hist)
    merged = {k: metrics["latency"][f"p{k}_ms"] for k in (50, 95, 99)}
    hand = {k: round(by_hand.get_value_at_percentile(float(k)) / 1e6, 4) for k in (50, 95, 99)}
    starts = [h["start_monotonic_ns"] for h in hosts]
    return {"status": result["status"], "tps": metrics["tps"], "transactions": metrics["transactions"],
            "host_tps": [h["tps"] for h in hosts], "host_cpus": [h["cpus_used"] for h in hosts],
            "host_transactions": [h["transactions"] for h in hosts], "merged": merged, "by_hand": hand,
            "equal": merged == hand and metrics["transactions"] == sum(h["transactions"] for h in hosts),
            "spread_ms": (max(starts) - min(starts)) / 1e6,
            "uncertainty_ms": max(h["clock_uncertainty_ms"] for h in hosts),
            "offsets_ms": [h["clock_offset_ms"] for h in hosts]}


def inside(args: argparse.Namespace) -> int:
    import concurbench
    from concurbench.api import Target

    namespaces, cgroups = args.hosts_ns.split(","), args.cgroups.split(",")
    workdir = Path(tempfile.mkdtemp(prefix="concurbench-scale-"))
    workdir.chmod(0o755)
    server = start_server(workdir)
    rows: dict[int, list[dict]] = {1: [], 2: [], 3: []}
    try:
        dsn = f"postgresql://postgres@{NET}.1:{server.port}"
        for round_ in range(args.rounds):
            for count in (1, 2, 3):
                cluster = Cluster(workdir, namespaces, cgroups, count)
                try:
                    outcome = concurbench.run(SCENARIO, target=Target("dsn", dsn=dsn), out_dir=workdir / "runs",
                                              params={"clients": str(args.clients), "seconds": str(args.seconds)},
                                              cluster=cluster.address)
                finally:
                    cluster.stop()
                if outcome.error is not None:
                    print(f"{count} hosts: {outcome.error.message}", file=sys.stderr)
                    return 1
                rows[count].append(measured(outcome.run_dir))
                r = rows[count][-1]
                print(f"round {round_ + 1}, {count} host(s): {r['tps']:,.0f} tps; hosts {r['host_tps']} tps, "
                      f"{r['host_cpus']} CPUs used; start spread {r['spread_ms']:.3f} ms", flush=True)
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    report(rows, args)
    return 0


def report(rows: dict[int, list[dict]], args: argparse.Namespace) -> None:
    base = sum(r["tps"] for r in rows[1]) / len(rows[1])
    print(f"\n{cpu_model()}; each host held to {args.quota:g} CPU; {args.clients} clients; {args.seconds} s windows; "
          f"{args.neighbour} busy neighbour process(es); {args.rounds} round(s)")
    print("| Hosts | TPS (mean) | vs 1 host | goal | per host tps | CPUs used per host | merged p50/p95/p99 ms | "
          "= hosts' histograms by hand | start spread ms | clock uncertainty ms |")
    print("|---:|---:|---:|---|---|---|---|---|---:|---:|")
    goals = {1: "", 2: ">= 1.8x", 3: ">= 2.5x"}
    for count, runs in rows.items():
        tps = sum(r["tps"] for r in runs) / len(runs)
        last = runs[-1]
        print(f"| {count} | {tps:,.0f} | {tps / base:.2f}x | {goals[count]} | "
              f"{', '.join(f'{t:,.0f}' for t in last['host_tps'])} | {', '.join(f'{c:.2f}' for c in last['host_cpus'])} | "
              f"{'/'.join(str(v) for v in last['merged'].values())} | {'yes' if all(r['equal'] for r in runs) else 'NO'} | "
              f"{max(r['spread_ms'] for r in runs):.3f} | {max(r['uncertainty_ms'] for r in runs):.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quota", type=float, default=0.25, help="each host's share of a CPU")
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--neighbour", type=int, default=0, help="busy processes beside the benchmark")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hosts-ns", help=argparse.SUPPRESS)
    parser.add_argument("--cgroups", help=argparse.SUPPRESS)
    args = parser.parse_args()
    return inside(args) if args.inside else outside(args)


if __name__ == "__main__":
    sys.exit(main())
