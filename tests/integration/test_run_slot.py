"""`floe run` refuses to start when continuing would silently miss changes (the slot
it was fed from is gone, or was recreated past what floe confirmed), says how to
recover, and `--resnapshot` recovers; an idle source does not hold WAL back; an
empty table is copied (and read back by both readers). Uses floerun.py."""

from __future__ import annotations

import time

from floerun import check_order, floe, fold  # noqa: F401
from pgcluster import contrib_or_skip


def lsn_of(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def make_table(pg, rows: int = 5) -> None:
    pg.execute("CREATE TABLE public.acct (id int PRIMARY KEY, owner text)")
    pg.execute(f"INSERT INTO acct SELECT g, 'o' || g FROM generate_series(1, {rows}) g")


def started_and_caught_up(run, n: int) -> None:
    run.start()
    run.wait_until(lambda: run.count("public.acct") >= n, 60,
                   what=f"{n} rows in bronze acct")


def test_a_dropped_slot_stops_floe_until_resnapshot(floe, pg, duckdb_con):
    make_table(pg)
    run = floe()
    started_and_caught_up(run, 5)
    pg.execute("INSERT INTO acct VALUES (6, 'o6')")
    run.wait_until(lambda: run.count("public.acct") >= 6, 60, what="row 6")
    run.stop()

    # the slot disappears while floe is down, and changes happen meanwhile
    pg.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
    pg.execute("UPDATE acct SET owner = 'changed' WHERE id = 1")
    run.start()
    rc = run.wait_exit(60)
    assert rc == 2, run.log_tail()
    log = run.log_text()
    assert f'replication slot "{run.slot}" does not exist' in log
    assert "floe run --resnapshot" in log
    # nothing was written by the refused start, and no slot was created behind our back
    assert run.count("public.acct") == 6
    assert pg.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s",
                      (run.slot,))[0][0] == 0

    run.start("--resnapshot")
    run.wait_until(lambda: run.count("public.acct") >= 13, 60,
                   what="the second copy (a t row, then 6 more r rows)")
    pg.execute("INSERT INTO acct VALUES (7, 'o7')")
    run.wait_until(lambda: run.count("public.acct") >= 14, 60, what="row 7 after recovery")
    run.stop()
    rows = run.rows(duckdb_con, "public.acct")
    check_order("public.acct", rows)
    assert sum(r["cdc_op"] == "r" for r in rows) == 11  # 5 + 6
    # the copy again starts with a t row at its own position, before its r rows
    recopy = [r for r in rows if r["cdc_op"] in "rt"][5:]
    assert recopy[0]["cdc_op"] == "t" and recopy[0]["cdc_seq"] == 0
    assert {r["cdc_commit_lsn"] for r in recopy} == {recopy[0]["cdc_commit_lsn"]}
    state = fold(rows, ["id"])
    expected = {(i,): {"id": i, "owner": f"o{i}"} for i in range(2, 8)}
    expected[(1,)] = {"id": 1, "owner": "changed"}
    assert state == expected

    # and a plain restart afterwards is accepted again (the recovery is recorded)
    run.start()
    pg.execute("INSERT INTO acct VALUES (8, 'o8')")
    run.wait_until(lambda: run.count("public.acct") >= 15, 60, what="row 8")
    run.stop()


def test_a_recreated_slot_is_refused(floe, pg, duckdb_con):
    make_table(pg)
    run = floe()
    started_and_caught_up(run, 5)
    run.stop()
    # recreated past floe's confirmed position: the changes in between were never
    # sent to floe
    pg.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
    pg.execute("INSERT INTO acct VALUES (100, 'lost')")
    pg.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (run.slot,))
    pg.execute("INSERT INTO acct VALUES (101, 'after')")
    run.start()
    assert run.wait_exit(60) == 2, run.log_tail()
    log = run.log_text()
    assert "past what floe confirmed" in log and "--resnapshot" in log
    assert run.count("public.acct") == 5


def test_an_idle_source_lets_the_slot_advance(floe, pg, duckdb_con):
    make_table(pg)
    run = floe(tables=["public.acct"])
    started_and_caught_up(run, 5)
    first = run.slot_confirmed_flush()
    # WAL written by something floe does not replicate (a table not published)
    pg.execute("CREATE TABLE public.unpublished_noise (x int)")
    pg.execute("INSERT INTO unpublished_noise SELECT generate_series(1, 20000)")
    target = lsn_of(pg.execute("SELECT pg_current_wal_lsn()::text")[0][0])
    run.wait_until(lambda: (run.slot_confirmed_flush() or 0) >= target, 60,
                   what="the slot's confirmed_flush_lsn to pass the unrelated WAL")
    assert run.slot_confirmed_flush() > first
    run.stop()
    # nothing of the unpublished table reached Bronze
    assert not run.exists("public.unpublished_noise")


