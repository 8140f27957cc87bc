"""`floe run` refuses to start when continuing would silently miss changes (the slot
it was fed from is gone, or was recreated past what floe confirmed), says how to
recover, and `--resnapshot` recovers; an idle source does not hold WAL back; an
empty table is copied (and read back by both readers). Uses floerun.py."""

from __future__ import annotations

import time

from floerun import check_order, floe, fold  # noqa: F401


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
    run.wait_until(lambda: run.count("public.acct") >= 12, 60,
                   what="the second copy (6 more r rows)")
    pg.execute("INSERT INTO acct VALUES (7, 'o7')")
    run.wait_until(lambda: run.count("public.acct") >= 13, 60, what="row 7 after recovery")
    run.stop()
    rows = run.rows(duckdb_con, "public.acct")
    check_order("public.acct", rows)
    assert sum(r["cdc_op"] == "r" for r in rows) == 11  # 5 + 6
    state = fold(rows, ["id"])
    expected = {(i,): {"id": i, "owner": f"o{i}"} for i in range(2, 8)}
    expected[(1,)] = {"id": 1, "owner": "changed"}
    assert state == expected

    # and a plain restart afterwards is accepted again (the recovery is recorded)
    run.start()
    pg.execute("INSERT INTO acct VALUES (8, 'o8')")
    run.wait_until(lambda: run.count("public.acct") >= 14, 60, what="row 8")
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
