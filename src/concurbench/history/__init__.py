"""Runs over time: what a run directory leaves in the history store (records.py), the store itself
(store.py, schema.py: SQLite or PostgreSQL), the change-point detector (detect.py, with noise.py and
calibrate.py) and its simulated series (simulate.py), the store's series with their grouped changes
(analysis.py), what `history show` prints (render.py, charts.py), and the CI gate: its findings
(findings.py), what it gates (gatefile.py), the night's check (gate.py), its summary and JUnit report
(gate_report.py) and its simulated nights (nightsim.py). docs/history.md has the method."""