def test_an_empty_table_is_copied_and_readable(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE public.empty_one (id bigint PRIMARY KEY, v text)")
    run = floe()
    run.start()
    run.wait_until(lambda: run.exists("public.empty_one") and
                   run.load("public.empty_one").current_snapshot() is not None, 60,
                   what="the empty table's copy to commit")
    summary = run.load("public.empty_one").current_snapshot().summary
    assert summary.get("floe.snapshot-lsn") == summary.get("floe.commit-lsn")
    assert run.rows(duckdb_con, "public.empty_one") == []
    pg.execute("INSERT INTO empty_one VALUES (1, 'x')")
    run.wait_until(lambda: run.count("public.empty_one") >= 1, 60, what="the insert")
    run.stop()
    rows = run.rows(duckdb_con, "public.empty_one")
    assert [(r["cdc_op"], r["id"], r["v"]) for r in rows] == [("c", 1, "x")]


# -- servers of their own: a small max_slot_wal_keep_size, a restore from a backup --

def source_rows(db) -> dict[tuple, dict]:
    return {(i,): {"id": i, "owner": o}
            for i, o in db.execute("SELECT id, owner FROM acct")}


def test_a_lost_slot_is_refused_and_resnapshot_recovers(floe_bin, tmp_path, duckdb_con):
    from conftest import PgDatabase
    from floerun import FloeRun, duckdb_setup
    from pgcluster import contrib_or_skip, PgCluster

    duckdb_setup(duckdb_con)
    cluster = PgCluster({"max_slot_wal_keep_size": "'32MB'"}).start()
    run = None
    try:
        db = PgDatabase(cluster, "postgres")
        make_table(db)
        run = FloeRun(floe_bin, db, tmp_path / "floe")
        started_and_caught_up(run, 5)
        run.stop()

        # changes while floe is down, then far more WAL (another database) than the
        # slot may keep: a checkpoint removes what it still needed
        db.execute("UPDATE acct SET owner = 'while-down' WHERE id = 1")
        db.execute("DELETE FROM acct WHERE id = 2")
        db.execute("INSERT INTO acct VALUES (6, 'o6')")
        db.execute('CREATE DATABASE "noise"')
        noise = PgDatabase(cluster, "noise")
        noise.execute("CREATE TABLE filler (pad text)")
        status = None
        for _ in range(30):
            noise.execute("INSERT INTO filler SELECT repeat('x', 1000) "
                          "FROM generate_series(1, 20000)")
            noise.execute("SELECT pg_switch_wal()")
            noise.execute("CHECKPOINT")
            status = db.execute("SELECT wal_status FROM pg_replication_slots "
                                "WHERE slot_name = %s", (run.slot,))[0][0]
            if status == "lost":
                break
        assert status == "lost", status

        run.start()
        assert run.wait_exit(60) == 2, run.log_tail()
        log = run.log_text()
        assert "wal_status = lost" in log and "floe run --resnapshot" in log, log
        assert run.count("public.acct") == 5  # the refused start wrote nothing

        # the recovery command the message names: drops the lost slot, copies again
        run.start("--resnapshot")
        run.wait_until(lambda: run.count("public.acct") >= 11, 60,
                       what="the second copy (a t row, then 5 more r rows)")
        db.execute("INSERT INTO acct VALUES (7, 'o7')")
        db.execute("UPDATE acct SET owner = 'after' WHERE id = 3")
        run.wait_until(lambda: run.count("public.acct") >= 13, 60,
                       what="the changes after recovery")
        run.stop()
        assert db.execute("SELECT wal_status FROM pg_replication_slots WHERE "
                          "slot_name = %s", (run.slot,))[0][0] != "lost"
        rows = run.rows(duckdb_con, "public.acct")
        check_order("public.acct", rows)
        # in step with the source: the row deleted while the slot was lost (2) is
        # gone too, thanks to the t row that starts the copy
        assert fold(rows, ["id"]) == source_rows(db)
    finally:
        if run is not None:
            run.kill()
        cluster.destroy()


def test_a_source_restored_from_a_backup_is_refused(floe_bin, tmp_path, duckdb_con):
    import shutil
    import subprocess

    from conftest import PgDatabase
    from floerun import FloeRun
    from pgcluster import PgCluster

    cluster = PgCluster().start()
    run = None
    try:
        db = PgDatabase(cluster, "postgres")
        make_table(db)
        run = FloeRun(floe_bin, db, tmp_path / "floe")
        started_and_caught_up(run, 5)
        run.stop()
        # a cold backup, slot included
        cluster.stop()
        backup = cluster.base / "backup"
        subprocess.run(["cp", "-a", str(cluster.data_dir), str(backup)], check=True)
        cluster.restart()

        run.start()
        db.execute("INSERT INTO acct SELECT g, 'later' FROM generate_series(100, 400) g")
        run.wait_until(lambda: run.count("public.acct") >= 306, 60,
                       what="the changes after the backup")
        run.stop()

        # the database is restored from the backup: its history (and the slot) went
        # back to before those 301 rows, which Bronze holds
        cluster.stop()
        shutil.rmtree(cluster.data_dir)
        backup.rename(cluster.data_dir)
        cluster.restart()
        for args in ((), ("--resnapshot",)):
            run.start(*args)
            assert run.wait_exit(60) == 2, run.log_tail()
            log = run.log_text().rsplit("===== floe run start", 1)[-1]
            assert "went backwards" in log and "new `service:` name" in log, log
        assert run.count("public.acct") == 306  # nothing was written
    finally:
        if run is not None:
            run.kill()
        cluster.destroy()


def test_resnapshot_on_a_healthy_slot_says_what_it_replaces(floe, pg, duckdb_con):
    """--resnapshot on a slot that could still stream its changes: they reach Bronze
    only as the copy's rows (the latest state is right: the fold equals psql), not as
    change rows, and floe says so and what to run to keep them (break-it finding:
    the changes vanished from the changelog without a word)."""
    make_table(pg)
    run = floe()
    started_and_caught_up(run, 5)
    run.stop()
    pg.execute("UPDATE acct SET owner = 'while stopped' WHERE id = 2")
    pg.execute("DELETE FROM acct WHERE id = 3")
    run.start("--resnapshot")
    run.wait_until(lambda: "--resnapshot is done" in run.log_text(), 60, what="the copy")
    run.stop()
    log = run.log_text()
    assert "--resnapshot: replication slot" in log and "--backfill-table" in log, \
        run.log_tail()
    state = fold(run.rows_pyiceberg("public.acct"), ["id"])
    source = {(i,): {"id": i, "owner": o} for i, o in pg.execute("SELECT id, owner FROM acct")}
    assert state == source


def test_resnapshot_copies_every_table_under_snapshot_never(floe, pg, duckdb_con):
    """Break-it (session 17) B1: with `source.snapshot: never`, `--resnapshot` said
    "every published table was copied again" and copied nothing, so the changes made
    while the slot was gone were missing for good. It copies every published table,
    whatever source.snapshot says (docs/running.md, Recovery)."""
    make_table(pg, rows=1)
    run = floe(snapshot="never")
    run.start()
    run.wait_until(lambda: "streaming slot" in run.log_text(), 60, what="streaming")
    pg.execute("INSERT INTO acct VALUES (2, 'o2')")
    run.wait_until(lambda: run.count("public.acct") >= 1, 60, what="row 2 streamed")
    run.stop()
    pg.execute("INSERT INTO acct VALUES (3, 'o3')")
    pg.execute("UPDATE acct SET owner = 'changed' WHERE id = 1")
    pg.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
    run.start()
    assert run.wait_exit(60) == 2, run.log_tail()
    assert "floe run --resnapshot" in run.log_text()

    run.start("--resnapshot")
    run.wait_until(lambda: "--resnapshot is done" in run.log_text(), 60, what="the copy")
    pg.execute("INSERT INTO acct VALUES (4, 'o4')")
    run.wait_until(lambda: (4,) in fold(run.rows(duckdb_con, "public.acct"), ["id"]), 60,
                   what="row 4 after the recovery")
    run.stop()
    rows = run.rows(duckdb_con, "public.acct")
    check_order("public.acct", rows)
    assert sum(r["cdc_op"] == "r" for r in rows) == 3, rows  # the copy: ids 1, 2, 3
    assert [r["cdc_op"] for r in rows if r["cdc_op"] in "rt"][0] == "t", rows
    assert fold(rows, ["id"]) == {
        (1,): {"id": 1, "owner": "changed"}, (2,): {"id": 2, "owner": "o2"},
        (3,): {"id": 3, "owner": "o3"}, (4,): {"id": 4, "owner": "o4"}}


def test_a_slot_of_another_kind_under_the_name_is_refused_before_any_copy(floe, pg,
                                                                         duckdb_con):
    """Break-it (session 17) B2: a slot under the configured name that floe cannot
    stream from (another output plugin, physical, another database's) passed the
    start-up checks: floe copied every table, then retried START_REPLICATION for ever.
    It is refused at once, with or without --resnapshot, and left alone."""
    make_table(pg)
    # The physical slot first: a server without test_decoding skips the rest.
    for create in ("SELECT pg_create_physical_replication_slot(%s, true)",
                   "SELECT pg_create_logical_replication_slot(%s, 'test_decoding')"):
        run = floe()
        contrib_or_skip(pg, create, "test_decoding", (run.slot,))
        try:
            for args in ((), ("--resnapshot",)):
                run.start(*args)
                assert run.wait_exit(60) == 2, run.log_tail()
                log = run.log_text()
                assert f"pg_drop_replication_slot('{run.slot}')" in log, log
                assert ("test_decoding" in log) or ("physical slot" in log), log
                assert "reconnecting" not in log, log
                assert "copying" not in log, log
            assert pg.execute("SELECT count(*) FROM pg_replication_slots WHERE "
                              "slot_name = %s", (run.slot,))[0][0] == 1
        finally:
            pg.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
