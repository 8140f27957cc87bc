"""floe run decoding from a hot standby (issue #18 item 3, PostgreSQL 16+): the slot,
the copies, the chunks and the stream are the standby's, and floe writes only its
heartbeats, backfill watermarks and a publication it creates on the primary
(source.primary_conninfo). The oracle is the primary read with psql: its audit
trigger for Bronze (test_run_crash.check_against_audit) and its tables for Silver."""

from __future__ import annotations

import contextlib
import time

import psycopg
import pytest

from conftest import PgDatabase
from floerun import FloeRun, duckdb_setup
from pgcluster import PgCluster, pg_version
from test_pg_versions import silver_equals_source, wait_replayed
from test_run_crash import SETUP, TABLES, Workload, crash_test
from test_run_watermark import latest_backfill

LOGICAL_SLOTS = "SELECT count(*) FROM pg_replication_slots WHERE slot_type = 'logical'"


def needs_standby_decoding() -> None:
    if pg_version() < 16:
        pytest.skip("logical decoding on a standby is PostgreSQL 16's")


@contextlib.contextmanager
def primary_with_standby(standby_conf: dict[str, str] | None = None):
    """A primary with database shop, and a hot standby of it through physical slot
    standby1 (hot_standby_feedback on, unless `standby_conf` says otherwise)."""
    primary = PgCluster().start()
    standby = PgCluster(standby_conf)
    try:
        with psycopg.connect(primary.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE shop")
            admin.execute("SELECT pg_create_physical_replication_slot('standby1')")
        standby.start_standby(primary, "standby1")
        yield primary, standby, PgDatabase(primary, "shop"), PgDatabase(standby, "shop")
    finally:
        standby.destroy()
        primary.destroy()


def on_standby(floe_bin, standby_db, primary_db, base, primary_conninfo=None,
               **kwargs) -> FloeRun:
    """A pipeline reading `standby_db`, writing on `primary_db`'s server."""
    conninfo = primary_db.dsn if primary_conninfo is None else primary_conninfo
    source = f'  primary_conninfo: "{conninfo}"\n' if conninfo else ""
    return FloeRun(floe_bin, standby_db, base, source_yaml=source, **kwargs)


def last_change_then_silver(run, source_db, duckdb_con, key: int) -> None:
    """A last change on `source_db` (where the workload writes), waited for in
    Bronze; floe stopped; Silver checked equal to `source_db`."""
    source_db.execute("INSERT INTO docs VALUES (%s, 'the last change', 1)", (key,))
    run.wait_until(lambda: run.has_row("public.docs", id=key), 60,
                   what="the last change in Bronze", interval=0.5)
    run.stop()
    silver_equals_source(run, source_db, duckdb_con)


def start_and_copy_accounts(run) -> None:
    run.start()
    run.wait_until(lambda: run.count("public.accounts") >= 20000, 120,
                   what="the initial copy of accounts")


@pytest.mark.every_version
def test_sigterm_while_the_standby_slot_waits_for_the_primary_stops_floe(
        floe_bin, tmp_path, duckdb_con):
    """A slot made on a standby waits until the transactions running on the primary
    have ended, and the standby's walsender acts on a cancel only after that wait
    (PostgreSQL 16-18): floe cancels, then drops its connection, so a SIGTERM during
    the wait stops it within seconds, exit code 0, saying what it stopped; once the
    transaction has ended the next start streams and Bronze gets the change. Before:
    floe stopped only when the primary's transaction ended (break-it finding)."""
    needs_standby_decoding()
    duckdb_setup(duckdb_con)
    with primary_with_standby() as (primary, standby, primary_db, standby_db):
        primary_db.execute("CREATE TABLE t (id int PRIMARY KEY, v int);"
                           "CREATE TABLE other (id int)")
        run = on_standby(floe_bin, standby_db, primary_db, tmp_path / "floe",
                         tables=["public.t"])
        with psycopg.connect(primary_db.dsn, autocommit=False) as blocker:
            blocker.execute("INSERT INTO other VALUES (1)")  # holds an xid
            run.start()
            run.wait_until(lambda: standby_db.execute(
                "SELECT 1 FROM pg_stat_activity WHERE backend_type = 'walsender' "
                "AND query LIKE 'CREATE_REPLICATION_SLOT%'"), 60,
                what="the slot's creation on the standby")
            time.sleep(1)
            before = len(run.log_text())
            run.stop(timeout=15)
            said = run.log_text()[before:]
            assert "stopped while creating replication slot" in said, said
            blocker.commit()
        primary_db.execute("INSERT INTO t VALUES (1, 1)")
        run.start()
        run.wait_until(lambda: run.has_row("public.t", id=1), 90,
                       what="the change in Bronze", interval=0.5)
        run.stop()
        assert primary_db.execute(LOGICAL_SLOTS) == [(0,)]


@pytest.mark.every_version
def test_sigkill_while_decoding_from_a_standby_loses_nothing_and_duplicates_nothing(
        floe_bin, tmp_path, duckdb_con):
    """The crash test (22 SIGKILLs under the mixed workload, several tables,
    composite keys, TOAST values) with floe reading a standby of the primary the
    workload writes: Bronze equals the primary's audit trail, nothing missing and
    nothing twice, and Silver equals the primary's tables. The primary has no
    logical slot and no walsender of floe's."""
    needs_standby_decoding()
    duckdb_setup(duckdb_con)
    runs = []
    with primary_with_standby() as (primary, standby, primary_db, standby_db):
        def make(**kwargs) -> FloeRun:
            run = on_standby(floe_bin, standby_db, primary_db,
                             tmp_path / f"floe{len(runs)}", **kwargs)
            runs.append(run)
            return run
        try:
            crash_test(make, primary_db, duckdb_con, kills_wanted=22)
            run = runs[0]
            assert primary_db.execute(LOGICAL_SLOTS) == [(0,)]
            assert standby_db.execute(LOGICAL_SLOTS) == [(1,)]
            # The standby's own walreceiver is the primary's only walsender.
            assert primary_db.execute("SELECT count(*) FROM pg_stat_replication") \
                == [(1,)]
            assert "the source is a hot standby" in run.log_text(), run.log_tail()
            silver_equals_source(run, primary_db, duckdb_con)
        finally:
            for run in runs:
                run.kill()
                print(run.log_tail(200))


@pytest.mark.every_version
def test_a_backfill_from_a_lagging_standby_reads_each_chunk_after_its_low_watermark(
        floe_bin, tmp_path, duckdb_con):
    """A watermark backfill (floe run --backfill-table) while the workload writes,
    from a standby that applies each commit 300 ms late (recovery_min_apply_delay):
    each chunk is selected before the standby replayed its low watermark, so its
    snapshot misses changes committed on the primary just before the watermark; the
    window must count them (the snapshot could not see them) or the chunk's older
    rows would win in Bronze. Silver equals the primary."""
    needs_standby_decoding()
    duckdb_setup(duckdb_con)
    with primary_with_standby({"recovery_min_apply_delay": "'300ms'"}) as (
            primary, standby, primary_db, standby_db):
        primary_db.execute(SETUP)
        run = on_standby(floe_bin, standby_db, primary_db, tmp_path / "floe",
                         tables=[f"public.{t}" for t in TABLES], interval="500ms")
        try:
            text = run.config_path.read_text()
            run.config_path.write_text(text.replace(
                "  snapshot: initial\n", "  snapshot: initial\n"
                "  backfill_chunk_rows: 2000\n"))
            start_and_copy_accounts(run)
            workload = Workload(primary_db.dsn, seed=16)
            workload.start()
            time.sleep(2)
            run.stop()
            run.start("--backfill-table", "public.accounts")
            run.wait_until(
                lambda: (latest_backfill(run, "public.accounts") or {}).get("done"), 180,
                what="the backfill of public.accounts")
            workload.stop_event.set()
            workload.join(30)
            assert workload.error is None, workload.error
            assert workload.commits > 100, workload.commits
            last_change_then_silver(run, primary_db, duckdb_con, 5000)
            assert "heartbeat on the primary" not in run.log_text(), run.log_tail()
        finally:
            run.kill()
            print(run.log_tail(200))


@pytest.mark.every_version
def test_a_standby_source_that_cannot_work_is_refused_with_the_fix(
        floe_bin, tmp_path, duckdb_con):
    """floe run against a standby stops, exit code 2, saying what to change, and
    leaves no slot behind, when: the server is older than 16; no
    source.primary_conninfo is set; it names the standby itself, or another database
    of the primary; source.failover is set; hot_standby_feedback is off. With every
    fix made, it runs."""
    duckdb_setup(duckdb_con)
    with primary_with_standby({"hot_standby_feedback": "off"}) as (
            primary, standby, primary_db, standby_db):
        primary_db.execute(SETUP)

        def refused(name: str, needle: str, primary_conninfo=None,
                    source_extra: str = "") -> None:
            run = on_standby(floe_bin, standby_db, primary_db, tmp_path / name,
                             primary_conninfo=primary_conninfo,
                             tables=[f"public.{t}" for t in TABLES])
            if source_extra:
                text = run.config_path.read_text()
                run.config_path.write_text(text.replace(
                    "  snapshot: initial\n", "  snapshot: initial\n" + source_extra))
            try:
                run.start()
                assert run.wait_exit(60) == 2, run.log_tail()
                assert needle in run.log_text(), run.log_tail()
            finally:
                run.kill()
            assert standby_db.execute(LOGICAL_SLOTS) == [(0,)]

        if pg_version() < 16:
            refused("old", "decoding from a standby needs PostgreSQL 16 or newer")
            return
        refused("no_primary", "Set source.primary_conninfo", primary_conninfo="")
        if pg_version() >= 17:
            refused("failover", "source.failover: true cannot be used with a standby",
                    source_extra="  failover: true\n")
        refused("feedback", "hot_standby_feedback = on")
        with psycopg.connect(standby.dsn(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET hot_standby_feedback = on")
            conn.execute("SELECT pg_reload_conf()")
        refused("itself", "names a server in recovery, not the primary",
                primary_conninfo=standby_db.dsn)
        # The primary's other database: watermarks there never reach the stream (a
        # break-it run: a backfill stalled without a word).
        refused("other_db", 'source.primary_conninfo names database "postgres"',
                primary_conninfo=primary.dsn("postgres"))
        run = on_standby(floe_bin, standby_db, primary_db, tmp_path / "fixed",
                         tables=[f"public.{t}" for t in TABLES])
        try:
            start_and_copy_accounts(run)
            primary_db.execute("INSERT INTO docs VALUES (5000, 'on the primary', 1)")
            run.wait_until(lambda: run.has_row("public.docs", id=5000), 60,
                           what="a change on the primary in Bronze", interval=0.5)
        finally:
            run.kill()


@pytest.mark.every_version
def test_a_standby_slot_invalidated_by_recovery_is_refused_and_resnapshot_recovers(
        floe_bin, tmp_path, duckdb_con):
    """floe's slot on the standby is invalidated while floe is stopped (feedback
    turned off, the primary's catalog vacuumed): floe refuses, exit code 2, naming the
    conflict and the settings, and --resnapshot drops the slot, creates it again and
    copies every table; Silver equals the primary."""
    needs_standby_decoding()
    duckdb_setup(duckdb_con)
    with primary_with_standby() as (primary, standby, primary_db, standby_db):
        primary_db.execute(SETUP)
        run = on_standby(floe_bin, standby_db, primary_db, tmp_path / "floe",
                         tables=[f"public.{t}" for t in TABLES])
        try:
            start_and_copy_accounts(run)
            run.stop()
            with psycopg.connect(standby.dsn(), autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET hot_standby_feedback = off")
                conn.execute("SELECT pg_reload_conf()")
            time.sleep(1)
            # Catalog rows the slot still needs, removed on the primary.
            deadline = time.monotonic() + 60
            while standby_db.execute(
                    "SELECT count(*) FROM pg_replication_slots WHERE conflicting"
            ) != [(1,)]:
                assert time.monotonic() < deadline, (
                    "the slot was never invalidated",
                    standby_db.execute("SELECT slot_name, catalog_xmin, conflicting "
                                       "FROM pg_replication_slots"),
                    primary_db.execute("SELECT slot_name, xmin, catalog_xmin FROM "
                                       "pg_replication_slots"),
                    primary_db.execute("SELECT pid, datname, backend_xmin, state, query "
                                       "FROM pg_stat_activity WHERE backend_xmin IS "
                                       "NOT NULL"))
                # Apart: a row inserted and deleted by one transaction conflicts with
                # no snapshot.
                primary_db.execute("CREATE TABLE gone (a int)")
                primary_db.execute("DROP TABLE gone")
                primary_db.execute("VACUUM pg_class, pg_attribute, pg_type")
                time.sleep(0.5)
            with psycopg.connect(standby.dsn(), autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET hot_standby_feedback = on")
                conn.execute("SELECT pg_reload_conf()")
            primary_db.execute("UPDATE accounts SET balance = -balance WHERE id % 9 = 0")
            run.start()
            assert run.wait_exit(60) == 2, run.log_tail()
            assert "invalidated by a conflict with recovery" in run.log_text()
            assert "floe run --resnapshot" in run.log_text()
            run.start("--resnapshot")
            run.wait_until(lambda: "--resnapshot is done" in run.log_text(), 120,
                           what="the copies of --resnapshot")
            # The changes the invalidated slot missed are not "nothing".
            assert "nothing is lost" not in run.log_text(), run.log_tail()
            last_change_then_silver(run, primary_db, duckdb_con, 5000)
        finally:
            run.kill()
            print(run.log_tail(200))


@pytest.mark.every_version
def test_a_standby_promoted_while_floe_reads_it_is_read_as_a_primary(
        floe_bin, tmp_path, duckdb_con):
    """The standby floe reads is promoted (the old primary stays up, diverging): floe
    notices, reconnects and reads it as a primary, its changes of the new timeline
    reach Bronze, and a restart carries on (a break-it run: the restart was refused
    for ever, Bronze's changes past the switch taken for the old timeline's). Silver
    equals the promoted server's tables."""
    needs_standby_decoding()
    duckdb_setup(duckdb_con)
    with primary_with_standby() as (primary, standby, primary_db, standby_db):
        primary_db.execute(SETUP)
        run = on_standby(floe_bin, standby_db, primary_db, tmp_path / "floe",
                         tables=[f"public.{t}" for t in TABLES])
        try:
            start_and_copy_accounts(run)
            primary_db.execute("UPDATE accounts SET balance = -balance WHERE id % 10 = 0")
            wait_replayed(standby, primary_db)
            standby.promote()
            standby_db.execute("UPDATE accounts SET name = 'promoted' WHERE id % 10 = 1")
            standby_db.execute("DELETE FROM lines WHERE order_id % 11 = 0")
            standby_db.execute("INSERT INTO docs VALUES (5000, 'on the promoted one', 1)")
            run.wait_until(lambda: run.has_row("public.docs", id=5000), 60,
                           what="a change on the promoted standby in Bronze",
                           interval=0.5)
            run.wait_until(lambda: "the source standby was promoted" in run.log_text(),
                           60, what="floe to notice the promotion")
            run.stop()
            run.start()
            last_change_then_silver(run, standby_db, duckdb_con, 5001)
            assert "the source was promoted while floe read it" in run.log_text(), \
                run.log_tail()
        finally:
            run.kill()
            print(run.log_tail(200))
