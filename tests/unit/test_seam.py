"""The seam between Python and the compiled loop (workload/seam.py, _fastloop.c): both sides declare every
struct alike (size, each field's offset and size), each refuses a struct stamped for another INTERFACE or
version, bind() refuses a build whose structs or protocols differ, and a session goes in as a SessionSpec and
comes back as a SessionSync. The compiled half skips with the reason where the extension cannot run, and
fails instead under CI=true; no server is needed (the sessions run here have nothing to send)."""

from __future__ import annotations

from array import array

import pytest
from needs import missing, need_compiled

from concurbench.engines import postgres as pg
from concurbench.errors import RunError
from concurbench.scenario.model import Pool, Statement
from concurbench.workload import fastloop, seam, session
from concurbench.workload.fastloop import Plan
from concurbench.workload.seam import ENV, LAYOUTS, PACE_HEAD, SESSION, SYNC
from concurbench.workload.session import Session

FAR = 1 << 62


def compiled():
    need_compiled()
    return fastloop._fastloop


def test_every_struct_has_the_same_size_and_field_offsets_on_both_sides():
    """Fails (not skips) on a build that differs: that is what it checks; skips only where none is built."""
    if seam.extension is None:
        missing(f"the compiled loop is not built here ({seam.WHY})")
    ext = seam.extension
    assert set(ext.LAYOUTS) == {layout.name for layout in LAYOUTS} == {
        "PaceHead", "PaceSeg", "SessionSpec", "SessionSync", "LoopEnv"}
    for layout in LAYOUTS:
        version, size, members = ext.LAYOUTS[layout.name]
        assert (version, size) == (layout.version, layout.size), layout.name
        assert [name for name, _offset, _size in members] == list(layout.names), layout.name
        assert tuple(members) == layout.describe()[2], layout.name  # every offset and size
        assert sum(width for _name, _offset, width in members) == size  # no padding on either side
    assert seam.differences(ext.LAYOUTS) == []
    assert ext.PROTOCOLS == pg.PROTOCOLS  # the C's numbering of the one PROTOCOLS
    assert seam.INTERFACE == ext.INTERFACE > 0  # read from the module, stamped in every head
    assert fastloop.foreign(ext) == ""


def test_a_moved_field_or_another_version_is_found():
    """The comparison can fail: one offset moved, one version raised, one struct missing."""
    theirs = seam.describe()
    version, size, members = theirs["SessionSpec"]
    moved = ((members[3][0], members[3][1] + 4, members[3][2]),)
    changed = {**theirs, "SessionSpec": (version, size, members[:3] + moved + members[4:])}
    assert seam.differences(changed) == [f"its SessionSpec is {size} bytes (" + ", ".join(
        f"{n}@{o}" for n, o, _ in changed["SessionSpec"][2]) + f"), this side's {size} (" + ", ".join(
        f"{n}@{o}" for n, o, _ in members) + ")"]
    assert seam.differences({**theirs, "LoopEnv": (ENV.version + 1, *theirs["LoopEnv"][1:])}) == [
        f"its LoopEnv is layout {ENV.version + 1}, this side's {ENV.version}"]
    assert seam.differences({k: v for k, v in theirs.items() if k != "SessionSync"}) == ["it has no SessionSync"]
    assert seam.differences(None) == ["it describes no structs (built before they were named)"]


def _stand_in(**changes):
    """A stand-in for a build of other sources: the real module's attributes, some of them changed."""
    real = fastloop._fastloop
    attrs = {"bind": staticmethod(real.bind), "INTERFACE": real.INTERFACE, "LAYOUTS": dict(real.LAYOUTS),
             "PROTOCOLS": real.PROTOCOLS, **changes}
    return type("Build", (), {k: v for k, v in attrs.items() if v is not None})


@pytest.mark.parametrize("changes, says", [
    ({"INTERFACE": None}, "it has no INTERFACE: built before it"),
    ({"INTERFACE": "next"}, "it is interface {next}, the structs here are stamped for {now}"),
    ({"LAYOUTS": "older"}, "its SessionSync is layout 0, this side's 1"),
    ({"PROTOCOLS": ("prepared", "simple", "extended")}, "its protocols are prepared, simple, extended, the engine's "
                                                        "prepared, extended, simple"),
])
def test_bind_refuses_a_build_whose_interface_structs_or_protocols_differ(monkeypatch, changes, says):
    """Stand-ins for stale builds (an editable install whose Python moved on while its .so did not)."""
    ext = compiled()
    if changes.get("INTERFACE") == "next":
        changes["INTERFACE"] = ext.INTERFACE + 1
    if changes.get("LAYOUTS") == "older":
        changes["LAYOUTS"] = {**ext.LAYOUTS, "SessionSync": (0, *ext.LAYOUTS["SessionSync"][1:])}
    monkeypatch.setattr(fastloop, "_fastloop", _stand_in(**changes))
    monkeypatch.setattr(fastloop, "_bound", [])
    why = fastloop.unavailable("postgres")
    assert "built from other sources" in why and says.format(next=ext.INTERFACE + 1, now=ext.INTERFACE) in why
    assert fastloop.resolve("auto", "postgres") == "python"
    with pytest.raises(RunError, match="rebuild it with `pip install -e .`"):
        fastloop.resolve("compiled", "postgres")


