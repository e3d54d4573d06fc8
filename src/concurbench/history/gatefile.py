"""What `history check` gates: the metric catalogue's headline figures by default, or what a gate file says.

    # gate.yaml: concurbench history check --gate gate.yaml
    alpha: 0.01            # the night's false-red rate over the gated series (default 0.01)
    headline: true         # gate the catalogue's headline figures (default true)
    metrics:               # a metric name or glob -> how it is gated (first match wins)
      tps: {min_change: 5%}
      latency.p99_ms: {min_change: 15%}
      wal.bytes_per_txn: {direction: lower}           # a diagnostic figure, gated because it is named
      "statements.*.mean_ms": {min_change: 10%, alpha: 0.001}
      "waits.*": {direction: neutral}                 # never gated

A named metric is gated whatever its kind, in the direction given or the catalogue's; `neutral` shows
it and never gates it. `min_change` is the smallest move that fails the gate, in percent as on the
command line (`5` and `5%` are both five percent; default: the detector's, 2%). `alpha` makes the metric's series a family of their own, corrected
at that level: the night's false-red rate is then at most the sum of the families' alphas. The file is
checked before the store is read for the gate: an unknown key, metric or direction is a problem
named by file, line and field (scenario/yamlpos.py's checker), and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from ..figures import Better, Figure, Kind
from ..scenario.yamlpos import Checker, describe, join, load_yaml
from ..util import suggest

DEFAULT_ALPHA = 0.01  # the night's false-red rate: at most one night in 100 red without cause
MIN_BEFORE = 5  # a change becomes a finding only from a level of this many runs (a baseline, not a start)
MIN_AFTER = 3  # ... and with this many runs after it (two extreme runs in a row are not yet a regression)
TOP_KEYS = ("alpha", "headline", "metrics")
RULE_KEYS = ("direction", "min_change", "alpha")
DIRECTIONS = tuple(b.value for b in Better)


@dataclass(frozen=True)
class Rule:
    """How the metrics matching `pattern` are gated (None: as the catalogue and the defaults say)."""

    pattern: str
    direction: Better | None = None
    min_change: float | None = None
    alpha: float | None = None

    def matches(self, metric: str) -> bool:
        return metric == self.pattern or fnmatchcase(metric, self.pattern)


@dataclass(frozen=True)
class Gated:
    """How one series is gated."""

    better: Better
    min_change: float
    family: str  # the series correct together: "" for the night's, else the pattern of the rule with an alpha
    alpha: float


@dataclass(frozen=True)
class GateSpec:
    """The gate: the night's alpha, whether headline figures are gated by default, and the rules."""

    alpha: float = DEFAULT_ALPHA
    headline: bool = True
    rules: tuple[Rule, ...] = ()
    source: str = "the metric catalogue's headline figures"

    def gated(self, figure: Figure, metric: str, min_change: float) -> Gated | None:
        """How a series of this metric is gated, or None when it is not."""
        rule = next((r for r in self.rules if r.matches(metric)), None)
        if rule is None:
            if not self.headline or figure.kind is not Kind.HEADLINE or figure.better is Better.NEUTRAL:
                return None
            return Gated(figure.better, min_change, "", self.alpha)
        better = rule.direction or figure.better
        if better is Better.NEUTRAL:
            return None
        change = min_change if rule.min_change is None else rule.min_change
        return Gated(better, change, rule.pattern if rule.alpha is not None else "",
                     self.alpha if rule.alpha is None else rule.alpha)

    def with_rules(self, rules: list[Rule]) -> "GateSpec":
        """The spec with these rules first (the command line's --direction and --metric)."""
        return GateSpec(self.alpha, self.headline, (*rules, *self.rules), self.source)


def load_gate(path: Path, catalogue, metrics: dict[str, Better]) -> GateSpec:
    """A gate file, checked: every problem (with file, line and field) in one ConfigError. `metrics` are the
    store's metric names with their better direction (a claim's from its operator), which a rule may name
    besides the catalogue's."""
    doc = load_yaml(path, "gate file")
    check = Checker(path, "gate file")
    if not isinstance(doc, dict):
        check.add(doc, None, "", f"a gate file is a mapping (alpha, headline, metrics), got {describe(doc)}")
        check.fail()
    check.known_keys(doc, "", TOP_KEYS)
    alpha = _fraction(check, doc, "alpha", "", DEFAULT_ALPHA)
    headline = check.boolean(doc, "headline", "", default=True)
    rules = []
    node = check.mapping(doc, "metrics", "metrics")
    for pattern, spec in (node or {}).items():
        where = join("metrics", pattern)
        if not _known(str(pattern), catalogue, metrics):
            check.add(node, pattern, where, f"no metric of the catalogue or the store is named {pattern!r}"
                      f"{suggest(pattern, [*catalogue.names(), *sorted(metrics)])}", of_key=True)
            continue
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            check.add(node, pattern, where, f"must be a mapping of {', '.join(RULE_KEYS)}, got {describe(spec)}")
            continue
        check.known_keys(spec, where, RULE_KEYS)
        direction = None
        if spec.get("direction") is not None:
            text = str(spec["direction"])
            if text not in DIRECTIONS:
                check.add(spec, "direction", join(where, "direction"),
                          f"must be one of {', '.join(DIRECTIONS)}, got {describe(spec['direction'])}"
                          f"{suggest(text, DIRECTIONS)}")
            else:
                direction = Better(text)
        elif _neutral(str(pattern), catalogue, metrics):
            check.add(node, pattern, where, "has no better direction in the metric catalogue: say which way is "
                      "better (direction: higher or lower)", of_key=True)
        rules.append(Rule(str(pattern), direction, _fraction(check, spec, "min_change", where, None, percent=True),
                          _fraction(check, spec, "alpha", where, None)))
    check.fail()
    return GateSpec(alpha, headline, tuple(rules), str(path))


def _fraction(check: Checker, node: dict, key: str, path: str, default, percent: bool = False):
    """A number between 0 and 1 (alpha), or a move in percent (`5` or `5%`: 0.05), as the fraction it is."""
    if key not in node or node[key] is None:
        return default
    value = node[key]
    text = str(value).strip()
    try:
        number = float(text[:-1] if percent and text.endswith("%") else text)
        number = number / 100 if percent else number
    except ValueError:
        number = None
    if isinstance(value, bool) or number is None or not (0 < number < 1 if not percent else 0 <= number < 10):
        want = "a move in percent, such as 5 or 5% (below 1000)" if percent else "a number between 0 and 1, such as 0.01"
        check.add(node, key, join(path, key), f"must be {want}, got {describe(value)}")
        return default
    return number


def _known(pattern: str, catalogue, metrics: dict[str, Better]) -> bool:
    if any(fnmatchcase(m, pattern) for m in metrics):
        return True
    if not any(ch in pattern for ch in "*?["):
        return catalogue.declares(pattern)
    return any(f.pattern == pattern or fnmatchcase(f.pattern, pattern) for f in catalogue.figures)


def _neutral(pattern: str, catalogue, metrics: dict[str, Better]) -> bool:
    """Every metric the pattern names (in the store, else in the catalogue) has no better direction."""
    named = [b for m, b in metrics.items() if fnmatchcase(m, pattern)] or [
        f.better for f in catalogue.figures if f.pattern == pattern or fnmatchcase(f.pattern, pattern)]
    return bool(named) and all(b is Better.NEUTRAL for b in named)
