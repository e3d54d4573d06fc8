"""What else changed at a finding's first run, from what each run keeps in the store: the machine (its CPU
model and CPUs, what others used of them while the run's load paused), the server settings in effect,
concurbench's version and the scenario file. A regression that came with a new machine, a setting
someone changed on the server or a busy neighbour says so beside its figures."""

from __future__ import annotations

from .records import RunRecord

MOST_SETTINGS = 5  # settings named in one line at most


def changed(before: RunRecord, after: RunRecord, before_server: str, after_server: str) -> list[str]:
    """What differs between the last run before a change and the first after it, as short phrases."""
    out = explaining(before, after, before_server, after_server, release=False)  # the cause's line names a release
    m0, m1 = before.machine or {}, after.machine or {}
    if m0.get("busy") != m1.get("busy") and (m0 or m1):
        out.append(f"others' CPUs at the pauses {_others(m0)} -> {_others(m1)} of {m1.get('cpus') or '?'}")
    return out


def explaining(before: RunRecord, after: RunRecord, before_server: str, after_server: str,
               release: bool = True) -> list[str]:
    """What changed that can explain a step by itself: the machine, the server's release or settings,
    concurbench, the scenario file or its parameters (not how busy the machine was: its runs are on lines of
    their own)."""
    out = []
    m0, m1 = before.machine or {}, after.machine or {}
    was, now = _machine(m0), _machine(m1)
    if was and now and was != now:
        out.append(f"machine {was} -> {now}")
    if release and before_server != after_server:
        out.append(f"server {before_server} -> {after_server}")
    if before.parameters != after.parameters:
        names = sorted(set(before.parameters) | set(after.parameters))
        out.append("parameters " + ", ".join(f"{n} {before.parameters.get(n, '(none)')} -> "
                                             f"{after.parameters.get(n, '(none)')}" for n in names
                                             if before.parameters.get(n) != after.parameters.get(n)))
    settings = _settings(before.settings.get(before_server, {}), after.settings.get(after_server, {}))
    if settings:
        out.append("settings " + settings)
    if before.harness and after.harness and before.harness != after.harness:
        out.append(f"concurbench {before.harness} -> {after.harness}")
    if before.scenario_sha256 != after.scenario_sha256:
        out.append("scenario file changed")
    return out


def machine_line(record: RunRecord) -> str | None:
    """A run made on a busy machine, in a few words (None for a quiet one or one not measured)."""
    m = record.machine or {}
    if not m.get("busy"):
        return None
    return f"{record.run_id}: others kept {_others(m)} of its {m.get('cpus') or '?'} CPUs busy while its load paused"


def _machine(m: dict) -> str:
    model, cpus = m.get("cpu_model") or "", m.get("cpus")
    if not model and not cpus:
        return ""
    return f"{model or 'unknown CPU'} x{cpus or '?'}"


def _others(m: dict) -> str:
    value = m.get("others")
    return "?" if value is None else f"{value:.2f}"


def _settings(old: dict, new: dict) -> str:
    if not old or not new:  # a run that recorded none says nothing of what changed
        return ""
    names = sorted(set(old) | set(new))
    moved = [f"{n} {old.get(n, '(default)')} -> {new.get(n, '(default)')}" for n in names if old.get(n) != new.get(n)]
    if len(moved) > MOST_SETTINGS:
        return ", ".join(moved[:MOST_SETTINGS]) + f" and {len(moved) - MOST_SETTINGS} more"
    return ", ".join(moved)
