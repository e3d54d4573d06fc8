"""Build the comparison tables of a run from its manifest and summary (no rendering here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .metrics import ERROR_CLASSES, row_metrics, top_waits
from ..scenario.claims import server_matches
from .repeats import cell_stats, client_cpu, collapse, warnings as run_warnings


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Report:
    title: str
    lines: list[str]
    tables: list[Table]
    warnings: list[str] = field(default_factory=list)


def fmt(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def human_bytes(value) -> str:
    if value is None:
        return "–"
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return str(value)


def stat_cell(result: dict, pool: str, metric: str, value, digits: int = 1) -> str:
    """The value, or `mean ± 95% half-width` when the result folds several repeats."""
    s = cell_stats(result, pool, metric)
    if s and s.get("ci95") is not None:
        return f"{fmt(s['mean'], digits)} ± {fmt(float(s['ci95']), digits)}"
    return fmt(value, digits)


ENGINE_NAMES = {"postgres": "PostgreSQL", "mssql": "SQL Server"}

# What a figure from a variant run that did not end ok covers (such runs are marked " *").
STATUS_NOTES = {
    "interrupted": "interrupted: figures cover the part that ran",
    "incomplete": "incomplete: a worker process sent no results, so figures leave out its sessions "
                  "and claims on them are not evaluated",
}


def unfinished(r: dict) -> str:
    """The mark of a variant run that did not end ok (" *"), or "" for one that did."""
    return " *" if r.get("status", "ok") != "ok" else ""


def marked(r: dict) -> str:
    return r["variant"] + unfinished(r)


def status_notes(runs: list[dict]) -> list[str]:
    found = dict.fromkeys(r["status"] for r in runs if unfinished(r))
    return [f"* {STATUS_NOTES.get(status, status)}" for status in found]


def _point_label(point, clients: dict) -> str:
    if point is not None:
        return f"{point} clients"
    measured = ", ".join(f"{n} {p}" for p, n in clients.items())
    return measured


def build_report(manifest: dict, summary: dict) -> Report:
    scen = manifest["scenario"]
    server = manifest.get("server") or {}
    host = manifest.get("host") or {}
    servers = manifest.get("servers") or ([server] if server else [])
    versions = ", ".join(s.get("version_short", "?") for s in servers) or "not reached"
    lines = [
        f"Scenario: {scen['name']}{' (quick)' if scen.get('quick') else ''} — {scen.get('title', '')}",
        (f"Server: {server.get('version', 'not reached')} ({manifest.get('target')})" if len(servers) <= 1 else
         f"Servers: {ENGINE_NAMES.get(scen.get('engine') or 'postgres', '')} {versions} ({manifest.get('target')}), side by side"),
        f"Host: {host.get('hostname')}, {host.get('cpu_count')} CPUs, {manifest.get('processes')} worker processes",
        f"Status: {manifest['status']}" + (f" — {manifest['error']}" if manifest.get("error") else ""),
    ]
    repeat = manifest.get("repeat") or 1
    if repeat > 1:
        lines.append(f"Repeats: {repeat} per variant, interleaved; figures are means, ± the 95% confidence half-width")
    results = collapse(summary["results"])
    baselines = scen.get("baselines", {})
    tables = []
    groups: list[str] = []
    for r in results:
        if r["group"] not in groups:
            groups.append(r["group"])
    for group in groups:
        in_group = [r for r in results if r["group"] == group]
        points: list = []
        for r in in_group:
            if r["point"] not in points:
                points.append(r["point"])
        multi = len(servers) > 1
        for point in points:
            runs = [r for r in in_group if r["point"] == point]
            if multi:
                order = [r["variant"] for r in in_group]
                runs.sort(key=lambda r: (order.index(r["variant"]), _version_key(r.get("server"))))
            tables.append(_comparison(group, point, runs, baselines.get(group), multi))
        tables.append(_statements(group, in_group))
        tables.extend(_probes(group, in_group))
    published = summary.get("published") or []
    if published:
        tables.append(_published(published, results, manifest))
    if summary.get("claims"):
        tables.append(_claims(summary["claims"]))
    warnings = [f"{name} was skipped: {why}" for name, why in (summary.get("skipped") or {}).items()]
    warnings += run_warnings(summary["results"])
    for r in results:
        for msg in r.get("messages", []) + r.get("sampler_errors", []):
            warnings.append(f"{r['variant']}: {msg}")
    return Report(scen.get("title") or scen["name"], lines, tables, warnings)


def _version_key(version) -> tuple:
    parts = []
    for piece in str(version or "").replace("beta", ".").split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


def _comparison(group: str, point, runs: list[dict], baseline: str | None, multi: bool = False) -> Table:
    title = f"{group}: {point} clients" if point is not None else group
    columns = ["Variant", "Pool", "Clients", "TPS", "vs base", "p50 ms", "p95 ms", "p99 ms",
               "Errors", "Top waits", "WAL B/txn", "MultiXacts", "Client CPU"]
    table = Table(title, (["Server"] if multi else []) + columns)
    base_tps: dict = {}
    for r in runs:
        if r["variant"] == baseline:
            base_tps[r.get("server")] = _first_measured(r)[1].get("tps")
    for r in runs:
        first = True
        for pool, data in r["pools"].items():
            m = row_metrics(r, pool)
            tps = m.get("tps")
            errors = ", ".join(f"{k} {m.get('errors.' + k)}" for k in ERROR_CLASSES if m.get("errors." + k))
            vs = "–"
            base = base_tps.get(r.get("server"))
            if data["measure"] and base and tps is not None:
                vs = "base" if r["variant"] == baseline else f"{tps / base:.2f}×"
            waits = ", ".join(f"{w} {s:.0%}" for w, s in top_waits(r)) if first else ""
            cpu = client_cpu(r) if first else None
            table.rows.append(([str(r.get("server", ""))] if multi else []) + [
                marked(r),
                pool + ("" if data["measure"] else " (background)"), fmt(data["clients"]),
                stat_cell(r, pool, "tps", tps), vs,
                *[stat_cell(r, pool, f"latency.{p}_ms", m.get(f"latency.{p}_ms"), 2) for p in ("p50", "p95", "p99")],
                errors or "0", waits or ("–" if first else ""),
                fmt(m.get("wal.bytes_per_txn"), 0) if first else "",
                fmt(m.get("multixact.created")) if first else "",
                f"{cpu:.2f}" if cpu is not None else ""])
            first = False
    table.notes.extend(status_notes(runs))
    table.notes.append("TPS counts transactions completed in the measurement window (warm-up excluded); "
                       "waits are shares of sampled non-idle sessions; WAL B/txn divides the WAL written "
                       "by every pool's transactions; Client CPU is the CPUs the load generator's processes used.")
    return _drop_empty_columns(table, keep=2)


def _drop_empty_columns(table: Table, keep: int) -> Table:
    """Leave out columns no row fills (WAL and MultiXacts on a server that has neither), past the first `keep`."""
    wanted = [i for i, _ in enumerate(table.columns)
              if i < keep or any(str(row[i]) not in ("", "–") for row in table.rows)]
    table.columns = [table.columns[i] for i in wanted]
    table.rows = [[row[i] for i in wanted] for row in table.rows]
    return table


def _first_measured(r: dict) -> tuple[str, dict]:
    for pool, data in r["pools"].items():
        if data["measure"]:
            return pool, data["metrics"]
    pool = next(iter(r["pools"]))
    return pool, r["pools"][pool]["metrics"]


def _statements(group: str, runs: list[dict]) -> Table:
    multi = len({r.get("server") for r in runs}) > 1
    table = Table(f"{group}: mean latency per statement (ms)", (["Server"] if multi else []) + [
        "Variant", "Clients", "Pool", "Statement", "Mean", "p95", "Executed"])
    for r in runs:
        for pool, data in r["pools"].items():
            for name, s in data["metrics"]["statements"].items():
                table.rows.append(([str(r.get("server", ""))] if multi else []) + [
                    marked(r), fmt(data["clients"]), pool, name,
                    stat_cell(r, pool, f"statements.{name}.mean_ms", s.get("mean_ms"), 3),
                    fmt(s.get("p95_ms"), 3), fmt(s.get("count"))])
    table.notes.extend(status_notes(runs))
    return table


def _probes(group: str, runs: list[dict]) -> list[Table]:
    """One table per probe: its rows for every variant run and time (before, after, final)."""
    names: list[str] = []
    for r in runs:
        for name in r.get("probes") or {}:
            if name not in names:
                names.append(name)
    out = []
    for name in names:
        columns: list[str] = []
        rows = []
        for r in runs:
            for when, found in ((r.get("probes") or {}).get(name) or {}).items():
                for row in found:
                    columns.extend(c for c in row if c not in columns)
                    rows.append((r, when, row))
        table = Table(f"{group}: {name}", ["Variant", "When", *columns])
        for r, when, row in rows:
            label = r["variant"] + (f"@{r['point']}" if r["point"] is not None else "")
            server = f" ({r['server']})" if r.get("server") and len({x.get('server') for x in runs}) > 1 else ""
            table.rows.append([label + server, when, *[fmt(row.get(c), 2) for c in columns]])
        out.append(table)
    return out


def _claims(claims: list[dict]) -> Table:
    table = Table("Claims (expect)", ["Result", "Claim", "Left", "Right", "Server", "Why"])
    for c in claims:
        table.rows.append([{True: "PASS", False: "FAIL", None: "–"}[c["passed"]], c["claim"], fmt(c.get("left"), 3),
                           fmt(c.get("right"), 3), c.get("server") or "", c.get("error") or c.get("description", "")])
    failed = sum(1 for c in claims if c["passed"] is False)
    held = sum(1 for c in claims if c["passed"])
    table.notes.append(f"{held} of {len(claims)} claims hold" + (f"; {failed} failed" if failed else "")
                       + (f"; {len(claims) - held - failed} not evaluated" if len(claims) - held - failed else ""))
    return table


def measured_value(results: list[dict], variant: str, metric: str, clients=None, pool=None, server=None):
    """The measured value of a metric for a published figure (nearest sweep point when clients differ;
    on the server version the figure names, when it names one)."""
    runs = [r for r in results if r["variant"] == variant
            and (server is None or r.get("server") is None or server_matches(r["server"], server))]
    if not runs:
        return None, None
    if clients is not None and any(r["point"] is not None for r in runs):
        runs.sort(key=lambda r: abs((r["point"] or 0) - clients))
    r = runs[0]
    pool = pool or _first_measured(r)[0]
    if pool not in r["pools"]:
        return None, r
    return row_metrics(r, pool).get(metric), r


def _published(published: list[dict], results: list[dict], manifest: dict) -> Table:
    src = manifest["scenario"].get("source") or {}
    server = manifest.get("server") or {}
    host = manifest.get("host") or {}
    by_server = any(p.get("server") for p in published)
    table = Table("Published beside measured", ["Variant", "Metric", "Published", "Clients (article)",
                                                "Measured", "Clients (here)", "Note"]
                  if not by_server else ["Server", "Variant", "Metric", "Published", "Clients (article)", "Measured",
                                         "Clients (here)", "Note"])
    runs: list[dict] = []
    for p in published:
        value, run = measured_value(results, p["variant"], p["metric"], p.get("clients"), p.get("pool"),
                                    p.get("server"))
        here, mark = "–", ""
        if run is not None:
            pool = p.get("pool") or _first_measured(run)[0]
            here = fmt(run["clients"].get(pool))
            mark = unfinished(run)
            runs.append(run)
        unit = f" {p['unit']}" if p.get("unit") else ""
        table.rows.append(([p.get("server") or "any"] if by_server else []) + [
            p["variant"], p["metric"], f"{fmt(p['value'], 1)}{unit}", fmt(p.get("clients")),
            (fmt(value, 2) + unit + mark) if value is not None else "–", here, p.get("note", "")])
    table.notes.append(f"Article: {src.get('engine') or 'unknown server'} on {src.get('hardware') or 'unknown hardware'}. "
                       f"Here: {ENGINE_NAMES.get(manifest['scenario'].get('engine') or 'postgres', '')} {server.get('version_short', '?')} on {host.get('cpu_count')} CPUs "
                       f"shared by the server and the load generator, so absolute figures differ; compare the "
                       f"direction and the ratios.")
    table.notes.extend(status_notes(runs))
    return table
