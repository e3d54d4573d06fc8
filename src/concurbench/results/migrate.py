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
   Added later in the same way: a claim's identity and cause, `claim_id` (its place in the scenario's
   `expect`), `form` (its sides and operator, parsed) and `cause` (why the verdict is what it is:
   results/model.py's Cause). A claim written without them gets its id from the order its text first
   appears in, its form from its text, and its cause from its verdict and the words its reason starts
   with. This module is the one place that reads a reason's words: the wording of runs already written,
   which no longer changes. Added later, optional, with nothing to migrate: a server's
   `settings_in_effect` (its settings that were not its defaults); a run written before it reads as
   None, "not recorded", never as "all defaults".

The rule: every version ever written keeps a step to the next one here, so that `load_run` reads
any of them; a version newer than FORMAT_VERSION is refused, naming both versions.
"""

from __future__ import annotations

from ..scenario.claims import claim_form, parse_claim
from .model import FORMAT_VERSION, Cause, Verdict


def migrate(manifest: dict, summary: dict, version: int) -> tuple[dict, dict]:
    """The manifest and summary of format `version`, as FORMAT_VERSION writes them."""
    while version < FORMAT_VERSION:
        manifest, summary = STEPS[version](manifest, summary)
        version += 1
    return manifest, _with_identity(_with_left_out(summary))


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


# A version-2 reason's first words, and the cause they meant (the wording runs were written with).
CAUSE_WORDS = (("not evaluated in quick runs", Cause.QUICK), ("not evaluated: the claim is about", Cause.OTHER_SERVER),
               ("not evaluated: left out with --variant", Cause.NOT_CHOSEN),
               ("not evaluated in shard", Cause.IN_A_SHARD), ("not evaluated: no value for metric", Cause.NO_FIGURE),
               ("not evaluated", Cause.NOT_RUN), ("too few observations", Cause.THIN),
               ("both sides are zero", Cause.NEVER_SEEN), ("no uncertainty", Cause.NO_UNCERTAINTY))


def _with_identity(summary: dict) -> dict:
    """Claims stored without their id, form and cause, with them as their text and reason say."""
    claims = summary.get("claims")
    if not isinstance(claims, list) or all(not isinstance(c, dict) or "cause" in c for c in claims):
        return summary
    ids: dict[str, int] = {}
    out = []
    for c in claims:
        if isinstance(c, dict) and isinstance(c.get("claim"), str):
            text = c["claim"]
            try:
                form = claim_form(parse_claim(text).form)
            except ValueError:
                form = None
            c = {**c, "claim_id": ids.setdefault(text, len(ids)), "form": form, "cause": _cause(c).value}
        out.append(c)
    return {**summary, "claims": out}


def _cause(claim: dict) -> Cause:
    reason = claim.get("reason") if isinstance(claim.get("reason"), str) else ""
    if claim.get("left_out") is True and not reason.startswith(LEFT_OUT_REASONS):
        return Cause.QUICK
    if claim.get("verdict") in (Verdict.PASS, Verdict.FAIL):
        return Cause.EXACT if "exactly" in reason or "exactly 0 on the other" in reason else Cause.TESTED
    if " ran " in reason.split(":")[0] and "a verdict needs" in reason:
        return Cause.FEW_RUNS
    return next((cause for words, cause in CAUSE_WORDS if reason.startswith(words)), Cause.TESTED)


STEPS = {1: _v1_to_v2}
