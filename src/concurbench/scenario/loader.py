"""Load a scenario file, validate all of it, and build the frozen model.

Every problem is collected (not just the first) with file, line, column and field path; nothing
here touches a server. Each section has its reader (steps, server_keys, variants, pools, timeline,
background, expect, source), given the file's Context (context.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

from ruamel.yaml.comments import CommentedMap

from ..engines.registry import SPECS
from ..errors import ConfigError
from ..util import suggest
from .context import NAME_RE, Context, SamplerClass, expand
from .expect import read_expect
from .model import Scenario
from .server_keys import read_database, read_images, read_settings, read_versions
from .source import read_source
from .steps import read_steps
from .variants import Inherited, read_baselines, read_probes, read_samplers, read_sweep, read_variants
from .yamlpos import Checker, as_int, describe, join, load_yaml

TOP_KEYS = ["name", "title", "description", "engine", "source", "server", "database", "parameters", "quick",
            "setup", "teardown", "duration", "warmup", "warmup_transactions", "sweep", "samplers", "baseline", "seed",
            "variants", "probes", "expect"]
ENGINES = list(SPECS)
DEFAULT_DURATION = 10.0
DEFAULT_WARMUP = 2.0


def read_scenario(path: str | Path, *, samplers: Mapping[str, SamplerClass], quick: bool = False,
                  overrides: dict[str, str] | None = None) -> Scenario:
    """Read and validate a scenario file against the given samplers (by name); raises ConfigError listing
    every problem found. Commands use running/load.py's load_scenario, bound to the samplers' registry."""
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
    name, engine = _name_and_engine(check, doc)
    scenario = _build(Context(check, path, params, engine, samplers), doc, name, quick)
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
            node[key] = expand(value, params, lambda msg: check.add(node, key, sub, msg))
        else:
            _substitute(value, params, check, sub, seen)


def _name_and_engine(check: Checker, doc: CommentedMap) -> tuple[str, str]:
    name = check.string(doc, "name", "") or ""
    if name and not NAME_RE.match(name):
        check.add(doc, "name", "name", "must be letters, digits, '-', '_' or '.', starting with a letter or digit")
    engine = check.string(doc, "engine", "") or "postgres"
    if engine not in ENGINES:
        check.add(doc, "engine", "engine", f"unknown engine '{engine}'{suggest(engine, ENGINES)}; "
                                           f"known: {', '.join(ENGINES)}")
        engine = "postgres"
    return name, engine


def _build(ctx: Context, doc: CommentedMap, name: str, quick: bool) -> Scenario:
    """Every section read in turn (the order the problems are listed in), then the frozen scenario."""
    c = ctx.check
    settings = read_settings(ctx, doc)
    database = read_database(ctx, doc)
    versions = read_versions(c, doc)
    images = read_images(c, doc)
    setup = read_steps(ctx, doc, "setup", "setup")
    teardown = read_steps(ctx, doc, "teardown", "teardown")
    duration = c.duration(doc, "duration", "", default=DEFAULT_DURATION)
    warmup = c.duration(doc, "warmup", "", default=DEFAULT_WARMUP)
    warm_pass = c.integer(doc, "warmup_transactions", "", minimum=1, default=None)
    sweep = read_sweep(c, doc, "sweep", default=None)
    samplers = read_samplers(ctx, doc, "samplers", default=())
    probes = read_probes(c, doc, "probes", ())
    variants = read_variants(ctx, doc, Inherited(duration, warmup, warm_pass, sweep, samplers, probes))
    baselines = read_baselines(c, doc, variants)
    source = read_source(c, doc, variants)
    seed = c.integer(doc, "seed", "", default=1)
    digest = hashlib.sha256(ctx.path.read_bytes())
    for file in ctx.files:
        digest.update(file.read_bytes())
    return Scenario(
        name=name, title=c.string(doc, "title", "", default=name) or name, engine=ctx.engine,
        path=ctx.path.resolve(), sha256=digest.hexdigest(),
        description=c.string(doc, "description", "", default="") or "",
        source=source, settings=settings, parameters=tuple(ctx.params.items()), setup=setup,
        teardown=teardown, variants=variants, baselines=baselines, seed=seed, quick=quick,
        expect=read_expect(c, doc, variants), database=database, versions=versions, images=images,
        extras={"positions": dict(ctx.positions)})
