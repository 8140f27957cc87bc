"""The crash windows of `floe run`'s checkpoint, reached on purpose rather than by a
lucky random kill (docs/testing.md, cases 1, 2, 10 and 11). FLOE_FAILPOINT
(src/floe/common/failpoint.h) makes floe SIGKILL itself, or pause, at a named place:

* checkpoint.before-commit: the checkpoint's Parquet files are written, nothing is
  committed;
* checkpoint.after-table-commit: one table committed, the others perhaps not yet;
* checkpoint.before-record: every table committed, the position not recorded;
* checkpoint.before-confirm: recorded, not yet sent to the server.

The workload and the oracle are the crash test's (test_run_crash.py): every change
is also written by an audit trigger, and Bronze must equal it exactly."""

from __future__ import annotations

import threading
import time

from floerun import floe  # noqa: F401
from test_run_crash import INITIAL, SETUP, Workload, check_against_audit

POINTS = ["checkpoint.before-commit", "checkpoint.after-table-commit",
          "checkpoint.before-record", "checkpoint.before-confirm"]


def start_copied(floe, pg):
    pg.execute(SETUP)
    run = floe(tables=["public.accounts", "public.lines", "public.docs"],
               interval="300ms")
    run.start()
    for tbl, n in INITIAL.items():
        run.wait_until(lambda: run.count(f"public.{tbl}") >= n, 90,
                       what=f"the initial snapshot of {tbl} ({n} rows)")
    run.wait_streaming()
    return run


def test_a_kill_at_each_checkpoint_window_loses_nothing_and_repeats_nothing(
        floe, pg, duckdb_con):
    """Each failpoint fires twice (at its 2nd and 5th hit of a start) under the
    mixed workload; floe dies there (SIGKILL, exit -9, the failpoint's log line) and
    is started again. Bronze must equal the audit trail exactly: a kill after the
    data files and before the commit (case 1), after the commit and before the
    standby status update (case 2), with one table committed and another not
    (case 10)."""
    run = start_copied(floe, pg)
    workload = Workload(pg.dsn, seed=11)
    workload.start()
    fired = 0
    try:
        for point in POINTS:
            for hit in (2, 5):
                run.kill()
                run.start(env={"FLOE_FAILPOINT": f"{point}@{hit}"})
                rc = run.wait_exit(120)
                assert rc == -9, f"floe exited {rc}, not by its failpoint\n{run.log_tail()}"
                this_start = run.log_text().rsplit("===== floe run start", 1)[-1]
                assert f"failpoint {point} (hit {hit}): killing" in this_start, \
                    run.log_tail()
                fired += 1
                assert workload.error is None, workload.error
                run.start()
                run.wait_streaming(120)
    finally:
        workload.stop_event.set()
        workload.join(30)
    assert workload.error is None, workload.error
    assert workload.commits > 100, workload.commits
    assert fired == 2 * len(POINTS)
    check_against_audit(run, pg, duckdb_con)


def test_a_transaction_committed_during_a_checkpoint_is_not_confirmed_and_lands(
        floe, pg, duckdb_con):
    """Case 11: floe pauses inside a checkpoint, one table committed and the others
    in flight (checkpoint.after-table-commit=sleep). A transaction over all three
    tables commits meanwhile: the slot's confirmed position (psql) must stay below
    its commit, also after the pause; floe is SIGKILLed, and after a restart the
    transaction is in Bronze once, as the audit trail says."""
    run = start_copied(floe, pg)
    run.kill()
    workload = Workload(pg.dsn, seed=12)
    workload.start()
    try:
        run.start(env={"FLOE_FAILPOINT": "checkpoint.after-table-commit@3=sleep:4000"})
        run.wait_until(lambda: "checkpoint.after-table-commit (hit 3): sleeping" in
                       run.log_text().rsplit("===== floe run start", 1)[-1], 120,
                       what="floe to pause inside a checkpoint", interval=0.05)
        done = threading.Event()

        def during(conn):
            conn.execute("INSERT INTO accounts VALUES (-2, 'during', 0)")
            conn.execute("INSERT INTO lines VALUES (-2, -2, 0, 'during')")
            conn.execute("INSERT INTO docs VALUES (-2, 'during', 0)")
            done.set()
        # Committed by the workload's session, between two of its transactions.
        workload.inject.put(during)
        assert done.wait(10), "the workload did not run the transaction"
        time.sleep(0.5)  # committed (the workload commits right after `during`)
        # The pause lasts 4 s; the checkpoint then confirms what it had, no more.
        confirmed = [run.slot_confirmed_flush() or 0]
        run.kill()
        confirmed.append(run.slot_confirmed_flush() or 0)
        run.start()
        run.wait_until(lambda: run.has_row("public.docs", id=-2), 120,
                       what="the transaction made during the checkpoint")
    finally:
        workload.stop_event.set()
        workload.join(30)
    assert workload.error is None, workload.error
    marker = [r for r in run.rows_pyiceberg("public.docs") if r["id"] == -2]
    assert len(marker) == 1, marker
    assert max(confirmed) < marker[0]["cdc_commit_lsn"], \
        (hex(max(confirmed)), hex(marker[0]["cdc_commit_lsn"]))
    check_against_audit(run, pg, duckdb_con)
