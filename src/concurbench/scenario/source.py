"""`source:`, the article a scenario follows, and the figures it published, each tied to a variant and
shown beside what a run measures."""

from __future__ import annotations

from ..util import suggest
from .model import Published, Source
from .yamlpos import Checker, describe, join

SOURCE_KEYS = ["title", "url", "author", "engine", "hardware", "published"]
PUBLISHED_KEYS = ["variant", "metric", "value", "unit", "clients", "pool", "note", "server"]


def read_source(check: Checker, doc, variants) -> Source:
    node = check.mapping(doc, "source", "source")
    if node is None:
        return Source()
    check.known_keys(node, "source", SOURCE_KEYS)
    published = []
    names = [v.name for v in variants]
    for _i, item, sub in check.mappings(node, "published", "source.published", what="figures"):
        check.known_keys(item, sub, PUBLISHED_KEYS, required=("variant", "metric", "value"))
        variant = check.string(item, "variant", sub, default="") or ""
        if variant and variant not in names:
            check.add(item, "variant", join(sub, "variant"), f"no variant named '{variant}'{suggest(variant, names)}")
        raw = item.get("value")
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            check.add(item, "value", join(sub, "value"), f"must be a number, got {describe(raw)}")
            raw = 0.0
        published.append(Published(
            variant=variant, metric=check.string(item, "metric", sub, default="") or "", value=float(raw),
            unit=check.string(item, "unit", sub, default="") or "",
            clients=check.integer(item, "clients", sub, minimum=1, default=None),
            pool=check.string(item, "pool", sub, default=None),
            note=check.string(item, "note", sub, default="") or "",
            server=str(item["server"]) if item.get("server") is not None else None))

    def text(key: str) -> str:
        return check.string(node, key, "source", default="") or ""

    return Source(title=text("title"), url=text("url"), author=text("author"), engine=text("engine"),
                  hardware=text("hardware"), published=tuple(published))
