"""The store's claims keyed by key: version 2 named a claim's series by the claim's text, version 3 by its key.

A step of the migration from schema 2 to 3, in Python because it parses each stored claim text (the
scenario's own parser) to learn its form and key (its form written one way: a store of version 2 knows
no `id:`). The series of texts of one form on one server are joined into the series of their key, with
the form beside it; a run's point kept twice (two texts of one form in one run) keeps the first series'.
Findings on a claim's series follow its new name. A text that does not parse keeps its series as it is,
without a form (its figure is then of unknown direction, as it was).
"""

from __future__ import annotations

import json

from ..scenario.claims import claim_form, parse_claim
from .records import CLAIMS


def key_claims(execute) -> int:
    """Key the claims' series of a store being migrated by their keys; `execute(sql, params)` runs a statement
    in the migration's transaction (SQLite's placeholders). Returns how many series were joined into another."""
    rows = execute("SELECT id, scenario, pool, clients, point, server, metric FROM history_series "
                   "WHERE variant = ? ORDER BY id", (CLAIMS,)).fetchall()
    groups: dict[tuple, list[tuple[int, str]]] = {}
    forms: dict[tuple, str] = {}
    for sid, scenario, pool, clients, point, server, text in rows:
        try:
            form = parse_claim(text).form
        except ValueError:
            continue
        where = (scenario, pool, clients, point, server, form.text)
        groups.setdefault(where, []).append((int(sid), text))
        forms[where] = json.dumps(claim_form(form), sort_keys=True)
    joined = 0
    for where, series in groups.items():
        key = where[-1]
        keep = next((sid for sid, text in series if text == key), series[0][0])
        for sid, text in series:
            if sid == keep:
                continue
            execute("UPDATE history_points SET series = ? WHERE series = ? AND run NOT IN "
                    "(SELECT run FROM history_points WHERE series = ?)", (keep, sid, keep))
            execute("DELETE FROM history_points WHERE series = ?", (sid,))
            execute("DELETE FROM history_series WHERE id = ?", (sid,))
            joined += 1
        execute("UPDATE history_series SET metric = ?, form = ? WHERE id = ?", (key, forms[where], keep))
        for _, text in series:
            if text != key:
                execute("UPDATE history_findings SET metric = ? WHERE scenario = ? AND variant = ? AND metric = ?",
                        (key, where[0], CLAIMS, text))
    return joined
