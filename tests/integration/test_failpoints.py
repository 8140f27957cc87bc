"""The crash windows of `floe run`'s checkpoint, reached on purpose rather than by a
lucky random kill (docs/testing.md, cases 1, 2, 3, 10 and 11). FLOE_FAILPOINT
(src/floe/common/failpoint.h) makes floe SIGKILL itself, or pause, at a named place:

* checkpoint.before-commit: the checkpoint's Parquet files are written, nothing is
  committed;
* checkpoint.after-table-commit: one table committed, the others perhaps not yet;
* checkpoint.before-record: every table committed, the position not recorded;
* checkpoint.before-confirm: recorded, not yet sent to the server;
* stream.after-deferring / checkpoint.holding: a committed transaction read and held
  back for batching, and a checkpoint taken while it is held;
* catalog.commit / catalog.namespace-update (cases 3 and 10): a table's commit, or
  the record of the confirmed position, fails without being applied (`error`,
  `unknown`) or is applied and then reported as of unknown outcome (`lost`, the
  reply lost), while floe goes on running.

The workload and the oracle are the crash test's (test_run_crash.py): every change
is also written by an audit trigger, and Bronze must equal it exactly."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

from floerun import compare_events, floe  # noqa: F401
from oracle import check_silver
from test_run_crash import INITIAL, SETUP, Workload, check_against_audit

POINTS = ["checkpoint.before-commit", "checkpoint.after-table-commit",
          "checkpoint.before-record", "checkpoint.before-confirm"]


def start_copied(floe, pg, **pipeline):
    """The crash test's tables, copied, floe streaming (a pipeline of floe(**pipeline):
    test_routing.py puts two of them in another catalog)."""
    pg.execute(SETUP)
    run = floe(tables=["public.accounts", "public.lines", "public.docs"],
               interval="300ms", **pipeline)
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
    kills_at(run, pg, duckdb_con, [(point, hit) for point in POINTS for hit in (2, 5)],
             seed=11)


def kills_at(run, pg, duckdb_con, where: list[tuple[str, int]], seed: int) -> None:
    """Under the crash test's workload, floe started with each (failpoint, hit) of
    `where` in turn, dies there and is started again; then Bronze against the audit
    trail (check_against_audit)."""
    workload = Workload(pg.dsn, seed=seed)
    workload.start()
    fired = 0
    try:
        for point, hit in where:
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
    assert fired == len(where)
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


def test_a_transaction_held_for_batching_survives_a_checkpoint_then_a_kill_or_a_stop(
        floe, pg, duckdb_con):
    """The change stream holds a small committed transaction back for a moment, to
    deliver it in one batch with the next ones. A checkpoint taken while it is held
    must not confirm past it (soak seed 1689828717: 14 changes of one transaction
    missing from Bronze after a kill). stream.after-deferring pauses floe right
    after it held one, for longer than the checkpoint interval, so the next
    checkpoint comes while the transaction is held. Twice floe is SIGKILLed right
    after that checkpoint (checkpoint.holding), and twice it is stopped with SIGTERM
    during the pause (its final checkpoint comes while the transaction is held).
    Bronze must equal the audit trail exactly."""
    run = start_copied(floe, pg)
    workload = Workload(pg.dsn, seed=21)
    workload.start()

    def this_start() -> str:
        return run.log_text().rsplit("===== floe run start", 1)[-1]

    try:
        for hit in (5, 40):
            run.kill()
            run.start(env={"FLOE_FAILPOINT":
                           f"stream.after-deferring@{hit}=sleep:700,checkpoint.holding"})
            rc = run.wait_exit(120)
            assert rc == -9, f"floe exited {rc}, not by its failpoint\n{run.log_tail()}"
            log = this_start()
            assert f"failpoint stream.after-deferring (hit {hit}): sleeping" in log, \
                run.log_tail()
            assert "failpoint checkpoint.holding (hit 1): killing" in log, run.log_tail()
            assert workload.error is None, workload.error
            run.start()
            run.wait_streaming(120)
        for hit in (5, 40):
            run.stop()
            run.start(env={"FLOE_FAILPOINT": f"stream.after-deferring@{hit}=sleep:3000"})
            pausing = f"failpoint stream.after-deferring (hit {hit}): sleeping"
            run.wait_until(lambda: pausing in this_start(), 120, what=pausing,
                           interval=0.05)
            run.stop()  # SIGTERM while the transaction is held
            assert workload.error is None, workload.error
            run.start()
            run.wait_streaming(120)
    finally:
        workload.stop_event.set()
        workload.join(30)
    assert workload.error is None, workload.error
    assert workload.commits > 100, workload.commits
    check_against_audit(run, pg, duckdb_con)


def test_a_copy_again_killed_before_its_commit_keeps_every_change(floe, pg, duckdb_con):
    """A retype Iceberg cannot promote makes floe run copy the table again while its
    changes keep reaching Bronze; floe is killed with the copy written but not
    committed (copy.before-commit), so the next start finds the copy pending and
    makes it again. Every change, those around the retype included, must be in
    Bronze as the audit trigger recorded it, and Silver must equal psql."""
    from test_divergences import wait_copied, wait_flushed
    from test_silver import silver
    pg.execute("""
        CREATE TABLE rt (id int PRIMARY KEY, code text, v int);
        INSERT INTO rt SELECT g, g::text, g FROM generate_series(1, 50) g;
        CREATE TABLE rt_audit (n bigserial PRIMARY KEY, op text, id int, v int);
        CREATE FUNCTION rt_audit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO rt_audit (op, id, v) VALUES (left(TG_OP, 1),
            CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END,
            CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE NEW.v END);
          RETURN NULL;
        END $$;
        CREATE TRIGGER rt_audit AFTER INSERT OR UPDATE OR DELETE ON rt
          FOR EACH ROW EXECUTE FUNCTION rt_audit();
    """)
    run = floe(tables=["public.rt"])
    run.start().wait_streaming()
    run.kill()
    run.start(env={"FLOE_FAILPOINT": "copy.before-commit@1"})
    run.wait_streaming()
    with pg.connect(autocommit=False) as c:
        c.execute("UPDATE rt SET v = v + 100 WHERE id <= 5")
        c.execute("ALTER TABLE rt ALTER COLUMN code TYPE int USING code::int")
        c.execute("UPDATE rt SET v = v + 1000 WHERE id BETWEEN 3 AND 8")
        c.execute("DELETE FROM rt WHERE id = 9")
        c.commit()
    rc = run.wait_exit(120)
    assert rc == -9 and "failpoint copy.before-commit (hit 1): killing" in \
        run.log_text(), run.log_tail()
    run.start()
    run.wait_streaming()
    pg.execute("INSERT INTO rt VALUES (100, 100, 100)")
    pg.execute("UPDATE rt SET v = -v WHERE id = 10")
    wait_flushed(run, pg)
    wait_copied(run, "rt")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rt", ["id"])
    run.stop()
    audit = [({"I": "c", "U": "u", "D": "d"}[op], i, v) for op, i, v in
             pg.execute("SELECT op, id, v FROM rt_audit ORDER BY n")]
    rows = sorted((r for r in run.rows_pyiceberg("public.rt") if r["cdc_op"] in "cud"),
                  key=lambda r: (r["cdc_commit_lsn"], r["cdc_seq"]))
    got = [(r["cdc_op"], r["id"], None if r["cdc_op"] == "d" else r["v"]) for r in rows]
    compare_events("public.rt", audit, got)


CATALOG_FAULTS = [("catalog.commit", "error"), ("catalog.commit", "unknown"),
                  ("catalog.commit", "lost"), ("catalog.namespace-update", "error"),
                  ("catalog.namespace-update", "lost")]


def test_catalog_commits_failing_or_of_unknown_outcome_lose_and_repeat_nothing(
        floe, pg, duckdb_con):
    """Cases 3 and 10 without a kill: under the mixed workload over three tables
    (which commit in parallel in each checkpoint), one catalog call of a running
    `floe run` fails: a table's commit refused (`error`) or of unknown outcome,
    applied (`lost`) or not (`unknown`), or the record of the confirmed position
    failing or applied with its reply lost. floe must not die, must not confirm
    past what is durable, and must end up with every change once: it gets over the
    fault by itself (a reload that finds its own commit, or a reconnect that reads
    again what was not committed), keeps streaming, and Bronze equals the audit
    trail exactly (PyIceberg, DuckDB)."""
    run = start_copied(floe, pg)
    workload = Workload(pg.dsn, seed=3)
    workload.start()
    try:
        for point, action in CATALOG_FAULTS:
            for hit in (3, 8):
                run.stop()
                run.start(env={"FLOE_FAILPOINT": f"{point}@{hit}={action}"})
                fired = f"failpoint {point} (hit {hit}): {action}"
                run.wait_until(lambda: fired in run.log_text().rsplit(
                    "===== floe run start", 1)[-1], 120, what=fired, interval=0.1)
                # A checkpoint after the fault: floe is past it.
                run.wait_until(lambda: "checkpoint:" in run.log_text().rsplit(
                    fired, 1)[-1], 120, what=f"a checkpoint after {fired}")
                run.check_alive()
                assert workload.error is None, workload.error
    finally:
        workload.stop_event.set()
        workload.join(30)
    assert workload.error is None, workload.error
    assert workload.commits > 100, workload.commits
    fired = re.findall(r"failpoint (catalog\.[a-z-]+) \(hit \d+\): ([a-z]+)",
                       run.log_text())
    assert sorted(set(fired)) == sorted(CATALOG_FAULTS) and len(fired) == 10, fired
    check_against_audit(run, pg, duckdb_con)


def test_a_silver_merge_whose_commit_outcome_is_unknown_or_failed(floe, pg, duckdb_con):
    """Case 3 for `floe silver`: the Silver table's commit of a merge is applied but
    reported as of unknown outcome (`lost`), or not applied (`unknown`, `error`).
    Each is retryable under the one error policy (issue 15, item 3: a commit
    conflict, a state unknown, an I/O error), so `floe silver` plans again and exits
    0: it finds its own commit or makes it again, and Silver equals psql (PyIceberg
    and DuckDB), with each key once."""
    from test_divergences import wait_flushed
    from test_silver import silver
    pg.execute("""
        CREATE TABLE sv (id int PRIMARY KEY, v text, n int);
        INSERT INTO sv SELECT g, 'v' || g, g FROM generate_series(1, 300) g;
    """)
    run = floe(tables=["public.sv"])
    run.start().wait_streaming()
    wait_flushed(run, pg)
    silver(run)  # the backfill
    check_silver(run, pg, duckdb_con, "public.sv", ["id"])
    for round_, action in enumerate(["lost", "unknown", "error"]):
        pg.execute("UPDATE sv SET n = n + 1000, v = %s WHERE id %% 3 = %s",
                   (action, round_))
        pg.execute("DELETE FROM sv WHERE id %% 50 = %s", (round_,))
        pg.execute("INSERT INTO sv SELECT g, %s, g FROM generate_series(%s::int, %s::int) g",
                   (action, 1000 * (round_ + 1), 1000 * (round_ + 1) + 20))
        wait_flushed(run, pg)
        proc = subprocess.run(
            [str(run.floe_bin), "silver", str(run.config_path)], cwd=run.base,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
            env={**os.environ, "FLOE_FAILPOINT": f"catalog.commit@1={action}"})
        out = proc.stdout.decode(errors="replace")
        assert f"failpoint catalog.commit (hit 1): {action}" in out, out
        assert proc.returncode == 0, out
        assert "planning again" in out, out
        check_silver(run, pg, duckdb_con, "public.sv", ["id"])
    run.stop()