def test_structs_are_packed_and_read_by_name():
    data = ENV.pack(running=1, rolling_back=2, thinking=3, done=4, slot_done=9, wait=0)
    assert ENV.read(data) == {"interface": seam.INTERFACE, "layout": ENV.version, "running": 1, "rolling_back": 2,
                              "thinking": 3, "done": 4, "slot_done": 9, "wait": 0}
    with pytest.raises(TypeError, match="LoopEnv: missing wait; no field wiat"):
        ENV.pack(running=1, rolling_back=2, thinking=3, done=4, slot_done=9, wiat=0)
    with pytest.raises(ValueError, match=f"a LoopEnv packed for interface {seam.INTERFACE + 1}; the extension here"):
        ENV.read(ENV.pack(interface=seam.INTERFACE + 1, running=1, rolling_back=2, thinking=3, done=4, slot_done=9,
                          wait=0))
    with pytest.raises(ValueError, match=f"a LoopEnv of layout {ENV.version + 1}; this side reads layout"):
        ENV.read(ENV.pack(layout=ENV.version + 1, running=1, rolling_back=2, thinking=3, done=4, slot_done=9, wait=0))
    with pytest.raises(ValueError, match=f"a LoopEnv of {ENV.size + 1} bytes; this side reads {ENV.size}"):
        ENV.read(data + b"\0")


class Glue:
    """A stand-in for fastloop._Glue over a session with nothing to send (its count is 0): the loop starts it,
    finds it done, and hands it back, without libpq or a server."""

    def __init__(self, **spec):
        self.plans = (Plan(b"s0", b"SELECT 1", (), None), Plan(b"s1", b"SELECT 2", (), None))
        self.pace = self.draws = None
        fields = dict(conn=0, fd=-1, slot=0, protocol=0, n_params=0, n_statements=2, max_tries=1, index=0, paced=0,
                      think=0, transactions=0, latency_limit=0)
        self.spec = SESSION.pack(**{**fields, **spec})
        self.done_with = self.synced = None

    def done(self, counted, finished):
        self.done_with = (counted, finished)

    def sync(self, data, failure):
        self.synced = (bytes(data), failure)


def run_loop(glues, **env):
    fastloop.bind()
    window = array("q", [0, 0, FAR])
    status, finished, counters = bytearray(len(glues)), array("q", [0] * len(glues)), array("q", [0] * len(glues))
    fields = dict(running=session.RUNNING, rolling_back=session.ROLLING_BACK, thinking=session.THINKING,
                  done=session.DONE, slot_done=7, wait=fastloop.WAITS.index(fastloop._fastloop.waits()[0]))
    fastloop._fastloop.run(glues, window, status, finished, counters, ENV.pack(**{**fields, **env}), fastloop.FAILURES)
    return status


def test_the_loop_reads_a_session_spec_and_hands_back_a_session_sync():
    compiled()
    glue = Glue()
    status = run_loop([glue])
    assert status[0] == 7 and glue.done_with == (0, 0)  # the env's slot status, the session's count
    data, failure = glue.synced
    got = SYNC.read(data, exact=False)
    assert got["state"] == session.DONE and got["connected"] == 0 and got["n_statements"] == 2
    assert (got["counted"], got["finished"], got["retries"]) == (0, 0, 0)
    assert data[SYNC.size:] == b"\0\0" and failure is None  # nothing prepared, no failure


@pytest.mark.parametrize("where", ["spec", "env", "schedule"])
def test_the_c_side_refuses_a_struct_for_another_interface_or_version(where):
    compiled()
    other = seam.INTERFACE + 1
    if where == "spec":
        with pytest.raises(ValueError, match=f"a SessionSpec packed for interface {other}; this build is interface "
                                             f"{seam.INTERFACE}"):
            run_loop([Glue(interface=other)])
        with pytest.raises(ValueError, match=f"a SessionSpec of layout {SESSION.version + 1}; this build reads"):
            run_loop([Glue(layout=SESSION.version + 1)])
        with pytest.raises(ValueError, match="protocol, n_params or n_statements is out of range"):
            run_loop([Glue(protocol=len(pg.PROTOCOLS))])
    elif where == "env":
        with pytest.raises(ValueError, match=f"a LoopEnv packed for interface {other}"):
            run_loop([Glue()], interface=other)
        with pytest.raises(ValueError, match=f"a LoopEnv of layout {ENV.version + 1}"):
            run_loop([Glue()], layout=ENV.version + 1)
    else:
        head = PACE_HEAD.pack(interface=other, n_segs=1, fixed=1, limit=0, measure_from=0, seed=1)
        with pytest.raises(ValueError, match=f"a PaceHead packed for interface {other}"):
            fastloop._fastloop.arrivals(head + bytes(32), [])
        with pytest.raises(ValueError, match=f"a PaceHead of {PACE_HEAD.size - 1} bytes"):
            fastloop._fastloop.arrivals(head[:-1], [])


def test_a_glue_leaves_its_session_as_the_sync_says():
    """The Python half of the hand-back, with a stand-in session (no connection)."""
    s = Session("", Pool("p", 1, (Statement("one", "SELECT 1"), Statement("two", "SELECT 2"))), 0, 1, [0], 0)
    glue = object.__new__(fastloop._Glue)
    glue.session = s
    data = SYNC.pack(state=session.THINKING, step=1, attempt=2, retries=3, connected=1, n_statements=2, counted=40,
                     finished=41, t0=5, s0=6, wake_at=7) + b"\1\0"
    glue.sync(data, ("deadlock", "40P01"))
    assert (s.state, s.step, s.attempt, s.retries, s.counted, s.finished, s.t0, s.s0, s.wake_at) == (
        session.THINKING, 1, 2, 3, 40, 41, 5, 6, 7)
    assert s.failure == ("deadlock", "40P01")
    with pytest.raises(ValueError, match="1 statements' flags, not 2"):
        glue.sync(data[:-1], None)
