"""The SQL Server waits table: per arm, the waits of the load sessions themselves, and the server-wide
waits per second over the baseline arm's.

Server-wide wait statistics hold every task of the server, so waits that grow with wall time
whatever runs (XE_TIMER_EVENT, XE_DISPATCHER_WAIT, the SQLTRACE_* sleeps) show in every arm, the
baseline included. Per second of window and less the baseline arm's (same group, server and sweep
point), they cancel out, and what an observer or a variant adds stands out. The figures come from
the `mssql_waits` sampler (`waits`, `window_s`, `sessions.top`); without it there is no table.
"""

from __future__ import annotations

from ..results.model import VariantRun

SAMPLER = "mssql_waits"


def _summary(result: VariantRun) -> dict | None:
    found = result.samplers.get(SAMPLER)
    return found if isinstance(found, dict) and "waits" in found else None


def per_second(summary: dict) -> dict[str, float]:
    window = summary.get("window_s") or 0
    return {w: ms / window for w, ms in (summary.get("waits") or {}).items()} if window > 0 else {}


def over_baseline(summary: dict, base: dict, top: int = 3) -> list[tuple[str, float]]:
    """The wait types whose ms per second grew most over the baseline arm's, largest first."""
    mine, theirs = per_second(summary), per_second(base)
    grown = [(w, v - theirs.get(w, 0.0)) for w, v in mine.items()]
    return sorted([g for g in grown if g[1] > 0.5], key=lambda g: -g[1])[:top]


def _session_cell(summary: dict) -> str:
    top = summary.get("sessions.top") or []
    if not top:
        return "–"
    return ", ".join(f"{w['wait_type']} {w['share']:.0%}" for w in top[:3])


def _baseline(result: VariantRun, results: list[VariantRun], baseline: str | None) -> VariantRun | None:
    if not baseline:
        return None
    same = [r for r in results if r.variant == baseline and r.server == result.server]
    return next((r for r in same if r.point == result.point), same[0] if same else None)


def wait_tables(results: list[VariantRun], baselines: dict) -> list[dict]:
    """Per group with `mssql_waits`, one table (as Table keyword arguments) of every arm."""
    out = []
    groups: list[str] = []
    for r in results:
        if _summary(r) is not None and r.group not in groups:
            groups.append(r.group)
    for group in groups:
        runs = [r for r in results if r.group == group and _summary(r) is not None]
        multi = len({r.server for r in runs}) > 1
        rows = []
        for r in runs:
            base_run = _baseline(r, runs, baselines.get(group))
            summary = _summary(r)
            if base_run is None:
                grown = "–"
            elif base_run is r:
                grown = "base"
            else:
                found = over_baseline(summary, _summary(base_run))
                grown = ", ".join(f"{w} +{v:,.0f}" for w, v in found) or "none"
            label = r.variant + (f"@{r.point}" if r.point is not None else "")
            rows.append(([str(r.server or "")] if multi else []) + [label, _session_cell(summary), grown])
        out.append({"title": f"{group}: waits (SQL Server)",
                    "columns": (["Server"] if multi else []) + ["Variant", "Load sessions' waits",
                                                               "Server-wide over the baseline (ms/s)"],
                    "rows": rows,
                    "notes": ["Load sessions' waits: shares of the wait time of the pools' own sessions "
                              "(sys.dm_exec_session_wait_stats). Server-wide: sys.dm_os_wait_stats per second of "
                              "window, less the baseline arm's, so waits that grow with wall time in every arm "
                              "cancel out; none = nothing grew by more than 0.5 ms/s."]})
    return out
