"""gc's rules without a server: which containers it may remove (by their owner labels), and which
half-written downloads it removes."""

from __future__ import annotations

import os
import subprocess
import time

from concurbench.housekeeping import gc


def test_container_owner_rules():
    """Which containers gc may remove: those whose recorded owner is gone, or any with --force."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    now = time.time()
    assert "no owner process" in gc._container_owner({}, now, force=False)
    assert gc._container_owner({}, now, force=True) is None
    assert "still going" in gc._container_owner({gc.OWNER_LABEL: str(os.getpid())}, now, force=False)
    assert gc._container_owner({gc.OWNER_LABEL: str(ended.pid)}, now, force=False) is None
    assert "started on" in gc._container_owner({gc.OWNER_LABEL: str(ended.pid), gc.HOST_LABEL: "elsewhere"},
                                               now, force=False)


def test_stale_staging_folders_go_and_fresh_ones_stay(tmp_path):
    """Half-written downloads older than an hour belong to no live run; a fresh one may be in use."""
    home = tmp_path
    old = home / "installs" / ".download-dead"
    fresh = home / "installs" / ".download-busy"
    kept = home / "installs" / "binaries-16.15.0"
    for path in (old, fresh, kept):
        path.mkdir(parents=True)
    os.utime(old, (time.time() - 2 * gc.STALE_STAGING_S,) * 2)
    os.utime(kept, (time.time() - 2 * gc.STALE_STAGING_S,) * 2)
    actions = gc.collect(home=home, dry_run=True, containers=False)
    assert [(a.kind, a.name, a.outcome) for a in actions] == [("staging", ".download-dead", "would remove")]
    assert old.exists()
    actions = gc.collect(home=home, containers=False)
    assert [(a.name, a.outcome) for a in actions] == [(".download-dead", "removed")]
    assert not old.exists() and fresh.exists() and kept.exists()
