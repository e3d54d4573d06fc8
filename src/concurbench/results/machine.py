"""How busy the machine was around a run: what others used of its CPUs, and how long our clients waited.

A run shares its machine with the server it measures and with whatever else runs there. Three figures
are kept with the run (the manifest's `machine`):

- `others_cpus`: CPUs in use while the run's own load was idle (a quarter of a second before the
  server starts, and again before each round of `--check`), read from /proc/stat: a neighbour that
  keeps a CPU busy shows as about 1.0, a quiet machine as a few hundredths;
- `load_average`: the machine's 1-minute load average when the run started, kept for the record;
- `cpu_wait`: the largest share of its load loop a variant run's worker processes waited for a CPU
  (workload/cpu_wait.py), and which run that was.

The machine was busy when others used at least OTHERS_LIMIT of a CPU at the pauses. Then the report
says so in one line with the figures (the workers' wait among them), and an inconclusive claim says
that a quieter machine or more runs would likely decide it: on a busy machine runs differ more from
one another, and the runs are the unit; `--check` plans more runs. The load average never makes a
machine busy and is not in that line: it lags by a minute, so a quiet run started a minute after a
run of 90 clients on two cores would read 4.8 (the previous run's load, not a neighbour's).

The workers' wait alone does not make a machine busy: on two cores the server the run measures takes
the CPUs from them as a neighbour would. Measured on a 2-core VM, the variant run whose workers waited
most waited 37-41% of its loop in quiet quick row-lock checks, 78% in a quiet observer-overhead one
(log_statement: the server writing its log) and 63% in temp-table-churn, against 33%, 75-77% and 57%
beside `stress-ng --cpu 1`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

OTHERS_LIMIT = 0.5  # CPUs others used while the run's load was idle


@dataclass(frozen=True)
class MachineLoad:
    """What the machine gave a run: its CPUs, what others used of them, and our clients' wait for one."""

    cpus: int
    load_average: float | None = None  # 1-minute load average when the run started
    others_cpus: list[float] = field(default_factory=list)  # CPUs in use at each pause of the run's load
    cpu_wait: float | None = None  # the largest share of its load loop a variant run's workers waited for a CPU
    waited_in: str | None = None  # that variant run (`variant@point (server)`, round)

    @property
    def others(self) -> float | None:
        """CPUs others used while the run's load was idle: the median of the pauses."""
        return statistics.median(self.others_cpus) if self.others_cpus else None

    @property
    def busy(self) -> bool:
        """Others kept a CPU busy while the run's load paused (the load average, which lags, has no say)."""
        return self.contended

    @property
    def contended(self) -> bool:
        """Others kept a CPU busy while the run paused: measured now, not the load average's last minute."""
        return self.others is not None and self.others >= OTHERS_LIMIT

    def reasons(self) -> list[str]:
        """What made the machine busy, as a phrase with its figure (none on a quiet machine)."""
        if not self.contended:
            return []
        return [f"other processes kept {self.others:.2f} of its {self.cpus} CPUs busy while the run's load paused"]

    def line(self) -> str | None:
        """One line for a busy machine's run (None for a quiet one)."""
        reasons = self.reasons()
        if not reasons:
            return None
        waited = (f"; the load generator's processes waited for a CPU up to {self.cpu_wait:.0%} of their load loop "
                  f"({self.waited_in})") if self.cpu_wait is not None else ""
        return ("Busy machine: " + "; ".join(reasons) + waited + ". Runs differ more from one another on a busy "
                "machine, so claims take more runs to decide")

    def short(self) -> str:
        """The figures in a few words, for an inconclusive claim's reason."""
        return "; ".join(self.reasons())

    def as_dict(self) -> dict:
        return {"cpus": self.cpus, "load_average": self.load_average, "others_cpus": list(self.others_cpus),
                "cpu_wait": self.cpu_wait, "waited_in": self.waited_in}

    @classmethod
    def from_dict(cls, data: dict) -> "MachineLoad":
        others = [float(x) for x in data.get("others_cpus") or []]
        return cls(int(data.get("cpus") or 1), data.get("load_average"), others, data.get("cpu_wait"),
                   data.get("waited_in"))

    def with_waits(self, runs) -> "MachineLoad":
        """The same, with `cpu_wait` from the variant runs' workers (the run whose workers waited most)."""
        worst, where = None, None
        for run in runs:
            pairs = [(w, t) for w, t in zip(run.worker_wait_s, run.worker_wall_s) if w is not None and t]
            if not pairs:
                continue
            share = sum(w for w, _ in pairs) / sum(t for _, t in pairs)
            if worst is None or share > worst:
                worst, where = share, f"{run.label}, round {run.repeat}"
        return replace(self, cpu_wait=None if worst is None else round(worst, 3), waited_in=where)

    def paused(self, others: float) -> "MachineLoad":
        """The same, with one more look at what others use while the run's load pauses."""
        return replace(self, others_cpus=[*self.others_cpus, others])
