"""Do the quick forms of the scenarios decide their claims on a busy machine?

Starts a CPU hog (`stress-ng --cpu N`, from Debian's stress-ng package) beside the harness, then runs
each scenario's quick form with `--check` several times in a row and prints, per scenario, every
claim's verdict in every run, the exit codes and the run times. The goal it checks: every claim
decided PASS in every run (no FAIL, no INCONCLUSIVE, none left out of the quick form).

    python benchmarks/claims_under_noise.py [--runs 5] [--hog 1] [--out DIR] [SCENARIO ...]

Without SCENARIOs it runs every PostgreSQL scenario under scenarios/postgres/. Extra options
for `concurbench run` go after `--` (for example `-- --target binaries --server-version 14`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LETTER = {"pass": "P", "fail": "F", "inconclusive": "I", "not evaluated": "-"}


def cpu_model() -> str:
    """The CPU's model name and count, as /proc/cpuinfo gives them (figures move between machines)."""
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
    except OSError:
        names = []
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} CPUs"


def start_hog(cpus: int) -> subprocess.Popen | None:
    if cpus <= 0:
        return None
    if shutil.which("stress-ng") is None:
        sys.exit("stress-ng is not installed (apt-get install stress-ng), or run with --hog 0")
    return subprocess.Popen(["stress-ng", "--cpu", str(cpus), "--cpu-method", "matrixprod", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def stop_hog(hog: subprocess.Popen | None) -> None:
    if hog is not None and hog.poll() is None:
        os.killpg(hog.pid, signal.SIGTERM)
        hog.wait(timeout=30)


def run_once(scenario: Path, out: Path, extra: list[str]) -> tuple[int, float, list[dict], str]:
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "concurbench.cli.main", "run", str(scenario), "--quick", "--check",
                           "--out", str(out), *extra], capture_output=True, text=True, cwd=ROOT)
    seconds = time.monotonic() - t0
    made = sorted(set(out.iterdir()) - before)
    claims: list[dict] = []
    facts = ""
    if made and (made[-1] / "summary.json").is_file():
        summary = json.loads((made[-1] / "summary.json").read_text())
        claims = summary.get("claims") or []
        rounds = max((r.get("repeat") or 1 for r in summary.get("results") or []), default=0)
        machine = json.loads((made[-1] / "manifest.json").read_text()).get("machine") or {}
        others = sorted(machine.get("others_cpus") or [])
        facts = f"; {rounds} rounds" + (f"; others' CPUs at the pauses {others[len(others) // 2]:.2f} (median)"
                                        if others else "")
    if not made:
        print(proc.stderr[-2000:], file=sys.stderr)
    return proc.returncode, seconds, claims, facts


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hog", type=int, default=1, help="CPUs stress-ng keeps busy (0: none)")
    parser.add_argument("--out", type=Path, default=None, help="where run directories go (default: a temp dir)")
    args = parser.parse_args(argv)
    scenarios = args.scenarios or sorted((ROOT / "scenarios" / "postgres").glob("*.yaml"))
    out = args.out or Path(tempfile.mkdtemp(prefix="concurbench-noise-"))
    hog = start_hog(args.hog)
    held = True
    try:
        print(f"{cpu_model()}; load average {os.getloadavg()[0]:.1f} before the hog", flush=True)
        print(f"CPU hog: stress-ng --cpu {args.hog}" if hog else "no CPU hog", flush=True)
        for scenario in scenarios:
            rows: dict[tuple, list[str]] = {}
            codes, times = [], []
            for i in range(args.runs):
                code, seconds, claims, facts = run_once(scenario, out / scenario.stem, extra)
                codes.append(code)
                times.append(seconds)
                for c in claims:
                    key = (c["claim"], c.get("server"))
                    rows.setdefault(key, [" "] * args.runs)[i] = LETTER.get(c["verdict"], "?")
                print(f"  {scenario.stem} run {i + 1}: exit {code} in {seconds:.0f} s{facts}", flush=True)
            fails = sum(v.count("F") for v in rows.values())
            undecided = sum(v.count("I") for v in rows.values())
            left_out = sum(v.count("-") for v in rows.values())
            ok = bool(rows) and all(set(v) == {"P"} for v in rows.values())
            held &= ok
            print(f"\n{scenario.stem}: {args.runs} runs, exit codes {codes}, "
                  f"{min(times):.0f}-{max(times):.0f} s a run; FAIL {fails}, INCONCLUSIVE {undecided}, "
                  f"not evaluated {left_out}: "
                  f"{'goal met' if ok else 'goal NOT met'}")
            for (claim, server), verdicts in rows.items():
                print(f"  {' '.join(verdicts)}  {claim}" + (f" [{server}]" if server else ""))
            print(flush=True)
    finally:
        stop_hog(hog)
    print(f"load average {os.getloadavg()[0]:.1f} at the end; run directories under {out}")
    print("all scenarios met the goal" if held else "some scenario did not meet the goal")


if __name__ == "__main__":
    main()
