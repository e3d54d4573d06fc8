"""Run directories written in older formats, brought to the current one before the model reads them.

The format version is written in both manifest.json and summary.json. Versions so far:

1. concurbench 0.1 until the typed model: the manifest repeats the first server as `server` beside
   `servers`; each result carries a `clients` map (pool -> clients); a claim is `passed` (true,
   false, or null when not evaluated) with bare numbers `left` and `right` and an `error` text.
2. the typed model (results/model.py): no `server` copy and no `clients` map (both follow from
   `servers` and the pools); a claim is `verdict` (pass, fail, inconclusive, not evaluated) with
   `left` and `right` as estimates (value, low, high, n, method) and a `reason`; a variant run or a
   pool may carry `unavailable: {metric: reason}`. Added later, optional, so an older reader still
   reads the runs (the version did not change): a claim's `level` and `interval`, and its `left_out`
   (true for a claim not evaluated on purpose). A claim without `left_out` was written before it
   existed, when a check told such a claim by the start of its reason; `migrate` sets it that way.

The rule: every version ever written keeps a step to the next one here, so that `load_run` reads
any of them; a version newer than FORMAT_VERSION is refused, naming both versions.
"""

from __future__ import annotations

from .model import FORMAT_VERSION, Verdict


def migrate(manifest: dict, summary: dict, version: int) -> tuple[dict, dict]:
    """The manifest and summary of format `version`, as FORMAT_VERSION writes them."""
    while version < FORMAT_VERSION:
        manifest, summary = STEPS[version](manifest, summary)
        version += 1
    return manifest, _with_left_out(summary)


# The reasons a claim left out on purpose was given before `left_out` was stored: of quick runs (`skip_quick`),
# on a server the claim is not about, on variants not chosen with --variant. Kept as written then.
LEFT_OUT_REASONS = ("not evaluated in quick runs", "not evaluated: the claim is about",
                    "not evaluated: left out with --variant")


def _with_left_out(summary: dict) -> dict:
    """Claims stored without `left_out`, with it as their reason says."""
    claims = summary.get("claims")
    if not isinstance(claims, list) or all(not isinstance(c, dict) or "left_out" in c for c in claims):
        return summary
    return {**summary, "claims": [{**c, "left_out": _left_out(c)} if isinstance(c, dict) and "left_out" not in c
                                  else c for c in claims]}


def _left_out(claim: dict) -> bool:
    reason = claim.get("reason")
    return (claim.get("verdict") == Verdict.NOT_EVALUATED and isinstance(reason, str)
            and reason.startswith(LEFT_OUT_REASONS))


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
    verdict = Verdict.PASS if passed is True else Verdict.FAIL if passed is False else Verdict.NOT_EVALUATED
    return {"claim": claim.get("claim", ""), "description": claim.get("description") or "",
            "server": claim.get("server"), "verdict": verdict.value,
            "left": None if claim.get("left") is None else {"value": claim["left"]},
            "right": None if claim.get("right") is None else {"value": claim["right"]},
            "reason": claim.get("error") or ""}


STEPS = {1: _v1_to_v2}
