"""`variants:`, what a variant may take from the scenario (`sweep`, `samplers`, `probes`), and
`baseline:`, the variant each group is compared against."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..util import suggest
from .background import read_background
from .context import NAME_RE, Context
from .model import DEFAULT_GROUP, PROBE_TIMES, Probe, SamplerSpec, Variant
from .pools import read_pools
from .server_keys import read_database, read_settings
from .steps import read_steps
from .versions import read_condition
from .yamlpos import Checker, as_int, describe, join

VARIANT_KEYS = ["description", "group", "pools", "background", "setup", "teardown", "duration", "warmup",
                "warmup_transactions", "sweep", "samplers", "server", "database", "probes"]
PROBE_KEYS = ["name", "sql", "when", "versions"]


@dataclass(frozen=True)
class Inherited:
    """What each variant takes from the scenario: defaults it may set for itself, and probes it adds to."""

    duration: float
    warmup: float
    warmup_transactions: int | None
    sweep: tuple[int, ...] | None
    samplers: tuple[SamplerSpec, ...]
    probes: tuple[Probe, ...]


def read_variants(ctx: Context, doc, inherited: Inherited) -> tuple[Variant, ...]:
    node = ctx.check.mapping(doc, "variants", "variants", required=False)
    if node is None:
        return ()
    if not node:
        ctx.check.add(doc, "variants", "variants", "must name at least one variant")
    out = []
    for name, vnode in node.items():
        path = join("variants", name)
        if not isinstance(vnode, dict):
            ctx.check.add(node, name, path, f"must be a mapping, got {describe(vnode)}")
            continue
        if not NAME_RE.match(str(name)):
            ctx.check.add(node, name, path, "variant names are letters, digits, '-', '_' or '.'", of_key=True)
        out.append(_variant(ctx, str(name), vnode, path, inherited))
    return tuple(out)


def _variant(ctx: Context, name: str, vnode, path: str, inherited: Inherited) -> Variant:
    check = ctx.check
    check.known_keys(vnode, path, VARIANT_KEYS, required=("pools",))
    duration = check.duration(vnode, "duration", path, default=inherited.duration)
    pools = read_pools(ctx, vnode, path, duration)
    sweep = read_sweep(check, vnode, join(path, "sweep"), default=inherited.sweep)
    uses_sweep = any(p.clients is None for p in pools)
    if uses_sweep and not sweep:
        check.add(vnode, "pools", join(path, "pools"),
                  "a pool has 'clients: sweep' but neither the variant nor the scenario has a 'sweep'")
    if pools and not any(p.measure for p in pools):
        check.add(vnode, "pools", join(path, "pools"), "needs at least one measured pool "
                                                       "(a pool without 'measure: false')")
    return Variant(
        name=name, description=check.string(vnode, "description", path, default="") or "",
        group=check.string(vnode, "group", path, default=DEFAULT_GROUP) or DEFAULT_GROUP,
        pools=pools, background=read_background(ctx, vnode, path, duration),
        setup=read_steps(ctx, vnode, "setup", join(path, "setup")),
        teardown=read_steps(ctx, vnode, "teardown", join(path, "teardown")),
        duration=duration, warmup=check.duration(vnode, "warmup", path, default=inherited.warmup),
        warmup_transactions=check.integer(vnode, "warmup_transactions", path, minimum=1,
                                          default=inherited.warmup_transactions),
        sweep=tuple(sweep) if (uses_sweep and sweep) else (None,),
        samplers=read_samplers(ctx, vnode, join(path, "samplers"), default=inherited.samplers),
        settings=read_settings(ctx, vnode, path), database=read_database(ctx, vnode, path),
        probes=inherited.probes + read_probes(check, vnode, join(path, "probes"), ()))


def read_sweep(check: Checker, node, path: str, default):
    """The client counts of `sweep:`, or `default` when there is none."""
    if "sweep" not in node or node["sweep"] is None:
        return default
    value = node["sweep"]
    if not isinstance(value, list) or not value:
        check.add(node, "sweep", path, f"must be a non-empty list of client counts, got {describe(value)}")
        return default
    points = []
    for i, item in enumerate(value):
        number = as_int(item)
        if number is None or number < 1:
            check.add(value, i, join(path, i), f"must be a positive integer, got {describe(item)}")
        else:
            points.append(number)
    return tuple(points) or default


def read_samplers(ctx: Context, node, path: str, default):
    """`samplers:` as a list of names (or of mappings with `name` and options), or a mapping of names to
    options; each checked against the samplers of the scenario's engine, which check their own options."""
    check = ctx.check
    if "samplers" not in node or node["samplers"] is None:
        return default
    value = node["samplers"]
    if isinstance(value, list):
        entries = [(i, item, None) for i, item in enumerate(value)]
    elif isinstance(value, dict):
        entries = [(k, k, v) for k, v in value.items()]
    else:
        check.add(node, "samplers", path, f"must be a list of sampler names, got {describe(value)}")
        return default
    specs = []
    known = {n: cls for n, cls in ctx.samplers.items() if cls.engine == ctx.engine}
    for where, name, options in entries:
        sub = join(path, where)
        if isinstance(name, dict) and len(name) >= 1 and "name" in name:  # - {name: sampler, option: value}
            options = {k: v for k, v in name.items() if k != "name"} or None
            name = name["name"]
        if not isinstance(name, str) or name not in known:
            check.add(value, where, sub, f"unknown sampler {describe(name)}{suggest(name, known)}; "
                                         f"known for engine {ctx.engine}: {', '.join(known)}",
                      of_key=isinstance(value, dict))
            continue
        spec = SamplerSpec(name, tuple(_sampler_options(check, value, where, sub, options, known[name].options)))
        try:
            known[name](spec)  # a sampler checks its own options when it is made
        except ConfigError as exc:
            check.add(value, where, sub, exc.message, of_key=isinstance(value, dict))
            continue
        except (ValueError, TypeError) as exc:  # an option of the wrong kind (a word where a number goes)
            check.add(value, where, sub, f"an option has a value of the wrong kind ({exc})", of_key=isinstance(value, dict))
            continue
        specs.append(spec)
    return tuple(specs)


