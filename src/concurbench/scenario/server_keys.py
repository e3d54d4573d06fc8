"""The parts of a scenario that say how to set up the server: `server:` (settings, versions, images
pinned per version, and SQL Server's trace flags, tempdb and container keys) and SQL Server's
`database:` options.
"""

from __future__ import annotations

import re

from ..engines.mssql_config import DATABASE_OPTIONS, DURABILITY, RECOVERY
from ..engines.mssql_limits import NO_LIMIT, memory_problem
from ..util import suggest
from .context import Context
from .yamlpos import Checker, as_int, describe, join

# server: keys by engine (besides `settings`); variants may not set `versions` or `images`
SERVER_KEYS = {"postgres": ["settings", "versions", "images"],
               "mssql": ["settings", "versions", "images", "trace_flags", "memory_optimized_tempdb_metadata",
                         "tempdb_files", "memory_limit", "pid", "collation", "cpus", "min_cpus"]}
SCENARIO_ONLY = ("versions", "images")
# a version as --server-version names it (`2019`, `16`, `16.4`), and a Docker image reference
# (`mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04`, `postgres:16.4`, `name@sha256:...`)
VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.-]*$")
IMAGE_RE = re.compile(r"^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[0-9]+(/[a-z0-9._-]+)+)?(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
                      r"(@sha256:[0-9a-f]{64})?$")


def read_settings(ctx: Context, doc, base: str = "") -> tuple:
    """`server:` of the scenario, or of a variant when `base` is its path, as (name, value) settings."""
    server = ctx.check.mapping(doc, "server", join(base, "server"))
    if server is None:
        return ()
    allowed = [k for k in SERVER_KEYS[ctx.engine] if not (base and k in SCENARIO_ONLY)]
    ctx.check.known_keys(server, join(base, "server"), allowed)
    out = _mssql_server(ctx.check, server, base) if ctx.engine == "mssql" else []
    node = ctx.check.mapping(server, "settings", join(base, "server.settings"))
    if node is None:
        return tuple(out)
    for key, value in node.items():
        if isinstance(value, (dict, list)) or value is None:
            ctx.check.add(node, key, join(join(base, "server.settings"), key),
                          f"must be a single value, got {describe(value)}")
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append((str(key), "on" if text == "true" else "off" if text == "false" else text))
    return tuple(out)


def _mssql_server(check: Checker, server, base: str) -> list[tuple[str, str]]:
    """SQL Server's own server keys, as settings the provisioner and the engine understand."""
    out = []
    path = join(base, "server")
    if "trace_flags" in server:
        flags = server["trace_flags"]
        flags = [flags] if isinstance(flags, int) and not isinstance(flags, bool) else flags
        if not isinstance(flags, list) or not all(as_int(f) is not None and as_int(f) > 0 for f in flags):
            check.add(server, "trace_flags", join(path, "trace_flags"),
                      f"must be a list of trace flag numbers such as [7006], got {describe(flags)}")
        else:
            out.append(("trace_flags", ",".join(str(as_int(f)) for f in flags)))
    if "memory_optimized_tempdb_metadata" in server:
        value = server["memory_optimized_tempdb_metadata"]
        if not isinstance(value, bool):
            check.add(server, "memory_optimized_tempdb_metadata",
                      join(path, "memory_optimized_tempdb_metadata"), f"must be true or false, got {describe(value)}")
        else:
            out.append(("memory_optimized_tempdb_metadata", "on" if value else "off"))
    if "tempdb_files" in server:
        files = check.integer(server, "tempdb_files", path, minimum=1, default=None)
        if files is not None:
            out.append(("tempdb_files", str(files)))
    if "cpus" in server:  # the CPUs the container is pinned to (docker target); empty: no CPU limit
        cpus = server["cpus"]
        if cpus is None:
            out.append(("cpus", NO_LIMIT))
        elif isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus < 1 or cpus != int(cpus):
            check.add(server, "cpus", join(path, "cpus"),
                      f"must be a whole number of CPUs to pin the container to, such as 2, or empty "
                      f"(`cpus:`) for no CPU limit, got {describe(cpus)} (a fraction would be a CPU "
                      f"quota, which stalls the server's latch holders: docs/mssql.md)")
        else:
            out.append(("cpus", str(int(cpus))))
    if "min_cpus" in server:  # at least this many CPUs pinned where the Docker host has them (docker target)
        least = check.integer(server, "min_cpus", path, minimum=1, default=None)
        if least is not None:
            out.append(("min_cpus", str(least)))
    for key in ("memory_limit", "pid", "collation"):
        if key in server:
            value = check.string(server, key, path, default=None)
            problem = memory_problem(value) if key == "memory_limit" and value else None
            if problem:
                check.add(server, key, join(path, key), problem)
            elif value:
                out.append((key, value))
    return out


