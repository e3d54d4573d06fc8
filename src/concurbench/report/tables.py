"""Build the comparison tables of a run from its model (no rendering here)."""

from __future__ import annotations

import math

from dataclasses import dataclass, field

from ..engines.registry import spec
from ..engines.classes import ALL as ERROR_CLASSES
from ..results.metrics import statements
from ..results.model import ClaimEstimate, ClaimVerdict, PublishedFigure, Run, RunStatus, VariantRun
from ..samplers.postgres import WaitEvents
from ..scenario.claims import server_matches
from ..stats import Verdict
from .repeats import cell_stats, client_cpu, collapse, warnings as run_warnings
from .server_facts import server_facts_table
from .event_tables import timeline_tables
from .hosts_table import hosts_lines, hosts_tables
from .waits import wait_tables


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    links: dict[tuple[int, int], str] = field(default_factory=dict)  # (row, column) -> where the cell links (HTML)


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


def stat_cell(result: VariantRun, pool: str, metric: str, value, digits: int = 1) -> str:
    """The value, or `mean ± 95% half-width` when the result folds several repeats."""
    s = cell_stats(result, pool, metric)
    if s and s.get("ci95") is not None:
        return f"{fmt(s['mean'], digits)} ± {fmt(float(s['ci95']), digits)}"
    return fmt(value, digits)



LAG = ("mean_ms", "p99_ms", "max_ms")  # a rate-driven pool's schedule lag figures (lag.mean_ms, ...)
# What a figure from a variant run that did not end ok covers (such runs are marked " *").
STATUS_NOTES = {
    RunStatus.INTERRUPTED: "interrupted: figures cover the part that ran",
    RunStatus.INCOMPLETE: "incomplete: a worker process sent no results, so figures leave out its sessions "
                          "and claims on them are not evaluated",
    RunStatus.FAILED: "failed: figures cover what was measured before the variant run failed",
}


def unfinished(r: VariantRun) -> str:
    """The mark of a variant run that did not end ok (" *"), or "" for one that did."""
    return "" if r.complete else " *"


def marked(r: VariantRun) -> str:
    return r.variant + unfinished(r)


def status_notes(runs: list[VariantRun]) -> list[str]:
    found = dict.fromkeys(r.status for r in runs if unfinished(r))
    return [f"* {STATUS_NOTES.get(status, status)}" for status in found]


def build_report(run: Run) -> Report:
    scen = run.scenario
    server = run.server
    host = run.host
    servers = run.servers
    versions = ", ".join(s.version_short for s in servers) or "not reached"
    lines = [
        f"Scenario: {scen.name}{' (quick)' if scen.quick else ''} — {scen.title}",
        (f"Server: {server.version if server else 'not reached'} ({run.target})" if len(servers) <= 1 else
         f"Servers: {spec(scen.engine or 'postgres').display} {versions} ({run.target}), side by side"),
        f"Host: {host.get('hostname')}, {host.get('cpu_count')} CPUs, {run.processes} worker processes",
        f"Status: {run.status}" + (f" — {run.error}" if run.error else ""),
    ]
    lines += [f"Settings not as the scenario's{' on ' + s.version_short if len(servers) > 1 else ''} (--server-settings "
              f"as-is; claims name them too): {s.differences_text()}" for s in servers if s.differences]
    if run.machine is not None and run.machine.busy:
        lines.append(run.machine.line())
    if run.repeat > 1:
        lines.append(f"Repeats: {run.repeat} per variant, interleaved; figures are means, ± the 95% confidence "
                     f"half-width")
    lines += _shard_lines(run)
    lines += hosts_lines(run)
    results = collapse(run.variant_runs)
    tables = []
    facts = server_facts_table(servers)  # SQL Server: what differs between versions besides the version
    if facts:
        tables.append(Table(**facts))
    for group in _unique(r.group for r in results):
        in_group = [r for r in results if r.group == group]
        multi = len(servers) > 1
        for point in _unique(r.point for r in in_group):
            runs = [r for r in in_group if r.point == point]
            if multi:
                order = [r.variant for r in in_group]
                runs.sort(key=lambda r: (order.index(r.variant), _version_key(r.server)))
            tables.append(_comparison(group, point, runs, scen.baselines.get(group), multi))
        tables.append(_statements(group, in_group))
        schedule = _schedule(group, in_group)
        if schedule.rows:
            tables.append(schedule)
        tables.extend(_probes(group, in_group))
        tables.extend(Table(**t) for t in wait_tables(in_group, scen.baselines))  # SQL Server's mssql_waits
    tables.extend(Table(**t) for t in timeline_tables(run.variant_runs, run.repeat))
    tables.extend(Table(**t) for t in hosts_tables(run))
    if run.published:
        tables.append(_published(run.published, results, run))
    if run.claims:
        tables.append(_claims(run.claims))
    warnings = [f"{name} was skipped: {why}" for name, why in run.skipped.items()]
    warnings += run_warnings(run.variant_runs)
    for r in results:
        for msg in [*r.messages, *r.sampler_errors, *map(str, r.sampler_failures)]:
            warnings.append(f"{r.variant}: {msg}")
    return Report(scen.title or scen.name, lines, tables, warnings)


