"""Runs over time: what a run directory leaves in the history store (records.py), the store itself
(store.py, schema.py: SQLite or PostgreSQL), the change-point detector (detect.py) and its simulated
series (simulate.py), the store's series with their grouped changes (analysis.py), and what `history
show` and `history check` print (render.py, charts.py, gate.py). docs/history.md has the method."""
