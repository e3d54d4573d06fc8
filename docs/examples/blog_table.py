"""Rebuild a blog table from a stored run directory with `concurbench.load`.

One Markdown table per group of variants: each measured pool's throughput and p95 latency (means
over the repeats of a `--repeat N` run), and its throughput against the group's baseline variant.

    python3 docs/examples/blog_table.py results/20261122T034512Z-row-lock-vs-advisory > table.md
"""

from __future__ import annotations

import sys

import concurbench

METRICS = {"tps": "TPS", "latency.p95_ms": "p95 ms"}
KEYS = ["group", "variant", "point", "server", "pool", "clients"]


def blog_table(run_dir: str) -> str:
    run = concurbench.load(run_dir)
    frame = run.frame()
    frame = frame[frame.measured & frame.metric.isin(list(METRICS))]
    # one row per variant run and pool, one column per metric: the mean over the repeats
    wide = (frame.groupby(KEYS + ["metric"], sort=False, dropna=False)["value"].mean()
            .unstack("metric").reindex(columns=list(METRICS)).reset_index())
    several_servers = wide["server"].nunique() > 1
    out = [f"## {run.scenario.title or run.scenario.name}", ""]
    for group, rows in wide.groupby("group", sort=False):
        baseline = run.scenario.baselines.get(group)
        base = rows.loc[rows.variant == baseline, ["point", "server", "pool", "tps"]]
        rows = rows.merge(base.rename(columns={"tps": "base"}), on=["point", "server", "pool"], how="left")
        head = (["Server"] if several_servers else []) + ["Variant", "Clients", *METRICS.values()]
        head += [f"vs {baseline}"] if baseline else []
        out += [f"### {group}", "", "| " + " | ".join(head) + " |",
                "|" + "---|" * (len(head) - len(METRICS) - bool(baseline)) + "---:|" * (len(METRICS) + bool(baseline))]
        for row in rows.to_dict("records"):
            cells = ([str(row["server"])] if several_servers else []) + [row["variant"], f"{row['clients']:,}"]
            cells += [number(row[metric]) for metric in METRICS]
            if baseline:
                cells.append("base" if row["variant"] == baseline else ratio(row["tps"], row["base"]))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def number(value) -> str:
    if value != value:  # NaN: no figure
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def ratio(value, base) -> str:
    return f"{value / base:.2f}×" if value == value and base == base and base else "–"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: blog_table.py RUN_DIR")
    print(blog_table(sys.argv[1]))