def _shard_lines(run: Run) -> list[str]:
    """Which shard of a run this is (`run --shard`), or which shards a merged run was made of."""
    if run.shard is not None:
        return [f"Shard: {run.shard.label} of the run (its share of server x variant x point x repeat); claims are "
                f"judged when the shards are merged"]
    if not run.merged_from:
        return []
    count = run.merged_from[0].count
    present = {m.index for m in run.merged_from}
    missing = [f"{i}/{count}" for i in range(1, count + 1) if i not in present]
    return ["Merged from shards " + ", ".join(f"{m.index}/{m.count} ({m.hostname})" for m in run.merged_from)
            + (f"; missing {', '.join(missing)}" if missing else "")]


def _unique(values) -> list:
    out: list = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _version_key(version) -> tuple:
    parts = []
    for piece in str(version or "").replace("beta", ".").split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


def _comparison(group: str, point, runs: list[VariantRun], baseline: str | None, multi: bool = False) -> Table:
    title = f"{group}: {point} clients" if point is not None else group
    columns = ["Variant", "Pool", "Clients", "TPS", "vs base", "p50 ms", "p95 ms", "p99 ms",
               "Errors", "Top waits", "WAL B/txn", "MultiXacts", "Client CPU"]
    table = Table(title, (["Server"] if multi else []) + columns)
    base_tps: dict = {}
    for r in runs:
        if r.variant == baseline:
            base_tps[r.server] = r.own(r.first_measured().name).get("tps")
    for r in runs:
        first = True
        for pool, data in r.pools.items():
            m = r.figures(pool)
            tps = m.get("tps")
            errors = ", ".join(f"{k} {m.get('errors.' + k)}" for k in ERROR_CLASSES if m.get("errors." + k))
            vs = "–"
            base = base_tps.get(r.server)
            if data.measure and _num(base) and _num(tps) is not None:
                vs = "base" if r.variant == baseline else f"{tps / base:.2f}×"
            waits = ", ".join(f"{w} {s:.0%}" for w, s in top_waits(r)) if first else ""
            cpu = client_cpu(r) if first else None
            table.rows.append(([str(r.server or "")] if multi else []) + [
                marked(r),
                pool + ("" if data.measure else " (background)"), fmt(data.clients),
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


def _num(value):
    """A metric as a number, or None (absent or unavailable)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _statements(group: str, runs: list[VariantRun]) -> Table:
    multi = len({r.server for r in runs}) > 1
    table = Table(f"{group}: mean latency per statement (ms)", (["Server"] if multi else []) + [
        "Variant", "Clients", "Pool", "Statement", "Mean", "p95", "Executed"])
    for r in runs:
        for pool, data in r.pools.items():
            for name, s in statements(r.own(pool)).items():
                table.rows.append(([str(r.server or "")] if multi else []) + [
                    marked(r), fmt(data.clients), pool, name,
                    stat_cell(r, pool, f"statements.{name}.mean_ms", s.get("mean_ms"), 3),
                    fmt(s.get("p95_ms"), 3), fmt(s.get("count"))])
    table.notes.extend(status_notes(runs))
    return table


def _schedule(group: str, runs: list[VariantRun]) -> Table:
    """Rate-driven pools: how far behind their schedule they sent, and how many transactions were late or skipped."""
    multi = len({r.server for r in runs}) > 1
    table = Table(f"{group}: schedule of rate-driven pools", (["Server"] if multi else []) + [
        "Variant", "Clients", "Pool", "Lag mean ms", "Lag p99 ms", "Lag max ms", "Late", "Skipped"])
    for r in runs:
        for pool, data in r.pools.items():
            own = r.own(pool)
            if not any(f"lag.{k}" in own for k in LAG):
                continue
            table.rows.append(([str(r.server or "")] if multi else []) + [
                marked(r), fmt(data.clients), pool,
                *[stat_cell(r, pool, f"lag.{k}", own.get(f"lag.{k}"), 2) for k in LAG],
                stat_cell(r, pool, "late", own.get("late")),
                stat_cell(r, pool, "skipped", own.get("skipped"))])
    table.notes.append("Latency of a rate-driven pool runs from each transaction's scheduled start; lag is its "
                       "first statement's send time minus that start. Late: finished more than latency_limit "
                       "after it; skipped: already that late when a client was free, so never sent.")
    return table


def _probes(group: str, runs: list[VariantRun]) -> list[Table]:
    """One table per probe: its rows for every variant run and time (before, after, final)."""
    out = []
    for name in _unique(name for r in runs for name in r.probes):
        columns: list[str] = []
        rows = []
        for r in runs:
            for when, found in (r.probes.get(name) or {}).items():
                for row in found:
                    columns.extend(c for c in row if c not in columns)
                    rows.append((r, when, row))
        table = Table(f"{group}: {name}", ["Variant", "When", *columns])
        for r, when, row in rows:
            label = r.variant + (f"@{r.point}" if r.point is not None else "")
            server = f" ({r.server})" if r.server and len({x.server for x in runs}) > 1 else ""
            table.rows.append([label + server, when, *[fmt(row.get(c), 2) for c in columns]])
        out.append(table)
    return out


VERDICT_CELLS = {Verdict.PASS: "PASS", Verdict.FAIL: "FAIL", Verdict.INCONCLUSIVE: "INCONCLUSIVE",
                 Verdict.NOT_EVALUATED: "–"}


def _side(side: ClaimEstimate | None) -> str:
    if side is None:
        return fmt(None)
    if side.low is None or side.high is None:
        return figure(side.value)
    return f"{figure(side.value)} [{figure(side.low)}, {figure(side.high)}]"


def _verdict_interval(interval: ClaimEstimate | None) -> str:
    """The interval a verdict was tested with, and its confidence (the claim's share of the error rate)."""
    if interval is None or interval.low is None:
        return fmt(None)
    value = "" if interval.method == "left / right" else f"{figure(interval.value)} "
    confidence = f" at {_percent(interval.confidence)}" if interval.confidence is not None else ""
    high = "∞" if interval.high is None else figure(interval.high)
    return f"{value}[{figure(interval.low)}, {high}]{confidence}"


def _percent(share: float) -> str:
    """A confidence with two significant digits of what it leaves out: 90%, 97.5%, 99.4%, 99.97%."""
    out = (1 - share) * 100
    if out <= 0:
        return "100%"
    digits = max(0, 1 - math.floor(math.log10(out)))
    return f"{share * 100:.{digits}f}".rstrip("0").rstrip(".") + "%"


def figure(value) -> str:
    """A measured figure with as many digits as it deserves: 1,234 / 685 / 49.6 / 2.84 / 0.0123."""
    if value is None:
        return "–"
    value = float(value)
    magnitude = abs(value)
    if magnitude >= 1e9 or 0 < magnitude < 1e-4:
        return f"{value:.3g}"
    if magnitude >= 100 or value == 0:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:#.3g}"


def _claims(claims: list[ClaimVerdict]) -> Table:
    multi = len({c.server for c in claims}) > 1
    table = Table("Claims (expect)", ["Result", "Claim", "Left", "Right", "Left / right", "Verdict's interval"]
                  + (["Server"] if multi else []) + ["Why"])
    for c in claims:
        table.rows.append([VERDICT_CELLS[c.verdict], c.claim, _side(c.left), _side(c.right), _side(c.ratio),
                           _verdict_interval(c.interval)] + ([c.server or ""] if multi else []) + [c.reason or c.description])
    counts = {v: sum(1 for c in claims if c.verdict is v) for v in Verdict}
    table.notes.append(f"{counts[Verdict.PASS]} of {len(claims)} claims hold"
                       + (f"; {counts[Verdict.FAIL]} failed" if counts[Verdict.FAIL] else "")
                       + "".join(f"; {counts[v]} {v}" for v in (Verdict.INCONCLUSIVE, Verdict.NOT_EVALUATED)
                                 if counts[v]))
    table.notes.append("Sides and ratios show the estimate with its 95% interval in brackets. The verdict's interval "
                       "is left over right (or left minus right) at the claim's share of the 5% error rate, corrected "
                       "for the number of claims and looks: it leaves out the claim's boundary (1, or 0) exactly when "
                       "the verdict decides (docs/claims.md).")
    return _drop_empty_columns(table, keep=2)


def measured_value(results: list[VariantRun], variant: str, metric: str, clients=None, pool=None, server=None):
    """The measured value of a metric for a published figure (nearest sweep point when clients differ;
    on the server version the figure names, when it names one)."""
    runs = [r for r in results if r.variant == variant
            and (server is None or r.server is None or server_matches(r.server, server))]
    if not runs:
        return None, None
    if clients is not None and any(r.point is not None for r in runs):
        runs.sort(key=lambda r: abs((r.point or 0) - clients))
    r = runs[0]
    pool = pool or r.first_measured().name
    if pool not in r.pools:
        return None, r
    return r.metric(pool, metric), r


def _published(published: list[PublishedFigure], results: list[VariantRun], run: Run) -> Table:
    src = run.scenario.source
    server = run.server
    host = run.host
    by_server = any(p.server for p in published)
    table = Table("Published beside measured", ["Variant", "Metric", "Published", "Clients (article)",
                                                "Measured", "Clients (here)", "Note"]
                  if not by_server else ["Server", "Variant", "Metric", "Published", "Clients (article)", "Measured",
                                         "Clients (here)", "Note"])
    runs: list[VariantRun] = []
    for p in published:
        value, r = measured_value(results, p.variant, p.metric, p.clients, p.pool, p.server)
        here, mark = "–", ""
        if r is not None:
            here = fmt(r.clients.get(p.pool or r.first_measured().name))
            mark = unfinished(r)
            runs.append(r)
        unit = f" {p.unit}" if p.unit else ""
        measured = fmt(value, 2) + (unit if _num(value) is not None else "") + mark
        table.rows.append(([p.server or "any"] if by_server else []) + [
            p.variant, p.metric, f"{fmt(p.value, 1)}{unit}", fmt(p.clients),
            measured if value is not None else "–", here, p.note])
    table.notes.append(f"Article: {src.engine or 'unknown server'} on {src.hardware or 'unknown hardware'}. "
                       f"Here: {spec(run.scenario.engine or 'postgres').display} "
                       f"{server.version_short if server else '?'} on {host.get('cpu_count')} CPUs "
                       f"shared by the server and the load generator, so absolute figures differ; compare the "
                       f"direction and the ratios.")
    table.notes.extend(status_notes(runs))
    return table


def top_waits(result: VariantRun, n: int = 3) -> list[tuple[str, float]]:
    return list(WaitEvents.shares(result.whole()).items())[:n]
