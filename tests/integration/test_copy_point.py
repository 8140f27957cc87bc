"""Copies made through an exported snapshot, and the two ways PostgreSQL's snapshot
semantics can make one wrong: where the copy sits among the stream's changes, and a
table rewritten after the snapshot was taken.

Where the copy sits: a table is copied through a
temporary slot's exported snapshot, whose consistent point C is where that slot
starts decoding: the snapshot holds the transactions whose commit record lies
before C, and a transaction whose commit record starts exactly at C is not in it
(the server decodes it instead). Under a steady stream of small commits the record
right after the slot's own running-transactions record is often such a commit.
floe's copy must sit below C: a copy "at C" took that transaction for part of the
copy, so `floe run` skipped it (an initial copy: the update lost in Bronze) or
ordered it before the copy's rows (a copy again: the copy's older row won in
Silver).

A rewrite (ALTER ... TYPE, VACUUM FULL, TRUNCATE) committed after the snapshot
and before the copy reads the table leaves the snapshot an empty heap: floe must
notice and copy again.

The oracle is the source: after the workload, each pipeline's Bronze, folded, and
its Silver equal psql; pg_walinspect says how many copies met a commit at C."""

from __future__ import annotations

import random
import re
import threading
import time

import psycopg

from floerun import floe, fold, lsn_int  # noqa: F401
from oracle import check_silver
from pgcluster import contrib_or_skip
from test_divergences import wait_flushed
from test_silver import silver

STARTS = 10
WRITERS = 3


def test_a_commit_right_at_the_copys_consistent_point_lands_after_the_copy(floe, pg):
    """Ten pipelines (each its own slot and warehouse) start, one after another,
    while three writers commit single-row updates (n = n + 1) in overlapping
    transactions; each copies the table at a consistent point taken in the middle
    of that stream (pg_walinspect finds a COMMIT record at a third to a half of
    those points). Then, per pipeline, every row's values in Bronze go up by one
    from its copied value (no update lost or repeated), the fold equals psql, and
    so does Silver. Before the fix the first pipeline already lost an update."""
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, n int NOT NULL)")
    pg.execute("INSERT INTO acc SELECT g, 0 FROM generate_series(1, 50) g")
    contrib_or_skip(pg, "CREATE EXTENSION IF NOT EXISTS pg_walinspect", "pg_walinspect")
    stop = threading.Event()
    commits = [0]

    def write():
        # Each transaction stays open a moment after its update: the slot's
        # running-transactions record then often falls inside it, and the next
        # record is its commit.
        rng = random.Random(threading.get_ident())
        with psycopg.connect(pg.dsn) as c:
            i = 0
            while not stop.is_set():
                c.execute("UPDATE acc SET n = n + 1 WHERE id = %s", (rng.randrange(50) + 1,))
                time.sleep(0.002)
                c.commit()
                i += 1
        commits[0] += i

    writers = [threading.Thread(target=write) for _ in range(WRITERS)]
    for w in writers:
        w.start()
    runs = []
    try:
        for k in range(STARTS):
            run = floe(service=f"cp{k}", tables=["public.acc"])
            run.start().wait_streaming()
            runs.append(run)
    finally:
        stop.set()
        for w in writers:
            w.join(30)
    assert commits[0] > 100, commits
    at_commit = 0
    for run in runs:
        point = re.search(r"copying 1 table\(s\) at LSN ([0-9A-F]+/[0-9A-F]+)",
                          run.log_text()).group(1)
        rec = pg.execute("SELECT resource_manager, record_type FROM "
                         "pg_get_wal_record_info(%s::pg_lsn)", (point,))
        at_commit += rec[0][0] == "Transaction" and rec[0][1] == "COMMIT"
    source = {(r[0],): r[1] for r in pg.execute("SELECT id, n FROM acc")}
    for run in runs:
        wait_flushed(run, pg)
        run.stop()
        rows = sorted(run.rows_pyiceberg("public.acc"),
                      key=lambda r: (r["cdc_commit_lsn"], r["cdc_seq"]))
        # Every update adds one: per row, the copy's value and then each update's
        # must go up by one, or an update was lost (or landed twice).
        steps: dict[int, list[int]] = {}
        for r in rows:
            steps.setdefault(r["id"], []).append(r["n"])
        gaps = {i: v for i, v in steps.items()
                if any(b - a != 1 for a, b in zip(v, v[1:]))}
        assert not gaps, (f"{run.service}: updates lost or repeated in Bronze "
                          f"({at_commit} of {STARTS} copies had a commit at their "
                          f"consistent point): {gaps}")
        got = {k: v["n"] for k, v in fold(rows, ["id"]).items()}
        assert got == source, (
            f"{run.service}: Bronze folded != psql ({at_commit} of {STARTS} copies had a "
            f"commit at their consistent point): "
            f"{ {k: (got.get(k), source.get(k)) for k in source if got.get(k) != source[k]} }")
        silver(run)
        t = run.catalog().load_table(("silver", run.service, "public", "acc"))
        got = {(r["id"],): r["n"] for r in t.scan().to_arrow().to_pylist()}
        assert got == source, f"{run.service}: Silver != psql"
    print(f"{at_commit} of {STARTS} copies had a commit at their consistent point")


def test_a_table_rewritten_between_the_copys_snapshot_and_its_read_is_copied_again(
        floe, pg, duckdb_con):
    """A rewrite is not MVCC-safe: a table rewritten (here `ALTER ... TYPE bigint`)
    by a transaction that commits after the copy's snapshot was exported, but before
    the copy reads the table, reads as empty through that snapshot. The failpoint
    copy.after-snapshot holds floe's first copy right there while the ALTER commits.
    floe must notice, throw the copy away and copy again: Silver (PyIceberg and
    DuckDB) equals psql, every row present."""
    pg.execute("CREATE TABLE rw (id int PRIMARY KEY, v int, w text)")
    pg.execute("INSERT INTO rw SELECT g, g, 'w' || g FROM generate_series(1, 200) g")
    run = floe(tables=["public.rw"])
    run.start(env={"FLOE_FAILPOINT": "copy.after-snapshot=sleep:3000"})
    run.wait_until(lambda: "failpoint copy.after-snapshot (hit 1): sleeping" in
                   run.log_text(), 60, what="the copy to pause after its snapshot",
                   interval=0.05)
    pg.execute("ALTER TABLE rw ALTER COLUMN v TYPE bigint")
    pg.execute("UPDATE rw SET w = 'after' WHERE id <= 10")
    run.wait_streaming(timeout=120)
    wait_flushed(run, pg)
    assert "was rewritten" in run.log_text(), run.log_tail()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rw", ["id"])
    run.stop()
