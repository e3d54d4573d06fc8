"""Background sessions of a variant (a scenario's `background:` list): a held transaction, a log drain,
and SQL Server's observers (an Extended Events session, a SQL Trace). Each starts before the load,
ends after it, and says what it did in `describe()`. `kinds.make_background` makes one by its kind.

The package imports nothing itself: the log drain's own process (drain_process.py) stays light."""
