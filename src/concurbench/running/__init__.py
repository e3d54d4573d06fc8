"""Running a scenario: the scenario file loaded against the registries (load.py), the plan and its
clock, the resource guards, the runner from provisioning to cleanup with its unmeasured warm-up pass,
the record of runs in progress, and the merge of a run's shards."""
