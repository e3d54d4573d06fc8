"""Load from many hosts: a coordinator and load hosts on Dask's distributed engine (the optional extra
`concurbench[cluster]`). engine.py (whether the engine is installed; its scheduler and worker commands),
local.py (`cluster start --local N`), hosts.py (the hosts of a cluster, their versions and clock offsets),
deal.py (each pool's clients dealt over the hosts), share.py (what a host runs: its share of a variant
run's load, started at the common time), load.py (the coordinator's side of a variant run's load),
breakdown.py (the per-host figures and the merge)."""
