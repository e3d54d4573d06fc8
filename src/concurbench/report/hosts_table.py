"""`run --cluster`: the per-host breakdown of each variant run as a table (tps, latency from each host's own
histograms, CPU used and waited for, schedule lag, clock offset), so a host that is itself the bottleneck, or
that was lost, shows beside the merged figures."""

from __future__ import annotations

from ..results.model import Run


def _cell(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def hosts_lines(run: Run) -> list[str]:
    """The report's line naming the load hosts (none for a run from this machine)."""
    if not run.load_hosts:
        return []
    names = ", ".join(f"{h.get('name')} ({h.get('cpus')} CPUs, clock {h.get('clock_offset_ms'):+.3f} ms "
                      f"± {h.get('clock_uncertainty_ms'):.3f})" for h in run.load_hosts)
    return [f"Load hosts: {names}; figures are merged from their histograms and counts"]


def hosts_tables(run: Run) -> list[dict]:
    """One table of every variant run's hosts (Table's fields), or none when the run had no cluster."""
    runs = [r for r in run.variant_runs if r.hosts]
    if not runs:
        return []
    repeats = run.repeat > 1 or len({r.repeat for r in runs}) > 1
    servers = len({r.server for r in runs}) > 1
    columns = (["Server"] if servers else []) + ["Variant", "Clients"] + (["Repeat"] if repeats else []) + [
        "Host", "Status", "Sessions", "TPS", "p50 ms", "p95 ms", "p99 ms", "CPUs used", "CPU wait s", "Lag p99 ms",
        "Start late ms"]
    rows = []
    for r in runs:
        for h in r.hosts:
            rows.append(([str(r.server or "")] if servers else []) + [r.variant, _cell(r.point)] +
                        ([str(r.repeat)] if repeats else []) + [
                str(h.get("host")), str(h.get("status")) + (f": {h['why']}" if h.get("why") else ""),
                _cell(h.get("sessions")), _cell(h.get("tps"), 0), _cell(h.get("p50_ms"), 3), _cell(h.get("p95_ms"), 3),
                _cell(h.get("p99_ms"), 3), _cell(h.get("cpus_used")), _cell(h.get("cpu_wait_s")),
                _cell(h.get("lag_p99_ms"), 3), _cell(h.get("start_late_ms"), 3)])
    notes = ["Each host's latency percentiles come from its own histograms; the comparison tables' come from all "
             "hosts' histograms merged (never averaged). CPUs used: the host's load processes' CPU time over their "
             "wall time; CPU wait: the time they waited for a CPU (a host near its CPU count, or waiting long, is "
             "itself the bottleneck)."]
    return [{"title": "Load hosts", "columns": columns, "rows": rows, "notes": notes}]
