"""Run directories written in older formats, brought to the current one before the model reads them.

The format version is written in both manifest.json and summary.json. Versions so far:

1. concurbench 0.1 until the typed model: the manifest repeats the first server as `server` beside
   `servers`; each result carries a `clients` map (pool -> clients); a claim is `passed` (true,
   false, or null when not evaluated) with bare numbers `left` and `right` and an `error` text.
2. the typed model (results/model.py): no `server` copy and no `clients` map (both follow from
   `servers` and the pools); a claim is `verdict` (pass, fail, inconclusive, not evaluated) with
   `left` and `right` as estimates (value, low, high, n, method) and a `reason`; a variant run or a
   pool may carry `unavailable: {metric: reason}`.

The rule: every version ever written keeps a step to the next one here, so that `load_run` reads
any of them; a version newer than FORMAT_VERSION is refused, naming both versions.
"""

from __future__ import annotations

from .model import FORMAT_VERSION


def migrate(manifest: dict, summary: dict, version: int) -> tuple[dict, dict]:
    """The manifest and summary of format `version`, as FORMAT_VERSION writes them."""
    while version < FORMAT_VERSION:
        manifest, summary = STEPS[version](manifest, summary)
        version += 1
    return manifest, summary


def _v1_to_v2(manifest: dict, summary: dict) -> tuple[dict, dict]:
    first = manifest.get("server")
    manifest = {k: v for k, v in manifest.items() if k != "server"}
    if not manifest.get("servers") and isinstance(first, dict) and first:
        manifest["servers"] = [first]
    summary = dict(summary)
    results = summary.get("results")
    if isinstance(results, list):
        summary["results"] = [{k: v for k, v in r.items() if k != "clients"} if isinstance(r, dict) else r
                              for r in results]
    claims = summary.get("claims")
    if isinstance(claims, list):
        summary["claims"] = [_claim_v1(c) if isinstance(c, dict) else c for c in claims]
    return manifest, summary


def _claim_v1(claim: dict) -> dict:
    passed = claim.get("passed")
    return {"claim": claim.get("claim", ""), "description": claim.get("description") or "",
            "server": claim.get("server"),
            "verdict": "pass" if passed is True else "fail" if passed is False else "not evaluated",
            "left": None if claim.get("left") is None else {"value": claim["left"]},
            "right": None if claim.get("right") is None else {"value": claim["right"]},
            "reason": claim.get("error") or ""}


STEPS = {1: _v1_to_v2}
