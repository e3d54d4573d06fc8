"""Each pool's clients dealt over the load hosts: smooth weighted round-robin, one session at a time, the
rotation carried from one pool to the next (so pools of one client land on different hosts). With equal
weights it is plain round-robin; with weights each host's share of every pool is within one session of its
weight's share. A session keeps its index in its pool, so its parameters and its place in a rate-driven
pool's arrivals are those it would have on one machine."""

from __future__ import annotations

from ..scenario.model import Pool


def deal(pools: list[Pool], weights: dict[str, float]) -> dict[str, dict[str, tuple[int, ...]]]:
    """host -> pool -> the session indexes it runs, for hosts in `weights` order (weights > 0); hosts given
    no session are left out."""
    if not weights or any(w <= 0 for w in weights.values()):
        raise ValueError("every host needs a weight above 0")
    total = sum(weights.values())
    credit = dict.fromkeys(weights, 0.0)
    out: dict[str, dict[str, list[int]]] = {}
    for pool in pools:
        for index in range(pool.clients or 0):
            for host, weight in weights.items():
                credit[host] += weight
            chosen = max(credit, key=lambda h: credit[h])  # the first of equals: insertion order
            credit[chosen] -= total
            out.setdefault(chosen, {}).setdefault(pool.name, []).append(index)
    return {host: {name: tuple(indexes) for name, indexes in shares.items()}
            for host in weights if (shares := out.get(host))}
