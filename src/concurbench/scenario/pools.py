"""A variant's `pools:`: clients, the transaction's statements, parameters drawn from distributions,
protocol, per-session init SQL, think time, and the rate and timeline keys (timeline.py)."""

from __future__ import annotations

from ruamel.yaml.comments import CommentedSeq

from ..engines.registry import spec
from ..engines.postgres import PROTOCOLS
from ..engines.sqlsplit import split_sql
from ..util import suggest
from .context import Context
from .distributions import parse_distribution
from .model import Pool, Statement
from .timeline import TIMELINE_KEYS, check_window, read_timeline
from .versions import read_condition
from .yamlpos import Checker, as_int, describe, join

POOL_KEYS = ["clients", "transaction", "params", "measure", "atomic", "transactions", "max_tries", "think", "protocol",
             "init", *TIMELINE_KEYS]


def read_pools(ctx: Context, vnode, vpath: str, duration: float) -> tuple[Pool, ...]:
    """The variant's pools; `duration` is its measurement window in seconds. Records where each pool's
    `clients` is written, for checks made later (running/guards.py)."""
    check = ctx.check
    node = check.mapping(vnode, "pools", join(vpath, "pools"))
    if node is None:
        return ()
    pools = []
    for name, pnode in node.items():
        path = join(join(vpath, "pools"), name)
        if not isinstance(pnode, dict):
            check.add(node, name, path, f"must be a mapping, got {describe(pnode)}")
            continue
        check.known_keys(pnode, path, POOL_KEYS, required=("clients", "transaction"))
        ctx.positions[join(path, "clients")] = check.position(pnode, "clients" if "clients" in pnode else None)
        clients = _clients(check, pnode, path)
        params = _params(check, pnode, path)
        transaction = _transaction(ctx, pnode, path)
        think = check.duration(pnode, "think", path, default=0.0)
        transactions = check.integer(pnode, "transactions", path, minimum=1, default=None)
        timeline = read_timeline(check, pnode, path, think=think, clients=clients)
        pool = Pool(
            name=str(name), clients=clients, transaction=transaction, params=params,
            measure=check.boolean(pnode, "measure", path, default=True),
            atomic=check.boolean(pnode, "atomic", path, default=False),
            transactions=transactions,
            max_tries=check.integer(pnode, "max_tries", path, minimum=1, default=1),
            think=think, protocol=_choice(check, pnode, "protocol", path, PROTOCOLS, "prepared"),
            init=_texts(check, pnode, "init", join(path, "init")), **timeline)
        if transactions is None:  # a pool that runs a count of transactions has no window to fit in
            check_window(check, pnode, path, pool, duration)
        pools.append(pool)
    return tuple(pools)


def _clients(check: Checker, pnode, path: str) -> int | None:
    """The pool's client count; None for `clients: sweep` (the variant's sweep point)."""
    clients = pnode.get("clients")
    n_clients = None if clients == "sweep" else as_int(clients)
    if clients is not None and clients != "sweep" and (n_clients is None or n_clients < 1):
        check.add(pnode, "clients", join(path, "clients"),
                  f"must be a positive integer or 'sweep', got {describe(clients)}")
        return 1
    if clients is None:
        return 1
    return n_clients


def _texts(check: Checker, node, key: str, path: str) -> tuple[str, ...]:
    value = node.get(key)
    if value is None:
        return ()
    value = [value] if isinstance(value, str) else value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        check.add(node, key, path, "must be SQL text or a list of SQL texts")
        return ()
    return tuple(value)


def _choice(check: Checker, node, key: str, path: str, choices, default: str) -> str:
    value = check.string(node, key, path, default=default) or default
    if value not in choices:
        check.add(node, key, join(path, key), f"must be one of {', '.join(choices)}, got '{value}'"
                                              f"{suggest(value, choices)}")
        return default
    return value


def _params(check: Checker, pnode, path: str):
    node = check.mapping(pnode, "params", join(path, "params"))
    if node is None:
        return ()
    out = []
    for key, value in node.items():
        try:
            out.append((str(key), parse_distribution(value)))
        except ValueError as exc:
            check.add(node, key, join(join(path, "params"), key), str(exc))
    return tuple(out)


def _transaction(ctx: Context, pnode, path: str) -> tuple[Statement, ...]:
    """The pool's statements: SQL text, or mappings with `name`, `sql` and a `versions:` condition."""
    check = ctx.check
    value = pnode.get("transaction")
    tpath = join(path, "transaction")
    if value is None:
        return ()
    if isinstance(value, str):  # one statement: a list of one, placed where the text is
        value = CommentedSeq([value])
        line, col = ctx.check.position(pnode, "transaction")
        value._yaml_set_line_col(line - 1, col - 1)
        value.lc.data = {0: [line - 1, col - 1]}
    if not isinstance(value, list) or not value:
        check.add(pnode, "transaction", tpath, f"must be a non-empty list of statements, got {describe(value)}")
        return ()
    out, seen = [], set()
    for i, item in enumerate(value):
        sub = join(tpath, i)
        versions = None
        if isinstance(item, str):
            name, sql = f"stmt{i + 1}", item
        elif isinstance(item, dict):
            check.known_keys(item, sub, ["name", "sql", "versions"], required=("sql",))
            versions = read_condition(check, item, sub)
            name = check.string(item, "name", sub, default=f"stmt{i + 1}") or f"stmt{i + 1}"
            sql = check.string(item, "sql", sub, default="") or ""
        else:
            check.add(value, i, sub, f"must be SQL text or a mapping with 'name' and 'sql', got {describe(item)}")
            continue
        if name in seen or (pnode.get("atomic") is True and name in ("begin", "commit")):
            check.add(value, i, sub, f"statement name '{name}' is used twice in this transaction")
        seen.add(name)
        if not sql.strip():
            check.add(value, i, sub, "has no SQL")
        elif spec(ctx.engine).one_statement_per_message and len(split_sql(sql)) > 1 \
                and pnode.get("protocol", "prepared") != "simple":
            check.add(value, i, sub, f"holds {len(split_sql(sql))} statements, but the "
                                     f"{pnode.get('protocol', 'prepared')} protocol sends one at a time: "
                                     f"make each a statement of its own, or set 'protocol: simple'")
        out.append(Statement(name, sql.strip(), versions))
    return tuple(out)
