"""What one PostgreSQL version has and another has not (issue #18), each checked on the
server of the matrix that has it (FLOE_PG_VERSION; `make test` runs these on every
version, and each test skips itself, saying why, where the feature does not exist).
The oracle is the source read with psql (oracle.py's check_silver) and the values in
Bronze read by PyIceberg."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time

import psycopg
import pytest

from conftest import PgDatabase
from floerun import FloeRun, duckdb_setup, floe  # noqa: F401
from oracle import check_silver
from pgcluster import PgCluster, pg_version
from test_run_crash import INITIAL, SETUP, TABLES, Workload, check_against_audit
from test_divergences import wait_flushed
from test_silver import silver, silver_ident

SERVICE = "svc"


@pytest.mark.every_version
def test_generated_columns_a_postgres_18_publication_sends_reach_bronze_and_silver(
        floe, pg, duckdb_con):
    """PostgreSQL 18 sends stored generated columns when the publication says
    `publish_generated_columns = stored`, or names them in its column list: they land
    in Bronze and Silver, on the copy path as on the stream, never as a null the
    source does not hold. A virtual generated column is never sent: left out, and
    said so."""
    if pg_version() < 18:
        pytest.skip("publish_generated_columns is PostgreSQL 18's")
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, a int, "
               "b int GENERATED ALWAYS AS (a * 2) STORED, c text, "
               "v int GENERATED ALWAYS AS (a * 3) VIRTUAL)")
    pg.execute("CREATE TABLE listed (id int PRIMARY KEY, a int, "
               "g text GENERATED ALWAYS AS ('g' || a) STORED, "
               "h int GENERATED ALWAYS AS (a + 1) STORED)")
    # acc: every stored column by the publication's option; listed: g by the column
    # list (h is not in it).
    pg.execute("CREATE PUBLICATION floe_pub FOR TABLE acc, listed (id, a, g) "
               "WITH (publish_generated_columns = stored)")
    pg.execute("INSERT INTO acc (id, a, c) SELECT g, g, 'x' FROM generate_series(1, 30) g")
    pg.execute("INSERT INTO listed (id, a) SELECT g, g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE, publication="floe_pub").start()
    run.wait_streaming()
    pg.execute("INSERT INTO acc (id, a, c) SELECT g, g, 'y' FROM generate_series(31, 40) g")
    pg.execute("UPDATE acc SET a = a + 100 WHERE id % 3 = 0")
    pg.execute("DELETE FROM acc WHERE id % 7 = 0")
    pg.execute("UPDATE listed SET a = -a WHERE id % 2 = 0")
    wait_flushed(run, pg)

    # Bronze: b on every row, the copied ones ('r') and the streamed ones alike.
    rows = run.rows_pyiceberg("public.acc")
    assert {r["cdc_op"] for r in rows} >= {"r", "c", "u", "d"}, rows[:3]
    live = [r for r in rows if r["cdc_op"] != "d"]
    assert all(r["b"] == r["a"] * 2 for r in live), [r for r in live if r["b"] != r["a"] * 2]
    assert "v" not in rows[0]
    listed = run.rows_pyiceberg("public.listed")
    assert all(r["g"] == f"g{r['a']}" for r in listed), listed[:3]
    assert "h" not in listed[0]

    silver(run)
    t = run.catalog().load_table(silver_ident("public.acc"))
    assert [f.name for f in t.schema().fields if f.name != "cdc_commit_lsn"] == \
        ["id", "a", "b", "c"]
    check_silver(run, pg, duckdb_con, "public.acc", ["id"], leave_out=("v",))
    check_silver(run, pg, duckdb_con, "public.listed", ["id"], leave_out=("h",))
    log = run.log_text()
    assert 'generated column(s) ["v"] are not replicated' in log, run.log_tail()
    assert '["b"' not in log and '"g"]' not in log, run.log_tail()
    run.stop()


class FailoverDatabase(PgDatabase):
    """A database on a primary and its standby, reached through a conninfo naming
    both (target_session_attrs=read-write): whichever is the primary answers."""

    def __init__(self, servers, name: str):
        super().__init__(servers[0], name)
        self.servers = servers

    @property
    def dsn(self) -> str:
        hosts = ",".join("127.0.0.1" for _ in self.servers)
        ports = ",".join(str(s.port) for s in self.servers)
        return (f"host={hosts} port={ports} user=postgres dbname={self.name} "
                "target_session_attrs=read-write connect_timeout=5")


def lsn_of(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@contextlib.contextmanager
def primary_and_standby(floe_bin, base, duckdb_con, failover: bool = False,
                        second_standby: bool = False):
    """A primary with case 7's tables (test_run_crash.SETUP), a standby through
    physical slot standby1, and a floe run (not started) given both hosts; with
    `failover`, floe's slot is a failover slot and the primary sends floe no change
    the standby has not (synchronized_standby_slots). Everything is stopped and
    removed at the end, floe's log printed. With `second_standby`, another standby
    (slot standby2) is the conninfo's third host, db.servers[2]."""
    duckdb_setup(duckdb_con)
    primary = PgCluster().start()
    standby = PgCluster()
    spare = PgCluster()
    run = None
    try:
        with psycopg.connect(primary.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE shop")
            admin.execute("SELECT pg_create_physical_replication_slot('standby1')")
            admin.execute("SELECT pg_create_physical_replication_slot('standby2')")
            if failover:
                admin.execute("ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
                admin.execute("SELECT pg_reload_conf()")
        db = FailoverDatabase([primary], "shop")
        db.execute(SETUP)
        standby.start_standby(primary, "standby1")
        db.servers = [primary, standby]
        if second_standby:
            db.servers.append(spare.start_standby(primary, "standby2"))
        run = FloeRun(floe_bin, db, base, tables=[f"public.{t}" for t in TABLES],
                      interval="500ms")
        if failover:
            text = run.config_path.read_text()
            run.config_path.write_text(text.replace(
                "  snapshot: initial\n", "  snapshot: initial\n  failover: true\n"))
        yield primary, standby, db, run
    finally:
        if run is not None:
            run.kill()
            print(run.log_tail(200))
        spare.destroy()
        standby.destroy()
        primary.destroy()


def start_and_copy(run) -> None:
    run.start()
    for tbl, n in INITIAL.items():
        run.wait_until(lambda: run.count(f"public.{tbl}") >= n, 120,
                       what=f"the initial snapshot of {tbl} ({n} rows)")


def confirm_everything(run, db) -> None:
    target = lsn_of(db.execute("SELECT pg_current_wal_lsn()::text")[0][0])
    run.wait_until(lambda: (run.slot_confirmed_flush() or 0) >= target, 60,
                   what="floe to confirm every change")


def wait_replayed(standby, db) -> None:
    """Waits until `standby` has replayed everything the primary wrote so far."""
    end = lsn_of(db.execute("SELECT pg_current_wal_lsn()::text")[0][0])
    with psycopg.connect(standby.dsn(), autocommit=True) as conn:
        wait_for(lambda: lsn_of(conn.execute(
            "SELECT pg_last_wal_replay_lsn()::text").fetchone()[0]) >= end,
            60, "the standby to replay everything")


def silver_equals_source(run, db, duckdb_con) -> None:
    proc = subprocess.run([str(run.floe_bin), "silver", str(run.config_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tbl, spec in TABLES.items():
        check_silver(run, db, duckdb_con, f"public.{tbl}", spec["key"])


@pytest.mark.every_version
def test_a_standby_promoted_mid_stream_carries_on_from_its_synced_failover_slot(
        floe_bin, tmp_path, duckdb_con):
    """#18 failover: a primary whose standby keeps floe's failover slot in step
    (sync_replication_slots; synchronized_standby_slots on the primary, so that floe
    never gets ahead of the standby) is killed while a workload writes; the standby
    is promoted; floe, given both hosts, carries on from the new primary's synced
    slot. Bronze equals the new primary's audit trail (nothing lost, nothing twice),
    folded and read by PyIceberg and DuckDB, and Silver equals the source."""
    if pg_version() < 17:
        pytest.skip("failover slots are PostgreSQL 17's")
    with primary_and_standby(floe_bin, tmp_path / "floe", duckdb_con,
                             failover=True) as (primary, standby, db, run):
        start_and_copy(run)
        assert db.execute("SELECT failover FROM pg_replication_slots "
                          "WHERE slot_name = %s", (run.slot,)) == [(True,)]
        workload = Workload(db.dsn, seed=18)
        workload.start()
        time.sleep(3)
        # The standby holds floe's slot, synced at least up to the copy.
        with psycopg.connect(standby.dsn(), autocommit=True) as conn:
            wait_for(lambda: conn.execute(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s "
                "AND synced AND NOT temporary", (run.slot,)).fetchone()[0] == 1,
                60, "the standby to sync floe's slot")
        time.sleep(2)
        primary.stop(mode="immediate")  # mid-stream, mid-transaction
        workload.join(30)
        assert workload.commits > 50, workload.commits
        standby.promote()
        # The new primary takes writes; floe carries on from it.
        db.execute("UPDATE accounts SET balance = balance + 1 WHERE id % 97 = 0")
        db.execute("DELETE FROM lines WHERE order_id % 89 = 0")
        db.execute("INSERT INTO docs VALUES (5000, 'after the failover', 1)")
        run.wait_until(lambda: run.has_row("public.docs", id=5000), 120,
                       what="a change made on the new primary in Bronze", interval=0.5)
        assert "moved from timeline 1 to 2" in run.log_text(), run.log_tail()
        # The new server is said, as the first one was (a break-it run: only once).
        said = re.findall(r"source: PostgreSQL \S+, system \d+, timeline (\d+)",
                          run.log_text())
        assert said == ["1", "2"], run.log_tail()
        check_against_audit(run, db, duckdb_con)
        silver_equals_source(run, db, duckdb_con)


@pytest.mark.every_version
def test_a_promoted_standby_without_floes_slot_is_refused_and_resnapshot_recovers(
        floe_bin, tmp_path, duckdb_con):
    """The slot is not on the standby at promotion (an ordinary slot, never synced):
    floe refuses, exit code 2, saying how to recover, and `floe run --resnapshot`
    copies every table again from the new primary; Silver equals the source."""
    with primary_and_standby(floe_bin, tmp_path / "floe", duckdb_con) as (
            primary, standby, db, run):
        start_and_copy(run)
        db.execute("UPDATE accounts SET balance = -balance WHERE id % 10 = 0")
        confirm_everything(run, db)
        # Everything reached the standby before the primary goes: same history.
        wait_replayed(standby, db)
        primary.stop(mode="immediate")
        standby.promote()
        db.execute("DELETE FROM lines WHERE order_id % 7 = 0")
        assert run.wait_exit(120) == 2, run.log_tail()
        log = run.log_text()
        assert 'replication slot "floe_svc" does not exist' in log, run.log_tail()
        assert "floe run --resnapshot" in log, run.log_tail()
        run.start("--resnapshot")
        run.wait_until(lambda: "--resnapshot is done" in run.log_text(), 120,
                       what="the copies of --resnapshot")
        # The run before was cut off by the promotion, and its slot is gone: the
        # start-up must not say that nothing is lost (a break-it run).
        assert "did not stop cleanly; --resnapshot copies every table again" in \
            run.log_text(), run.log_tail()
        assert "nothing is lost" not in run.log_text(), run.log_tail()
        db.execute("INSERT INTO docs VALUES (5000, 'after the failover', 1)")
        run.wait_until(lambda: run.has_row("public.docs", id=5000), 120,
                       what="a change made on the new primary in Bronze", interval=0.5)
        run.stop()
        silver_equals_source(run, db, duckdb_con)


@pytest.mark.every_version
def test_a_promoted_standby_behind_what_bronze_holds_is_refused_even_with_resnapshot(
        floe_bin, tmp_path, duckdb_con):
    """The standby stopped receiving before changes floe has in Bronze (no
    synchronized_standby_slots); promoted, it branches off before them and writes
    other changes at their LSNs. floe refuses, exit code 2, with or without
    --resnapshot (copies would sort before the changes Bronze holds), and says to
    start a new Bronze; nothing is written to the old one."""
    with primary_and_standby(floe_bin, tmp_path / "floe", duckdb_con) as (
            primary, standby, db, run):
        start_and_copy(run)
        standby.stop()  # receives nothing more
        db.servers = [primary]
        db.execute("UPDATE accounts SET balance = -balance WHERE id % 10 = 0")
        confirm_everything(run, db)
        primary.stop(mode="immediate")
        standby.restart_stopped()
        standby.promote()
        db.servers = [primary, standby]
        db.execute("UPDATE accounts SET name = 'other history' WHERE id % 10 = 1")
        assert run.wait_exit(120) == 2, run.log_tail()
        # floe reconnects within half a second: before the new primary's WAL reaches
        # past what Bronze holds, the refusal is that its history went backwards (a
        # CI run); after, that its timeline branched off. Both say to start anew.
        first = run.log_text()
        assert ("the source was promoted: its timeline 2 branched off timeline 1" in first
                or "the source's WAL ends at" in first), run.log_tail()
        assert "new `service:` name" in first
        bronze = run.count("public.accounts")
        # The new primary writes past Bronze's position for certain (the next segment).
        db.execute("SELECT pg_switch_wal()")
        db.execute("UPDATE accounts SET name = 'past' WHERE id = 1")
        wal = db.execute("SELECT pg_current_wal_lsn()::text")[0][0]
        run.start("--resnapshot")
        assert run.wait_exit(120) == 2, run.log_tail()
        assert run.log_text().count("branched off timeline 1") == \
            first.count("branched off timeline 1") + 1, (wal, run.log_tail())
        assert run.count("public.accounts") == bronze


@pytest.mark.every_version
def test_another_standby_promoted_to_the_same_timeline_number_is_refused(
        floe_bin, tmp_path, duckdb_con):
    """Two standbys of one primary: the first is promoted (timeline 2) and floe
    carries on from it; then it goes too and the second, which stopped receiving
    earlier, is promoted: timeline 2 as well, begun at another point, and once it has
    written past what Bronze holds only where its timeline began tells it from the
    first. floe refuses, exit code 2 (a break-it run: it carried on, skipping the
    second's changes below what Bronze held, and Silver kept rows the source does not
    have)."""
    with primary_and_standby(floe_bin, tmp_path / "floe", duckdb_con,
                             second_standby=True) as (primary, first, db, run):
        second = db.servers[2]
        start_and_copy(run)
        second.stop()  # receives nothing more
        db.execute("UPDATE accounts SET balance = -balance WHERE id % 10 = 0")
        confirm_everything(run, db)
        wait_replayed(first, db)
        primary.stop(mode="immediate")
        first.promote()
        # An ordinary slot: not on the standby; --resnapshot carries on from it.
        assert run.wait_exit(120) == 2, run.log_tail()
        assert "moved from timeline 1 to 2" in run.log_text(), run.log_tail()
        run.start("--resnapshot")
        run.wait_until(lambda: "--resnapshot is done" in run.log_text(), 120,
                       what="the copies of --resnapshot")
        db.execute("UPDATE accounts SET name = 'on the first' WHERE id % 10 = 1")
        confirm_everything(run, db)
        held = lsn_of(db.execute("SELECT pg_current_wal_lsn()::text")[0][0])
        first.stop(mode="immediate")
        second.restart_stopped()
        second.promote()
        with psycopg.connect(second.dsn("shop"), autocommit=True) as conn:
            while lsn_of(conn.execute("SELECT pg_current_wal_lsn()::text"
                                      ).fetchone()[0]) <= held:
                conn.execute("UPDATE accounts SET name = 'on the second' "
                             "WHERE id % 10 = 2")
        assert run.wait_exit(120) == 2, run.log_tail()
        # floe reconnects within half a second: if it met the second before the loop
        # above wrote past what Bronze holds, it refused because the source's history
        # went backwards (a CI run). Either way it refused; run it again, now that the
        # second is past Bronze's position for certain, for the timeline check.
        if "the source is on timeline 2 begun at LSN" not in run.log_text():
            assert "the source's WAL ends at" in run.log_text(), run.log_tail()
            bronze = run.count("public.accounts")
            run.start()
            assert run.wait_exit(120) == 2, run.log_tail()
            assert run.count("public.accounts") == bronze
        assert "the source is on timeline 2 begun at LSN" in run.log_text(), \
            run.log_tail()
        assert "whose history does not hold timeline 2 begun at LSN" in \
            run.log_text(), run.log_tail()
