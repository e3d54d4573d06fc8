"""The table of what a SQL Server run depends on beside its version, one row per server: the image,
its CPUs and schedulers, the container's CPU limit, and the database options that change the
figures between versions (Query Store, on by default from 2022; accelerated database recovery;
optimized locking, 2025; lightweight query profiling). Read by `engines.sqlserver.server_facts`
and the docker target; without them (PostgreSQL, or a run before they were recorded) no table.
"""

from __future__ import annotations

from ..results.model import ServerInfo


def _switch(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool) or isinstance(value, int):
        return "on" if value else "off"
    return str(value)


def server_facts_table(servers: list[ServerInfo]) -> dict | None:
    """Table keyword arguments, or None when no server recorded its facts."""
    known = [s for s in servers if isinstance(s.extra.get("facts"), dict)]
    if not known:
        return None
    rows, mismatched = [], []
    for s in known:
        facts = s.extra["facts"]
        pinned, schedulers = s.extra.get("cpus_pinned"), facts.get("scheduler_count")
        if pinned and schedulers and pinned != schedulers:
            mismatched.append(f"{s.version_short}: {schedulers} schedulers on {pinned} pinned CPUs")
        cpus = "–" if facts.get("cpu_count") is None else f"{facts['cpu_count']} ({facts.get('scheduler_count')} schedulers)"
        rows.append([s.version_short, s.extra.get("image") or "–", cpus, s.extra.get("cpu_limit") or "–",
                     _switch(facts.get("query_store")), _switch(facts.get("adr")),
                     _switch(facts.get("optimized_locking")), _switch(facts.get("lightweight_query_profiling"))])
    return {"title": "Server configuration (what differs between versions besides the version)",
            "columns": ["Server", "Image", "CPUs", "Container CPU limit", "Query Store", "ADR", "Optimized locking",
                        "Lightweight profiling"],
            "rows": rows,
            "notes": ["Read from the run's database when the server started: Query Store's actual state, accelerated "
                      "database recovery, optimized locking (– where the version has none), lightweight query "
                      "profiling; CPUs and schedulers from sys.dm_os_sys_info."]
            + ([f"SQL Server did not make one scheduler per CPU the container is pinned to ({'; '.join(mismatched)}): "
                f"its schedulers share those CPUs (docs/mssql.md, The container's CPUs and memory)."] if mismatched else [])}