def read_database(ctx: Context, node, base: str = "") -> tuple:
    """`database:` options of a SQL Server scenario or variant (ALTER DATABASE ... SET)."""
    db = ctx.check.mapping(node, "database", join(base, "database"))
    if db is None:
        return ()
    path = join(base, "database")
    if ctx.engine != "mssql":
        ctx.check.add(node, "database", path, "database options apply to SQL Server scenarios (engine: mssql); "
                                              "PostgreSQL settings go under server.settings", of_key=True)
        return ()
    ctx.check.known_keys(db, path, list(DATABASE_OPTIONS))
    out = []
    for key, value in db.items():
        if key not in DATABASE_OPTIONS:
            continue
        choices = {"delayed_durability": DURABILITY, "recovery": RECOVERY}.get(key)
        if choices is None and not isinstance(value, bool):
            ctx.check.add(db, key, join(path, key), f"must be true or false, got {describe(value)}")
        elif choices is not None and str(value).lower() not in choices:
            ctx.check.add(db, key, join(path, key), f"must be one of {', '.join(choices)}, got {describe(value)}"
                                                    f"{suggest(str(value).lower(), choices)}")
        else:
            out.append((str(key), value if choices is None else str(value).lower()))
    return tuple(out)


def read_versions(check: Checker, doc) -> tuple[str, ...]:
    server = doc.get("server")
    if not isinstance(server, dict) or "versions" not in server:
        return ()
    value = server["versions"]
    if not isinstance(value, list) or not value or not all(isinstance(v, (str, int)) for v in value):
        check.add(server, "versions", "server.versions",
                  f"must be a list of server versions such as [\"2019\", \"2022\"], got {describe(value)}")
        return ()
    return tuple(str(v) for v in value)


def read_images(check: Checker, doc) -> tuple[tuple[str, str], ...]:
    """`server: images: {"2019": "mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04"}`: the image the
    docker target runs for a version (a cumulative update, say), instead of the `-latest` one."""
    server = doc.get("server")
    if not isinstance(server, dict) or "images" not in server:
        return ()
    node = server["images"]
    if not isinstance(node, dict) or not node:
        check.add(server, "images", "server.images", f"must map server versions to Docker images, such as "
                                                     f"{{\"2019\": \"mcr.microsoft.com/mssql/server:2019-CU27-"
                                                     f"ubuntu-20.04\"}}, got {describe(node)}")
        return ()
    out = []
    for version, image in node.items():
        path = join("server.images", str(version))
        if not isinstance(version, (str, int)) or isinstance(version, bool) or not VERSION_RE.match(str(version)):
            check.add(node, version, path, f"must be a server version such as \"2019\" or \"16\", got "
                                           f"{describe(version)}", of_key=True)
        elif not isinstance(image, str) or not IMAGE_RE.match(image):
            check.add(node, version, path, f"must be a Docker image reference such as "
                                           f"mcr.microsoft.com/mssql/server:2019-CU27-ubuntu-20.04, got "
                                           f"{describe(image)}")
        else:
            out.append((str(version), image))
    return tuple(out)