def _sampler_options(check: Checker, container, where, sub: str, options, allowed) -> list[tuple[str, Any]]:
    if options is None:
        return []
    if not isinstance(options, dict):
        check.add(container, where, sub, f"options must be a mapping, got {describe(options)}")
        return []
    check.known_keys(options, sub, allowed)
    opts: dict[str, Any] = {}
    for key in options:
        if key == "interval":
            opts["interval"] = check.duration(options, "interval", sub, default=None)
        elif key in allowed:
            opts[key] = options[key]
    return list(opts.items())


def read_probes(check: Checker, node, path: str, default) -> tuple[Probe, ...]:
    if node.get("probes") is None:
        return default
    out = []
    for i, item, sub in check.mappings(node, "probes", path, what="probes", item="a mapping with 'name' and 'sql'"):
        check.known_keys(item, sub, PROBE_KEYS, required=("name", "sql"))
        when = item.get("when", ["after"])
        when = [when] if isinstance(when, str) else when
        if not isinstance(when, list) or any(w not in PROBE_TIMES for w in when):
            check.add(item, "when", join(sub, "when"), f"must be one or more of {', '.join(PROBE_TIMES)}")
            when = ["after"]
        out.append(Probe(check.string(item, "name", sub, default=f"probe{i + 1}") or f"probe{i + 1}",
                         check.string(item, "sql", sub, default="") or "", tuple(when),
                         read_condition(check, item, sub)))
    return tuple(out)


def read_baselines(check: Checker, doc, variants) -> tuple:
    """(group, variant) pairs: the `baseline:` named for each group, else the group's first variant."""
    names = {v.name: v for v in variants}
    chosen: dict[str, str] = {}
    value = doc.get("baseline")
    if value is not None:
        pairs = list(value.items()) if isinstance(value, dict) else [(None, value)]
        for group, name in pairs:
            where = (doc, "baseline") if group is None else (value, group)
            path = "baseline" if group is None else join("baseline", group)
            if not isinstance(name, str) or name not in names:
                check.add(*where, path, f"no variant named {describe(name)}{suggest(name, names)}")
                continue
            group_of = names[name].group
            if group is not None and group != group_of:
                check.add(*where, path, f"variant '{name}' is in group '{group_of}', not '{group}'")
                continue
            chosen[group_of] = name
    for v in variants:
        chosen.setdefault(v.group, v.name)
    return tuple(chosen.items())
