"""Load a scenario file, validate all of it, and build the frozen model.

Every problem is collected (not just the first) with file, line, column and field path; nothing
here touches a server.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Protocol

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ..engines.postgres import PROTOCOLS
from ..engines.sqlsplit import split_sql
from ..errors import ConfigError
from ..util import parse_rate, suggest
from .claims import parse_claim
from .distributions import parse_distribution
from .model import (DEFAULT_GROUP, PROBE_TIMES, Background, Pool, Probe, Published, SamplerSpec, Scenario,
                    Source, SqlStep, Statement, Variant)
from .server_keys import ServerSections
from .timeline import TIMELINE_KEYS, check_window, read_timeline
from .versions import VersionSpec, parse_versions
from .yamlpos import Checker, as_int, describe, join, load_yaml, read_text

TOP_KEYS = ["name", "title", "description", "engine", "source", "server", "database", "parameters", "quick",
            "setup", "teardown", "duration", "warmup", "warmup_transactions", "sweep", "samplers", "baseline", "seed",
            "variants", "probes", "expect"]
VARIANT_KEYS = ["description", "group", "pools", "background", "setup", "teardown", "duration", "warmup",
                "warmup_transactions", "sweep", "samplers", "server", "database", "probes"]
PROBE_KEYS = ["name", "sql", "when", "versions"]
POOL_KEYS = ["clients", "transaction", "params", "measure", "atomic", "transactions", "max_tries", "think", "protocol",
             "init", *TIMELINE_KEYS]
BACKGROUND_KEYS = ["name", "kind", "isolation", "sql", "release_after", "release_when", "rate", "options",
                   "start_after", "stop_after", "at"]
BACKGROUND_KINDS = {"postgres": ["hold_transaction", "statement", "log_drain"],
                    "mssql": ["hold_transaction", "xevents", "sql_trace"]}
POSTGRES_ONLY_KINDS = {"statement": "it samples the statement's wait event from pg_stat_activity"}
SOURCE_KEYS = ["title", "url", "author", "engine", "hardware", "published"]
PUBLISHED_KEYS = ["variant", "metric", "value", "unit", "clients", "pool", "note", "server"]
ENGINES = ["postgres", "mssql"]
ISOLATION = {"postgres": ["read committed", "repeatable read", "serializable"],
             "mssql": ["read uncommitted", "read committed", "repeatable read", "snapshot", "serializable"]}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
PARAM_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_DURATION = 10.0
DEFAULT_WARMUP = 2.0


class SamplerKind(Protocol):
    """What the loader needs of a sampler class: its engine, its option names, and a check of the options
    (making one with a spec raises ConfigError when they are wrong)."""

    engine: str
    options: tuple[str, ...]

    def __call__(self, spec: SamplerSpec) -> object: ...


def load_scenario(path: str | Path, *, samplers: Mapping[str, SamplerKind], quick: bool = False,
                  overrides: dict[str, str] | None = None) -> Scenario:
    """Read and validate a scenario file against the given samplers (by name); raises ConfigError listing
    every problem found. Commands use concurbench.scenarios.load_scenario, bound to the samplers' registry."""
    path = Path(path)
    doc = load_yaml(path)
    check = Checker(path)
    if not isinstance(doc, CommentedMap):
        check.add(doc, None, "", f"the scenario must be a mapping at the top level, got {describe(doc)}")
        check.fail()
    check.known_keys(doc, "", TOP_KEYS, required=("name", "engine", "variants"))
    if quick and isinstance(doc.get("quick"), dict):
        _merge(doc, doc["quick"])
    elif "quick" in doc and not isinstance(doc["quick"], dict):
        check.add(doc, "quick", "quick", f"must be a mapping of overrides, got {describe(doc['quick'])}")
    if isinstance(doc.get("quick"), dict):
        check.known_keys(doc["quick"], "quick", [k for k in TOP_KEYS if k not in ("name", "engine", "quick")])
    params = _parameters(doc, check, overrides or {})
    _substitute(doc, params, check, "")
    builder = _Builder(path, check, params, samplers)
    scenario = builder.build(doc, quick)
    check.fail()
    return scenario


