"""An idle database with `floe run` attached, for five minutes, while another
database on the same server writes a lot of WAL: floe's slot keeps only a little of
it (the heartbeat and the confirmed decode position keep the slot advancing). The
watch runs beside the other tests (idlewatch.py; conftest.py starts it after
collection and runs this file last), so the five minutes mostly overlap them. Under
pytest-xdist this test starts the watch itself, first on its worker, and the other
workers run the rest meanwhile."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import idlewatch


def test_an_idle_source_keeps_retained_wal_small_for_five_minutes(floe_bin):
    watch = idlewatch.current()
    if watch is None and "PYTEST_XDIST_WORKER" in os.environ:
        watch = idlewatch.start(floe_bin, Path(tempfile.mkdtemp(prefix="floe-idle-watch-")))
    assert watch is not None, "conftest.py did not start the idle watch"
    watch.finish()
    if watch.error is not None:
        raise watch.error
    assert watch.floe_died is None, f"floe run stopped during the watch:\n{watch.floe_died}"
    assert watch.elapsed() >= idlewatch.WATCH_SECONDS
    # one sample a second for five minutes (give or take a slow query)
    assert len(watch.samples) >= idlewatch.WATCH_SECONDS // 2, len(watch.samples)
    worst = max(watch.samples)
    # the other database wrote several times the bound; floe's slot kept a little
    assert watch.written > 3 * (64 << 20), (watch.written, worst)
    assert worst < 64 << 20, (worst, watch.written)
