"""A nightly CI job replayed on this machine: one real run a night of a small scenario on the embedded
PostgreSQL, added with `run --history`, then gated with `history check --run` on that run, as the nightly
workflow does. A server setting makes the regression: from night FLAT + 1 on, commit_delay (with
commit_siblings 0) makes every commit that wrote WAL wait DELAY microseconds before it flushes; the
first night the gate is red, the finding is looked at and acknowledged (`history ack`, as a person
would); after SLOW nights the setting goes back (the fix). It prints one row a night: the setting, the
writers' and readers' tps, the check's exit code, the summary's cause line, and the findings' states;
then the store's findings.

    python benchmarks/history_replay.py [--flat 14] [--slow 10] [--fixed 12] [--delay 2000] [--out DIR]

Run it alone on the machine (it measures). docs/history.md shows its output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from concurbench.results.store import cpu_model

HERE = Path(__file__).resolve().parent
SCENARIO = HERE / "scenarios" / "history-replay.yaml"


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def tps(store: Path, run_id: str) -> dict[str, float]:
    shown = json.loads(cli("history", "show", "--store", store, "--metric", "tps", "--format", "json").stdout)
    out = {}
    for s in shown["series"]:
        for p in s["points"]:
            if p["run"] == run_id:
                out[s["variant"]] = p["mean"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flat", type=int, default=14)
    ap.add_argument("--slow", type=int, default=10)
    ap.add_argument("--fixed", type=int, default=12)
    ap.add_argument("--delay", type=int, default=2000, help="commit_delay of the slow nights, microseconds")
    ap.add_argument("--out", type=Path, default=None, help="where the runs and the store go (default: a temp dir)")
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="history-replay-"))
    store = out / "history.db"
    plan = ["flat"] * args.flat + ["slow"] * args.slow + ["fixed"] * args.fixed
    started = time.perf_counter()
    print(f"{date.today().isoformat()}, {cpu_model()}; {len(plan)} nights of {SCENARIO.name} on the embedded "
          f"PostgreSQL; store {store}\n")
    print("| night | commit_delay | writers tps | readers tps | check | what the check said |")
    print("|---:|---:|---:|---:|---:|---|")
    acked = False
    for night, kind in enumerate(plan, 1):
        delay = args.delay if kind == "slow" else 0
        done = cli("run", SCENARIO, "--param", f"commit_delay={delay}", "--out", out / "runs", "--history", store,
                   "--label", f"night={night}")
        if done.returncode != 0:
            print(f"| {night} | {delay} µs | run failed ({done.returncode}): {done.stderr.strip().splitlines()[-1]} |")
            continue
        run_id = Path(done.stdout.strip().splitlines()[-1]).name
        check = cli("history", "check", "--store", store, "--run", run_id)
        said = next((line[2:] for line in check.stdout.splitlines() if line.startswith("- from run ")),
                    next((line.replace("**", "") for line in check.stdout.splitlines() if line.startswith("**")), ""))
        shown = tps(store, run_id)
        note = ""
        if check.returncode == 5 and not acked:
            findings = json.loads(cli("history", "show", "--store", store, "--format", "json").stdout)["findings"]
            new = [f["id"] for f in findings if f["state"] == "new"]
            ack = cli("history", "ack", *new, "--reason", f"commit_delay={args.delay} set on purpose", "--store",
                      store)
            note = f"; then `history ack {' '.join(new)}` (exit {ack.returncode})"
            acked = True
        print(f"| {night} | {delay} µs | {shown.get('writers', float('nan')):,.0f} | "
              f"{shown.get('readers', float('nan')):,.0f} | {check.returncode} | {said}{note} |")
    findings = json.loads(cli("history", "show", "--store", store, "--format", "json").stdout)["findings"]
    print("\nfindings at the end:")
    for f in findings:
        print(f"  {f['id']} {f['state']}: {f['variant']}/{f['pool']} {f['metric']} {f['change']:+.1%} from "
              f"{f['first_run']} (p {f['p']:.2g}){', resolved by ' + f['resolved_run'] if f['resolved_run'] else ''}"
              f"{', ' + f['reason'] if f['reason'] else ''}")
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