def _merge(base: CommentedMap, extra: CommentedMap) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _parameters(doc: CommentedMap, check: Checker, overrides: dict[str, str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    node = check.mapping(doc, "parameters", "parameters")
    if node is not None:
        for key, value in node.items():
            if isinstance(value, (dict, list)) or value is None:
                check.add(node, key, join("parameters", key), f"must be a number or a string, got {describe(value)}")
            else:
                params[str(key)] = value
    for key, text in overrides.items():
        if key not in params:
            raise ConfigError(f"{check.file}: --param {key}: the scenario has no parameter '{key}'"
                              f"{suggest(key, params)}; it has: {', '.join(params) or 'none'}")
        params[key] = _scalar(text)
    return params


def _scalar(text: str) -> Any:
    number = as_int(text)
    if number is not None:
        return number
    try:
        return float(text)
    except ValueError:
        return text


def _substitute(node: Any, params: dict[str, Any], check: Checker, path: str, seen: set[int] | None = None) -> None:
    """Replace ${name} in every string below node (the parameters section itself excepted). A node reached
    again through a YAML alias is done once: nested aliases would otherwise be walked exponentially often."""
    seen = set() if seen is None else seen
    if isinstance(node, (dict, list)):
        if id(node) in seen:
            return
        seen.add(id(node))
    if isinstance(node, dict):
        items = [(k, v) for k, v in node.items() if not (path == "" and k == "parameters")]
    elif isinstance(node, list):
        items = list(enumerate(node))
    else:
        return
    for key, value in items:
        sub = join(path, key)
        if isinstance(value, str) and "${" in value:
            node[key] = _expand(value, params, lambda msg: check.add(node, key, sub, msg))
        else:
            _substitute(value, params, check, sub, seen)


def _expand(text: str, params: dict[str, Any], report) -> Any:
    whole = PARAM_REF.fullmatch(text.strip())
    if whole and whole.group(1) in params:
        return params[whole.group(1)]

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in params:
            report(f"unknown parameter '${{{name}}}'{suggest(name, params)}")
            return match.group(0)
        return str(params[name])

    return PARAM_REF.sub(one, text)


class _Builder(ServerSections):
    def __init__(self, path: Path, check: Checker, params: dict[str, Any], samplers: Mapping[str, SamplerKind]):
        self.samplers = samplers
        self.path = path
        self.check = check
        self.params = params
        self.files: list[Path] = []
        self.positions: dict[str, tuple[int, int]] = {}  # field path -> (line, column), for later checks (guards.py)
        self.engine = "postgres"

    def build(self, doc: CommentedMap, quick: bool) -> Scenario:
        c = self.check
        name = c.string(doc, "name", "") or ""
        if name and not NAME_RE.match(name):
            c.add(doc, "name", "name", "must be letters, digits, '-', '_' or '.', starting with a letter or digit")
        engine = c.string(doc, "engine", "") or "postgres"
        if engine not in ENGINES:
            c.add(doc, "engine", "engine", f"unknown engine '{engine}'{suggest(engine, ENGINES)}; "
                                           f"known: {', '.join(ENGINES)}")
            engine = "postgres"
        self.engine = engine
        settings = self._settings(doc)
        database = self._database(doc)
        versions = self._versions(doc)
        images = self._images(doc)
        setup = self._sql_steps(doc, "setup", "setup")
        teardown = self._sql_steps(doc, "teardown", "teardown")
        duration = c.duration(doc, "duration", "", default=DEFAULT_DURATION)
        warmup = c.duration(doc, "warmup", "", default=DEFAULT_WARMUP)
        warm_pass = c.integer(doc, "warmup_transactions", "", minimum=1, default=None)
        sweep = self._sweep(doc, "sweep", default=None)
        samplers = self._samplers(doc, "samplers", "samplers", default=())
        probes = self._probes(doc, "probes", ())
        variants = self._variants(doc, duration, (warmup, warm_pass), sweep, samplers, probes)
        baselines = self._baselines(doc, variants)
        source = self._source(doc, variants)
        seed = c.integer(doc, "seed", "", default=1)
        digest = hashlib.sha256(self.path.read_bytes())
        for file in self.files:
            digest.update(file.read_bytes())
        return Scenario(
            name=name, title=c.string(doc, "title", "", default=name) or name, engine=engine,
            path=self.path.resolve(), sha256=digest.hexdigest(),
            description=c.string(doc, "description", "", default="") or "",
            source=source, settings=settings, parameters=tuple(self.params.items()), setup=setup,
            teardown=teardown, variants=variants, baselines=baselines, seed=seed, quick=quick,
            expect=self._expect(doc, variants), database=database, versions=versions, images=images,
            extras={"positions": dict(self.positions)})

    # -- sections ----------------------------------------------------------
    def _sql_steps(self, node, key, path) -> tuple[SqlStep, ...]:
        value = node.get(key) if isinstance(node, dict) else None
        if value is None:
            return ()
        if isinstance(value, str):
            return (SqlStep(value, "inline"),)
        if not isinstance(value, list):
            self.check.add(node, key, path, f"must be SQL text or a list of steps, got {describe(value)}")
            return ()
        steps = []
        for i, item in enumerate(value):
            sub = join(path, i)
            if isinstance(item, str):
                steps.append(SqlStep(item, "inline"))
            elif isinstance(item, dict):
                self.check.known_keys(item, sub, ["sql", "file", "versions"])
                versions = self._condition(item, sub)
                if ("sql" in item) == ("file" in item):
                    self.check.add(value, i, sub, "needs exactly one of 'sql' or 'file'")
                elif "sql" in item:
                    steps.append(SqlStep(str(item["sql"]), "inline", versions))
                else:
                    step = self._file_step(item, join(sub, "file"))
                    if step:
                        steps.append(replace(step, versions=versions))
            else:
                self.check.add(value, i, sub, f"must be SQL text or a mapping with 'sql' or 'file', "
                                              f"got {describe(item)}")
        return tuple(steps)

    def _condition(self, item, path) -> VersionSpec | None:
        """The item's `versions:` condition (docs/versions.md), or None when it has none."""
        if item.get("versions") is None:
            return None
        try:
            return parse_versions(item["versions"])
        except ValueError as exc:
            self.check.add(item, "versions", join(path, "versions"), str(exc))
            return None

    def _file_step(self, item, path) -> SqlStep | None:
        rel = Path(str(item["file"]))
        for base in [self.path.resolve().parent, *self.path.resolve().parents]:
            candidate = base / rel
            if candidate.is_file():
                try:
                    text = read_text(candidate, "SQL file")
                except ConfigError as exc:
                    self.check.add(item, "file", path, exc.message)
                    return None
                self.files.append(candidate)
                return SqlStep(_expand(text, self.params, lambda m: self.check.add(item, "file", path,
                                                                                  f"{candidate}: {m}")),
                               str(rel))
        self.check.add(item, "file", path, f"no file '{rel}' next to the scenario or in a folder above it")
        return None

    def _sweep(self, node, path, default):
        if "sweep" not in node or node["sweep"] is None:
            return default
        value = node["sweep"]
        if not isinstance(value, list) or not value:
            self.check.add(node, "sweep", path, f"must be a non-empty list of client counts, got {describe(value)}")
            return default
        points = []
        for i, item in enumerate(value):
            number = as_int(item)
            if number is None or number < 1:
                self.check.add(value, i, join(path, i), f"must be a positive integer, got {describe(item)}")
            else:
                points.append(number)
        return tuple(points) or default

    def _samplers(self, node, key, path, default):
        if key not in node or node[key] is None:
            return default
        value = node[key]
        if isinstance(value, list):
            entries = [(i, item, None) for i, item in enumerate(value)]
        elif isinstance(value, dict):
            entries = [(k, k, v) for k, v in value.items()]
        else:
            self.check.add(node, key, path, f"must be a list of sampler names, got {describe(value)}")
            return default
        specs = []
        container = value
        known = {n: cls for n, cls in self.samplers.items() if cls.engine == self.engine}
        for where, name, options in entries:
            sub = join(path, where)
            if isinstance(name, dict) and len(name) >= 1 and "name" in name:  # - {name: sampler, option: value}
                options = {k: v for k, v in name.items() if k != "name"} or None
                name = name["name"]
            if not isinstance(name, str) or name not in known:
                self.check.add(container, where, sub, f"unknown sampler {describe(name)}{suggest(name, known)}; "
                                                      f"known for engine {self.engine}: {', '.join(known)}",
                               of_key=isinstance(value, dict))
                continue
            opts: dict[str, Any] = {}
            if options is not None:
                if not isinstance(options, dict):
                    self.check.add(container, where, sub, f"options must be a mapping, got {describe(options)}")
                else:
                    allowed = known[name].options
                    self.check.known_keys(options, sub, allowed)
                    for opt_key in options:
                        if opt_key == "interval":
                            opts["interval"] = self.check.duration(options, "interval", sub, default=None)
                        elif opt_key in allowed:
                            opts[opt_key] = options[opt_key]
            spec = SamplerSpec(name, tuple(opts.items()))
            try:
                known[name](spec)  # a sampler checks its own options when it is made
            except ConfigError as exc:
                self.check.add(container, where, sub, exc.message, of_key=isinstance(value, dict))
                continue
            specs.append(spec)
        return tuple(specs)

    def _variants(self, doc, duration, warmups, sweep, samplers, probes) -> tuple[Variant, ...]:
        """`warmups`: the scenario's (warmup, warmup_transactions), which a variant may override."""
        warmup, warm_pass = warmups
        node = self.check.mapping(doc, "variants", "variants", required=False)
        if node is None:
            return ()
        if not node:
            self.check.add(doc, "variants", "variants", "must name at least one variant")
        out = []
        for name, vnode in node.items():
            path = join("variants", name)
            if not isinstance(vnode, dict):
                self.check.add(node, name, path, f"must be a mapping, got {describe(vnode)}")
                continue
            if not NAME_RE.match(str(name)):
                self.check.add(node, name, path, "variant names are letters, digits, '-', '_' or '.'", of_key=True)
            self.check.known_keys(vnode, path, VARIANT_KEYS, required=("pools",))
            v_duration = self.check.duration(vnode, "duration", path, default=duration)
            pools = self._pools(vnode, path, v_duration)
            v_sweep = self._sweep(vnode, join(path, "sweep"), default=sweep)
            uses_sweep = any(p.clients is None for p in pools)
            if uses_sweep and not v_sweep:
                self.check.add(vnode, "pools", join(path, "pools"),
                               "a pool has 'clients: sweep' but neither the variant nor the scenario has a 'sweep'")
            if pools and not any(p.measure for p in pools):
                self.check.add(vnode, "pools", join(path, "pools"), "needs at least one measured pool "
                                                                  "(a pool without 'measure: false')")
            out.append(Variant(
                name=str(name), description=self.check.string(vnode, "description", path, default="") or "",
                group=self.check.string(vnode, "group", path, default=DEFAULT_GROUP) or DEFAULT_GROUP,
                pools=pools, background=self._background(vnode, path, v_duration),
                setup=self._sql_steps(vnode, "setup", join(path, "setup")),
                teardown=self._sql_steps(vnode, "teardown", join(path, "teardown")),
                duration=v_duration, warmup=self.check.duration(vnode, "warmup", path, default=warmup),
                warmup_transactions=self.check.integer(vnode, "warmup_transactions", path, minimum=1,
                                                       default=warm_pass),
                sweep=tuple(v_sweep) if (uses_sweep and v_sweep) else (None,),
                samplers=self._samplers(vnode, "samplers", join(path, "samplers"), default=samplers),
                settings=self._settings(vnode, path), database=self._database(vnode, path),
                probes=probes + self._probes(vnode, join(path, "probes"), ())))
        return tuple(out)

    def _probes(self, node, path, default) -> tuple[Probe, ...]:
        if node.get("probes") is None:
            return default
        out = []
        for i, item, sub in self.check.mappings(node, "probes", path, what="probes",
                                                item="a mapping with 'name' and 'sql'"):
            self.check.known_keys(item, sub, PROBE_KEYS, required=("name", "sql"))
            when = item.get("when", ["after"])
            when = [when] if isinstance(when, str) else when
            if not isinstance(when, list) or any(w not in PROBE_TIMES for w in when):
                self.check.add(item, "when", join(sub, "when"), f"must be one or more of {', '.join(PROBE_TIMES)}")
                when = ["after"]
            out.append(Probe(self.check.string(item, "name", sub, default=f"probe{i + 1}") or f"probe{i + 1}",
                             self.check.string(item, "sql", sub, default="") or "", tuple(when),
                             self._condition(item, sub)))
        return tuple(out)

    def _expect(self, doc, variants) -> tuple:
        value = doc.get("expect")
        if value is None:
            return ()
        if not isinstance(value, list):
            self.check.add(doc, "expect", "expect", f"must be a list of claims, got {describe(value)}")
            return ()
        known = {v.name: v for v in variants}
        out = []
        for i, item in enumerate(value):
            sub = join("expect", i)
            text, description, where, servers, skip_quick, versions = item, "", (value, i), [], "", None
            if isinstance(item, dict):
                self.check.known_keys(item, sub, ["check", "claim", "servers", "versions", "skip_quick"],
                                      required=("check",))
                versions = self._condition(item, sub)
                skip_quick = item.get("skip_quick", "")
                if not isinstance(skip_quick, str) or (skip_quick == "" and "skip_quick" in item):
                    self.check.add(item, "skip_quick", join(sub, "skip_quick"),
                                   "must say why the claim is left out of quick runs, e.g. "
                                   "'the effect is too small to decide in 2 s windows'")
                    skip_quick = ""
                text = item.get("check")
                description = str(item.get("claim") or "")
                where = (item, "check")
                servers = item.get("servers", [])
                servers = [servers] if isinstance(servers, (str, int)) else servers
                if not isinstance(servers, list) or not all(isinstance(v, (str, int)) for v in servers):
                    self.check.add(item, "servers", join(sub, "servers"),
                                   f"must be a list of server versions such as [\"2022\"], got {describe(servers)}")
                    servers = []
            if not isinstance(text, str):
                self.check.add(*where, sub, f"a claim is text such as 'holder: elapsed_s >= 3 * none: elapsed_s', "
                                            f"got {describe(text)}")
                continue
            try:
                claim = parse_claim(text, description)
                if servers or versions:
                    claim = replace(claim, servers=tuple(str(v) for v in servers), versions=versions)
                if skip_quick:
                    claim = replace(claim, skip_quick=skip_quick)
            except ValueError as exc:
                self.check.add(*where, sub, str(exc))
                continue
            for ref in claim.refs():
                variant = known.get(ref.variant)
                if variant is None:
                    self.check.add(*where, sub, f"no variant named '{ref.variant}'{suggest(ref.variant, known)}")
                    continue
                if ref.point and ref.point not in ("min", "max") and int(ref.point) not in variant.sweep:
                    self.check.add(*where, sub, f"variant '{ref.variant}' does not run at {ref.point} clients "
                                                f"(sweep: {', '.join(str(p) for p in variant.sweep)})")
                if ref.pool and ref.pool not in {p.name for p in variant.pools}:
                    self.check.add(*where, sub, f"variant '{ref.variant}' has no pool '{ref.pool}'"
                                                f"{suggest(ref.pool, [p.name for p in variant.pools])}")
            out.append(claim)
        return tuple(out)

    def _pools(self, vnode, vpath, duration: float) -> tuple[Pool, ...]:
        node = self.check.mapping(vnode, "pools", join(vpath, "pools"))
        if node is None:
            return ()
        pools = []
        for name, pnode in node.items():
            path = join(join(vpath, "pools"), name)
            if not isinstance(pnode, dict):
                self.check.add(node, name, path, f"must be a mapping, got {describe(pnode)}")
                continue
            self.check.known_keys(pnode, path, POOL_KEYS, required=("clients", "transaction"))
            self.positions[join(path, "clients")] = self.check.position(pnode, "clients" if "clients" in pnode else None)
            clients = pnode.get("clients")
            n_clients = None if clients == "sweep" else as_int(clients)
            if clients is not None and clients != "sweep" and (n_clients is None or n_clients < 1):
                self.check.add(pnode, "clients", join(path, "clients"),
                               f"must be a positive integer or 'sweep', got {describe(clients)}")
                n_clients = 1
            elif clients is None:
                n_clients = 1
            params = self._params(pnode, path)
            transaction = self._transaction(pnode, path)
            think = self.check.duration(pnode, "think", path, default=0.0)
            transactions = self.check.integer(pnode, "transactions", path, minimum=1, default=None)
            timeline = read_timeline(self.check, pnode, path, think=think, clients=n_clients)
            pool = Pool(
                name=str(name), clients=n_clients, transaction=transaction, params=params,
                measure=self.check.boolean(pnode, "measure", path, default=True),
                atomic=self.check.boolean(pnode, "atomic", path, default=False),
                transactions=transactions,
                max_tries=self.check.integer(pnode, "max_tries", path, minimum=1, default=1),
                think=think, protocol=self._choice(pnode, "protocol", path, PROTOCOLS, "prepared"),
                init=self._texts(pnode, "init", join(path, "init")), **timeline)
            if transactions is None:  # a pool that runs a count of transactions has no window to fit in
                check_window(self.check, pnode, path, pool, duration)
            pools.append(pool)
        return tuple(pools)

    def _texts(self, node, key, path) -> tuple[str, ...]:
        value = node.get(key)
        if value is None:
            return ()
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.check.add(node, key, path, "must be SQL text or a list of SQL texts")
            return ()
        return tuple(value)

    def _choice(self, node, key, path, choices, default):
        value = self.check.string(node, key, path, default=default) or default
        if value not in choices:
            self.check.add(node, key, join(path, key), f"must be one of {', '.join(choices)}, got '{value}'"
                                                       f"{suggest(value, choices)}")
            return default
        return value

    def _params(self, pnode, path):
        node = self.check.mapping(pnode, "params", join(path, "params"))
        if node is None:
            return ()
        out = []
        for key, value in node.items():
            try:
                out.append((str(key), parse_distribution(value)))
            except ValueError as exc:
                self.check.add(node, key, join(join(path, "params"), key), str(exc))
        return tuple(out)

    def _transaction(self, pnode, path) -> tuple[Statement, ...]:
        value = pnode.get("transaction")
        tpath = join(path, "transaction")
        if value is None:
            return ()
        if isinstance(value, str):
            value = CommentedSeq([value])
        if not isinstance(value, list) or not value:
            self.check.add(pnode, "transaction", tpath, f"must be a non-empty list of statements, got {describe(value)}")
            return ()
        out, seen = [], set()
        for i, item in enumerate(value):
            sub = join(tpath, i)
            versions = None
            if isinstance(item, str):
                name, sql = f"stmt{i + 1}", item
            elif isinstance(item, dict):
                self.check.known_keys(item, sub, ["name", "sql", "versions"], required=("sql",))
                versions = self._condition(item, sub)
                name = self.check.string(item, "name", sub, default=f"stmt{i + 1}") or f"stmt{i + 1}"
                sql = self.check.string(item, "sql", sub, default="") or ""
            else:
                self.check.add(value, i, sub, f"must be SQL text or a mapping with 'name' and 'sql', got {describe(item)}")
                continue
            if name in seen or (pnode.get("atomic") is True and name in ("begin", "commit")):
                self.check.add(value, i, sub, f"statement name '{name}' is used twice in this transaction")
            seen.add(name)
            if not sql.strip():
                self.check.add(value, i, sub, "has no SQL")
            elif self.engine == "postgres" and len(split_sql(sql)) > 1 and pnode.get("protocol", "prepared") != "simple":
                self.check.add(value, i, sub, f"holds {len(split_sql(sql))} statements, but the "
                                              f"{pnode.get('protocol', 'prepared')} protocol sends one at a time: "
                                              f"make each a statement of its own, or set 'protocol: simple'")
            out.append(Statement(name, sql.strip(), versions))
        return tuple(out)

    def _background(self, vnode, vpath, duration: float) -> tuple[Background, ...]:
        path = join(vpath, "background")
        out = []
        for i, item, sub in self.check.mappings(vnode, "background", path, what="sessions"):
            self.check.known_keys(item, sub, BACKGROUND_KEYS, required=("kind",))
            kind = self.check.string(item, "kind", sub, default="hold_transaction") or "hold_transaction"
            kinds = BACKGROUND_KINDS[self.engine]
            if kind in POSTGRES_ONLY_KINDS and self.engine != "postgres":
                self.check.add(item, "kind", join(sub, "kind"), f"kind {kind} is PostgreSQL-only for now "
                                                                f"({POSTGRES_ONLY_KINDS[kind]}); on SQL Server "
                                                                f"use a one-client pool instead")
            elif kind not in kinds:
                self.check.add(item, "kind", join(sub, "kind"), f"unknown background kind '{kind}' for engine "
                                                                f"{self.engine}{suggest(kind, kinds)}; known: "
                                                                f"{', '.join(kinds)}")
            isolation = (self.check.string(item, "isolation", sub, default="read committed") or "").lower()
            levels = ISOLATION[self.engine]
            if isolation not in levels:
                self.check.add(item, "isolation", join(sub, "isolation"),
                               f"unknown isolation level '{isolation}'{suggest(isolation, levels)}; known: "
                               f"{', '.join(levels)}")
            options = self._observer_options(item, kind, sub)
            sql = item.get("sql", [])
            sql = [sql] if isinstance(sql, str) else sql
            if not isinstance(sql, list) or not all(isinstance(s, str) for s in sql):
                self.check.add(item, "sql", join(sub, "sql"), "must be SQL text or a list of SQL texts")
                sql = []
            rate = None
            if kind == "log_drain":
                for key in ("isolation", "sql", "release_when"):
                    if key in item:
                        self.check.add(item, key, join(sub, key), "does not apply to kind log_drain", of_key=True)
                try:
                    rate = parse_rate(item["rate"]) if "rate" in item else None
                except ValueError as exc:
                    self.check.add(item, "rate", join(sub, "rate"), str(exc))
                if "rate" not in item:
                    self.check.add(vnode["background"], i, join(sub, "rate"),
                                   "a log_drain needs a 'rate', such as 32kB/s")
            elif "rate" in item:
                self.check.add(item, "rate", join(sub, "rate"), "applies only to kind log_drain", of_key=True)
            start_after, release_after, at = self._timeline(item, kind, sub, duration)
            if kind == "statement" and not sql:
                self.check.add(vnode["background"], i, join(sub, "sql"), "a statement needs its 'sql'")
            out.append(Background(
                name=self.check.string(item, "name", sub, default=f"{kind}{i + 1}") or kind, kind=kind,
                isolation=isolation, sql=tuple(sql), release_after=release_after, start_after=start_after, at=at,
                release_when=self.check.string(item, "release_when", sub, default=None), rate=rate,
                options=options))
        return tuple(out)

    def _timeline(self, item, kind: str, sub: str, duration: float) -> tuple:
        """A background session's times in the window: (start_after, release_after, at), each checked against
        its kind and the variant's duration. `stop_after` is the shared name of `release_after`."""
        times = {key: self.check.duration(item, key, sub, default=None)
                 for key in ("start_after", "stop_after", "release_after", "at")}
        takes = {"hold_transaction": ("start_after", "stop_after", "release_after"), "statement": ("at",)}
        for key in times:
            if key in item and key not in takes.get(kind, ()):
                takers = [k for k, keys in takes.items() if key in keys]
                self.check.add(item, key, join(sub, key), f"does not apply to kind {kind} (only to "
                                                          f"{' and '.join(takers)})", of_key=True)
                times[key] = None
        if kind == "statement" and "at" not in item:
            self.check.add(item, None, join(sub, "at"), "a statement needs 'at', the time in the measurement "
                                                        "window to run it, such as 500ms")
        if times["stop_after"] is not None and times["release_after"] is not None:
            self.check.add(item, "stop_after", join(sub, "stop_after"), "give stop_after or release_after, not "
                                                                        "both (on a held transaction they are the "
                                                                        "same: when it commits)", of_key=True)
        for key in ("start_after", "stop_after", "release_after", "at"):
            if times[key] is not None and times[key] >= duration:
                self.check.add(item, key, join(sub, key), f"{times[key]:g} s is beyond the measurement window "
                                                          f"({duration:g} s)")
        stop = times["stop_after"] if times["stop_after"] is not None else times["release_after"]
        start = times["start_after"]
        if start is not None and stop is not None and stop <= start:
            key = "stop_after" if times["stop_after"] is not None else "release_after"
            self.check.add(item, key, join(sub, key), f"{stop:g} s is not after start_after ({start:g} s)")
        if kind == "statement":
            for key in ("isolation", "release_when"):
                if key in item:
                    self.check.add(item, key, join(sub, key), "does not apply to kind statement (its SQL runs "
                                                              "in autocommit; put BEGIN in it for a transaction)",
                                   of_key=True)
        return start, stop, times["at"]

    def _baselines(self, doc, variants) -> tuple:
        names = {v.name: v for v in variants}
        chosen: dict[str, str] = {}
        value = doc.get("baseline")
        if value is not None:
            pairs = list(value.items()) if isinstance(value, dict) else [(None, value)]
            for group, name in pairs:
                where = (doc, "baseline") if group is None else (value, group)
                path = "baseline" if group is None else join("baseline", group)
                if not isinstance(name, str) or name not in names:
                    self.check.add(*where, path, f"no variant named {describe(name)}{suggest(name, names)}")
                    continue
                group_of = names[name].group
                if group is not None and group != group_of:
                    self.check.add(*where, path, f"variant '{name}' is in group '{group_of}', not '{group}'")
                    continue
                chosen[group_of] = name
        for v in variants:
            chosen.setdefault(v.group, v.name)
        return tuple(chosen.items())

    def _source(self, doc, variants) -> Source:
        node = self.check.mapping(doc, "source", "source")
        if node is None:
            return Source()
        self.check.known_keys(node, "source", SOURCE_KEYS)
        published = []
        names = [v.name for v in variants]
        for _i, item, sub in self.check.mappings(node, "published", "source.published", what="figures"):
            self.check.known_keys(item, sub, PUBLISHED_KEYS, required=("variant", "metric", "value"))
            variant = self.check.string(item, "variant", sub, default="") or ""
            if variant and variant not in names:
                self.check.add(item, "variant", join(sub, "variant"), f"no variant named '{variant}'{suggest(variant, names)}")
            raw = item.get("value")
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                self.check.add(item, "value", join(sub, "value"), f"must be a number, got {describe(raw)}")
                raw = 0.0
            published.append(Published(
                variant=variant, metric=self.check.string(item, "metric", sub, default="") or "", value=float(raw),
                unit=self.check.string(item, "unit", sub, default="") or "",
                clients=self.check.integer(item, "clients", sub, minimum=1, default=None),
                pool=self.check.string(item, "pool", sub, default=None),
                note=self.check.string(item, "note", sub, default="") or "",
                server=str(item["server"]) if item.get("server") is not None else None))
        s = self.check.string
        return Source(title=s(node, "title", "source", default="") or "", url=s(node, "url", "source", default="") or "",
                      author=s(node, "author", "source", default="") or "",
                      engine=s(node, "engine", "source", default="") or "",
                      hardware=s(node, "hardware", "source", default="") or "", published=tuple(published))
