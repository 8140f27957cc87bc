"""Watermark backfill in `floe run` (docs/running.md, "Tables found later"): a table
added to the publication while floe streams is copied in primary-key chunks, each
bracketed by low / high watermarks (`pg_logical_emit_message`), while the stream keeps
flowing for every table, the new one included. Writers keep changing both the new
table and another one throughout. Checked against a real PostgreSQL with PyIceberg
and DuckDB (they must agree): the fold of Bronze equals the source table, no key gets
two `r` rows in one backfill, and the other table's changes kept landing between the
backfill's first and last chunk commits. A second test SIGKILLs floe several times
in the middle of a backfill: it resumes after the last committed chunk, with no gap
and no duplicate."""

from __future__ import annotations

import collections
import json
import os
import random
import threading
import time
import traceback
from pathlib import Path

import psycopg
import pytest

from floerun import check_order, floe, fold  # noqa: F401
from test_maintenance import OLD, local, maint
from oracle import check_silver
from test_divergences import wait_flushed
from test_silver import silver

SETUP = """
CREATE TABLE big (id bigint PRIMARY KEY, grp int NOT NULL, v text, amount numeric(12,2));
INSERT INTO big SELECT g, g % 97, 'row ' || g, g * 1.25 FROM generate_series(1, 50000) g;
CREATE TABLE other (id int PRIMARY KEY, n int);
INSERT INTO other SELECT g, 0 FROM generate_series(1, 1000) g;
CREATE PUBLICATION pub FOR TABLE other;
"""
BIG_COLS = ["id", "grp", "v", "amount"]
OTHER_COLS = ["id", "n"]


class Writers(threading.Thread):
    """Inserts, updates, deletes and key changes in `big` and `other`, one session,
    short transactions, some touching both tables."""

    def __init__(self, dsn: str, seed: int):
        super().__init__(daemon=True)
        self.dsn = dsn
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.commits = 0
        self.next_id = 10_000_000

    def run(self):
        try:
            with psycopg.connect(self.dsn, autocommit=False) as conn:
                while not self.stop_event.is_set():
                    self.transaction(conn)
                    time.sleep(self.rng.uniform(0, 0.003))
        except Exception:
            self.error = traceback.format_exc()

    def transaction(self, conn):
        rng = self.rng
        for _ in range(rng.randint(1, 3)):
            kind = rng.choices(["ins", "ins_gap", "upd", "del", "key", "other_upd",
                                "other_ins", "other_del"], [3, 2, 6, 2, 1, 6, 2, 1])[0]
            if kind == "ins":
                self.next_id += 1
                conn.execute("INSERT INTO big VALUES (%s, 1, 'new', 1.5)", (self.next_id,))
            elif kind == "ins_gap":
                # Lands anywhere in the key range: ahead of the backfill or behind it.
                conn.execute("INSERT INTO big VALUES (%s, 2, 'gap', 2.5) "
                             "ON CONFLICT (id) DO UPDATE SET v = 'gap upd'",
                             (rng.randint(1, 60_000),))
            elif kind == "upd":
                conn.execute("UPDATE big SET v = %s, amount = amount + 1 WHERE id = %s",
                             (f"upd {rng.random():.6f}", rng.randint(1, 50_000)))
            elif kind == "del":
                conn.execute("DELETE FROM big WHERE id = %s", (rng.randint(1, 50_000),))
            elif kind == "key":
                self.next_id += 1
                conn.execute("UPDATE big SET id = %s WHERE id = %s",
                             (self.next_id, rng.randint(1, 50_000)))
            elif kind == "other_upd":
                conn.execute("UPDATE other SET n = n + 1 WHERE id = %s",
                             (rng.randint(1, 1200),))
            elif kind == "other_ins":
                conn.execute("INSERT INTO other VALUES (%s, 0) ON CONFLICT DO NOTHING",
                             (rng.randint(1001, 1200),))
            else:
                conn.execute("DELETE FROM other WHERE id = %s", (rng.randint(1, 1200),))
        conn.commit()
        self.commits += 1


def with_chunk_rows(run, n: int):
    """Sets source.backfill_chunk_rows in the run's pipeline file."""
    text = run.config_path.read_text()
    assert "  snapshot: initial\n" in text
    run.config_path.write_text(
        text.replace("  snapshot: initial\n",
                     f"  snapshot: initial\n  backfill_chunk_rows: {n}\n"))


def publish_and_commit_inside_the_window(run, pg, statement: str) -> None:
    """Starts floe with its first chunk pausing right after the chunk's snapshot
    (`backfill.after-snapshot`), adds `docs` to the publication and runs `statement`
    (on docs: the body is not sent) during the pause: it commits inside the chunk's
    window, after its snapshot."""
    run.start(env={"FLOE_FAILPOINT": "backfill.after-snapshot=sleep:3000"})
    run.wait_streaming()
    pg.execute("ALTER PUBLICATION pub ADD TABLE docs")
    run.wait_until(lambda: "failpoint backfill.after-snapshot" in run.log_text(), 60,
                   what="the first chunk paused after its snapshot", interval=0.05)
    pg.execute(statement)


def publish_and_pause_before_the_second_chunk(run, pg, ms: int) -> None:
    """Starts floe with chunks of two rows, adds `docs` to the publication and waits
    until floe pauses for `ms` before its second chunk (`backfill.before-chunk`)."""
    with_chunk_rows(run, 2)
    run.start(env={"FLOE_FAILPOINT": f"backfill.before-chunk@2=sleep:{ms}"})
    run.wait_streaming()
    pg.execute("ALTER PUBLICATION pub ADD TABLE docs")
    run.wait_until(lambda: "failpoint backfill.before-chunk" in run.log_text(), 60,
                   what="floe paused before the second chunk", interval=0.05)


def backfill_records(run, table: str) -> list[tuple[int, dict]]:
    """(timestamp_ms, floe.backfill) of every snapshot of `table` that has one."""
    out = []
    for snap in run.load(table).snapshots():
        value = (snap.summary or {}).get("floe.backfill")
        if value is not None:
            out.append((snap.timestamp_ms, json.loads(value)))
    return out


def latest_backfill(run, table: str) -> dict | None:
    records = backfill_records(run, table)
    return records[-1][1] if records else None


def text(v):
    return None if v is None else str(v)


def source_state(pg, table: str, cols: list[str]) -> dict:
    with pg.connect() as conn:
        cur = conn.execute(f"SELECT {', '.join(cols)} FROM {table}")
        return {(r[0],): tuple(text(v) for v in r) for r in cur}


def bronze_state(rows: list[dict], cols: list[str]) -> dict:
    return {k: tuple(text(v[c]) for c in cols) for k, v in fold(rows, ["id"]).items()}


def finish(run, pg, duckdb_con, writers):
    """Stops the writers, waits for a marker transaction on both tables, stops floe,
    and checks both tables: order, commit LSNs, fold == source, one `r` per key of
    `big`."""
    writers.stop_event.set()
    writers.join(30)
    assert writers.error is None, writers.error
    with pg.connect(autocommit=False) as conn:
        conn.execute("INSERT INTO big VALUES (-1, 0, 'marker', 0)")
        conn.execute("INSERT INTO other VALUES (-1, 0)")
        conn.commit()
    for table in ("public.big", "public.other"):
        run.wait_until(lambda: run.has_row(table, id=-1), 90,
                       what=f"the final marker in Bronze {table}", interval=0.5)
    run.stop()
    out = {}
    for table, cols in (("big", BIG_COLS), ("other", OTHER_COLS)):
        rows = run.rows(duckdb_con, f"public.{table}")  # PyIceberg and DuckDB agree
        check_order(table, rows)
        run.check_commit_lsn(f"public.{table}", rows)
        source = source_state(pg, table, cols)
        folded = bronze_state(rows, cols)
        assert folded.keys() == source.keys(), (
            table, sorted(folded.keys() - source.keys())[:5],
            sorted(source.keys() - folded.keys())[:5])
        bad = [k for k in source if folded[k] != source[k]]
        assert not bad, (table, len(bad), [(k, folded[k], source[k]) for k in bad[:3]])
        out[table] = rows
    big = out["big"]
    r_keys = collections.Counter(r["id"] for r in big if r["cdc_op"] == "r")
    dupes = [k for k, n in r_keys.items() if n > 1]
    assert not dupes, f"keys with more than one r row in one backfill: {dupes[:10]}"
    assert len(r_keys) > 40_000, len(r_keys)  # most rows came from the backfill
    # The watermarks never reach the audit table.
    if run.exists("pg_logical_messages"):
        prefixes = {r["prefix"] for r in run.rows_pyiceberg("pg_logical_messages")}
        assert "floe.watermark" not in prefixes, prefixes
    return out


def test_table_added_while_streaming_is_backfilled_without_stopping_the_stream(
        floe, pg, duckdb_con):
    pg.execute(SETUP)
    run = floe(publication="pub", interval="300ms")
    with_chunk_rows(run, 50)
    run.start().wait_streaming()
    run.wait_until(lambda: run.count("public.other") >= 1000, 60,
                   what="the initial copy of public.other")
    writers = Writers(pg.dsn, seed=11)
    writers.start()
    try:
        run.wait_until(lambda: writers.commits > 20, 30, what="writers running")
        pg.execute("ALTER PUBLICATION pub ADD TABLE big")
        run.wait_until(lambda: (latest_backfill(run, "public.big") or {}).get("done"),
                       120, what="the backfill of public.big to finish", interval=0.3)
        records = backfill_records(run, "public.big")
    finally:
        writers.stop_event.set()
    rows = finish(run, pg, duckdb_con, writers)

    # Incremental: the chunks were committed over several checkpoints, each record
    # one step further, all of one backfill.
    assert len({rec["id"] for _, rec in records}) == 1, records
    chunk_commits = [(ts, rec) for ts, rec in records if rec["chunks"] > 0]
    assert len(chunk_commits) >= 3, records
    assert [rec["chunks"] for _, rec in chunk_commits] == \
        sorted(rec["chunks"] for _, rec in chunk_commits)
    first_ts, last_ts = chunk_commits[0][0], chunk_commits[-1][0]
    # The stream did not stop: the other table committed changes between the
    # backfill's first and last chunk commits ...
    other_commits = [s for s in run.load("public.other").snapshots()
                     if first_ts < s.timestamp_ms < last_ts]
    assert other_commits, "no commit of public.other during the backfill"
    # ... and, in source order, its changes sit between the first and last chunk.
    r_lsns = [r["cdc_commit_lsn"] for r in rows["big"] if r["cdc_op"] == "r"]
    between = [r for r in rows["other"] if r["cdc_op"] != "r"
               and min(r_lsns) < r["cdc_commit_lsn"] < max(r_lsns)]
    assert between, "no change of public.other between the first and last chunk"
    # So did the new table's own changes: streamed rows inside the backfill.
    assert any(r["cdc_op"] in "cud" and min(r_lsns) < r["cdc_commit_lsn"] < max(r_lsns)
               for r in rows["big"])
    assert "backfilling it in chunks" in run.log_text()
    # Only public.other's initial copy went through an exported snapshot.
    assert run.log_text().count("table(s) at LSN") == 1, run.log_tail()


def test_sigkill_during_a_backfill_resumes_after_the_last_committed_chunk(
        floe, pg, duckdb_con):
    pg.execute(SETUP)
    run = floe(publication="pub", interval="300ms")
    with_chunk_rows(run, 25)
    run.start().wait_streaming()
    run.wait_until(lambda: run.count("public.other") >= 1000, 60,
                   what="the initial copy of public.other")
    writers = Writers(pg.dsn, seed=23)
    writers.start()
    kills = 0
    try:
        run.wait_until(lambda: writers.commits > 20, 30, what="writers running")
        pg.execute("ALTER PUBLICATION pub ADD TABLE big")
        seen = 0
        while kills < 3:
            # Kill once a commit holds more chunks than the last kill saw, before
            # the backfill is done.
            def advanced():
                rec = latest_backfill(run, "public.big") if run.exists("public.big") \
                    else None
                return rec if rec and rec["chunks"] > seen else None
            rec = run.wait_until(advanced, 60, what=f"backfill progress past {seen} "
                                 "chunk(s)", interval=0.1)
            assert not rec["done"], f"the backfill finished after {kills} kill(s)"
            assert writers.error is None, writers.error
            run.kill()
            kills += 1
            seen = rec["chunks"]
            run.start()
        run.wait_until(lambda: (latest_backfill(run, "public.big") or {}).get("done"),
                       120, what="the backfill of public.big to finish", interval=0.3)
        records = backfill_records(run, "public.big")
    finally:
        writers.stop_event.set()
    finish(run, pg, duckdb_con, writers)
    assert kills == 3
    # One backfill, resumed (not restarted) after each kill.
    assert len({rec["id"] for _, rec in records}) == 1, records
    assert run.log_text().count("resuming its backfill") >= 3
    chunks = [rec["chunks"] for _, rec in records]
    assert chunks == sorted(chunks), chunks


DOCS = """
    CREATE TABLE docs (id int PRIMARY KEY, body text, n int);
    ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;
    INSERT INTO docs SELECT d, (SELECT string_agg(md5(random()::text || i || d), '')
                                FROM generate_series(1, 300) i), 0
      FROM generate_series(1, {rows}) d;
"""


def docs_end_to_end(run, pg, duckdb_con, moved_to: int) -> None:
    """Bronze's `c` of the moved key lacks the body; a later `r` row of that key holds
    it; the fold of Bronze, and Silver (PyIceberg and DuckDB), equal the source."""
    run.wait_until(lambda: (latest_backfill(run, "public.docs") or {}).get("done"), 60,
                   what="the backfill of public.docs")
    run.stop()
    rows = run.rows(duckdb_con, "public.docs")
    check_order("docs", rows)
    moved = [(r["cdc_op"], r["body"] is None, r["cdc_unchanged"])
             for r in rows if r["id"] == moved_to]
    assert moved[-2:] == [("c", True, ["body"]), ("r", False, None)], moved
    cols = ["id", "body", "n"]
    assert bronze_state(rows, cols) == source_state(pg, "docs", cols)
    # Silver reads the body from the `r` row, not null.
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])


def test_a_key_changed_inside_the_window_keeps_its_unchanged_toast_value(
        floe, pg, duckdb_con):
    """A key-changing update that leaves a TOAST value unchanged sends the new row
    without it. Committed inside a chunk's window, after the chunk's snapshot: the
    chunk holds the old key (which the update's delete beats) and not the new one, so
    no `r` row brought the value, and Silver read null (soak seed 1805121841). The new
    key is now selected again with a later chunk."""
    pg.execute(SETUP + DOCS.format(rows=3))
    run = floe(publication="pub", interval="300ms")
    publish_and_commit_inside_the_window(run, pg, "UPDATE docs SET id = 1000 WHERE id = 2")
    docs_end_to_end(run, pg, duckdb_con, 1000)


@pytest.mark.parametrize("statements,moved_to", [
    (["UPDATE docs SET id = 0 WHERE id = 5"], 0),
    (["DELETE FROM docs WHERE id = 1", "UPDATE docs SET id = 1 WHERE id = 5"], 1),
    (["DELETE FROM docs WHERE id = 6", "UPDATE docs SET id = 6 WHERE id = 5"], 6),
], ids=["behind", "into-a-key-deleted-behind", "into-a-key-deleted-ahead"])
def test_a_key_moved_behind_the_backfill_keeps_its_unchanged_toast_value(
        floe, pg, duckdb_con, statements, moved_to):
    """The same between two chunks (chunks of two rows; floe pauses before its
    second one, `backfill.before-chunk`): key 5 moves to a key in a range already
    done (no later chunk selects it), or into a key deleted just before, behind the
    backfill or ahead of it. The delete made that key's history look complete, so
    the chunk row of the key was dropped, or the key never selected again (found by
    the break-it pass)."""
    pg.execute(SETUP + DOCS.format(rows=6))
    run = floe(publication="pub", interval="300ms")
    publish_and_pause_before_the_second_chunk(run, pg, 4000)
    for statement in statements:
        pg.execute(statement)
    docs_end_to_end(run, pg, duckdb_con, moved_to)


def test_a_table_out_of_the_publication_and_back_during_its_backfill_is_copied_again(
        floe, pg, duckdb_con):
    """Soak seed 1005540565: a table removed from the publication and added back
    while its backfill ran (or before floe's next discovery after it) was never
    copied again. The backfill recorded no identity, so the first discovery after it
    took the table as it is now for the one Bronze copied, and the changes made while
    it was out (not in the stream) never reached Bronze or Silver. The backfill now
    records the relation and membership it reads at its start; the rejoin is seen,
    the table copied again (a `t` row), and Silver equals psql."""
    pg.execute(SETUP + DOCS.format(rows=6))
    run = floe(publication="pub", interval="300ms")
    publish_and_pause_before_the_second_chunk(run, pg, 4000)
    # ids 1 and 2 are in Bronze (the first chunk); changed while out of the publication
    pg.execute("ALTER PUBLICATION pub DROP TABLE docs")
    pg.execute("UPDATE docs SET n = 100 WHERE id = 1")
    pg.execute("DELETE FROM docs WHERE id = 2")
    pg.execute("ALTER PUBLICATION pub ADD TABLE docs")
    run.wait_until(lambda: (latest_backfill(run, "public.docs") or {}).get("done"), 60,
                   what="the backfill of public.docs")
    run.wait_until(lambda: "public.docs is not the table Bronze copied" in run.log_text(),
                   60, what="floe to see that public.docs left the publication and came "
                   "back")
    run.wait_until(lambda: any(r["cdc_op"] == "t" and r["cdc_source_tx_id"] is None
                               for r in run.rows_pyiceberg("public.docs")), 60,
                   what="the copy again of public.docs")
    pg.execute("UPDATE docs SET n = 7 WHERE id = 3")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])


def test_a_table_without_a_key_falls_back_to_the_exported_snapshot_copy(
        floe, pg, duckdb_con):
    pg.execute(SETUP + """
        CREATE TABLE nokey (a int, b text);
        INSERT INTO nokey SELECT g, 'b' || g FROM generate_series(1, 300) g;
    """)
    run = floe(publication="pub", interval="300ms")
    run.start().wait_streaming()
    pg.execute("ALTER PUBLICATION pub ADD TABLE nokey")
    pg.execute("INSERT INTO nokey VALUES (301, 'late')")
    run.wait_until(lambda: run.count("public.nokey") >= 301, 60,
                   what="public.nokey's rows in Bronze")
    run.stop()
    rows = run.rows(duckdb_con, "public.nokey")
    check_order("nokey", rows)
    assert sorted((r["a"], r["b"]) for r in rows) == \
        sorted(tuple(r) for r in pg.execute("SELECT a, b FROM nokey"))
    assert "public.nokey has no primary key or replica identity index: copying it " \
        "through an exported snapshot" in run.log_text()
    assert backfill_records(run, "public.nokey") == []


def test_backfill_table_on_request_backfills_a_held_table_again_while_streaming(
        floe, pg, duckdb_con):
    pg.execute(SETUP)
    run = floe(publication="pub", interval="300ms")
    with_chunk_rows(run, 100)
    run.start().wait_streaming()
    run.wait_until(lambda: run.count("public.other") >= 1000, 60,
                   what="the initial copy of public.other")
    run.stop()
    writers = Writers(pg.dsn, seed=5)
    writers.start()
    run.start("--backfill-table", "public.other")
    try:
        run.wait_until(lambda: (latest_backfill(run, "public.other") or {}).get("done"),
                       60, what="the requested backfill of public.other", interval=0.3)
    finally:
        writers.stop_event.set()
    writers.join(30)
    assert writers.error is None, writers.error
    with pg.connect() as conn:
        conn.execute("INSERT INTO other VALUES (-1, 0)")
    run.wait_until(lambda: run.has_row("public.other", id=-1), 60,
                   what="the marker in Bronze public.other")
    run.stop()
    rows = run.rows(duckdb_con, "public.other")
    check_order("other", rows)
    run.check_commit_lsn("public.other", rows)
    assert bronze_state(rows, OTHER_COLS) == source_state(pg, "other", OTHER_COLS)
    # The copy's r rows, then the backfill's: at most two per key, and the
    # backfill's all after the copy's.
    r_rows = [r for r in rows if r["cdc_op"] == "r"]
    per_key = collections.Counter(r["id"] for r in r_rows)
    assert max(per_key.values()) == 2 and min(per_key.values()) >= 1, per_key
    assert "--backfill-table public.other: backfilling it" in run.log_text()
    # Asking for a table that is not published is refused.
    run.start("--backfill-table", "public.big")
    assert run.wait_exit(60) == 2
    assert "not a table of publication pub" in run.log_text()


def backfill_killed_midway(run, pg) -> dict:
    """Backfills `secrets` (2,000 keys `secret-NNNN`, chunks of 5) and SIGKILLs floe
    before its 200th chunk, checkpoints having committed some chunks; returns the
    last committed progress record."""
    pg.execute(SETUP + """
        CREATE TABLE secrets (k text PRIMARY KEY, v int, alt text NOT NULL UNIQUE);
        INSERT INTO secrets SELECT 'secret-' || lpad(g::text, 4, '0'), g,
                                   'secret-' || lpad((2001 - g)::text, 4, '0')
          FROM generate_series(1, 2000) g;
    """)
    with_chunk_rows(run, 5)
    run.start(env={"FLOE_FAILPOINT": "backfill.before-chunk@200=sleep:600000"})
    run.wait_streaming()
    pg.execute("ALTER PUBLICATION pub ADD TABLE secrets")
    run.wait_until(lambda: "failpoint backfill.before-chunk (hit 200)" in run.log_text(),
                   120, what="the backfill to pause before its 200th chunk")
    run.kill()
    record = latest_backfill(run, "public.secrets")
    assert record is not None and not record["done"] and 1 <= record["chunks"] < 200, \
        record
    return record


def resume_and_check_every_key_read_once(run, pg, duckdb_con, record: dict) -> None:
    run.start()
    run.wait_until(lambda: (latest_backfill(run, "public.secrets") or {}).get("done"), 60,
                   what="the backfill of public.secrets")
    run.stop()
    assert f"resuming its backfill after {record['chunks']} chunk(s)" in run.log_text()
    rows = run.rows(duckdb_con, "public.secrets")
    read = sorted(r["k"] for r in rows if r["cdc_op"] == "r")
    assert read == [f"secret-{g:04d}" for g in range(1, 2001)], read[:3]
    silver(run)
    check_silver(run, pg, duckdb_con, "public.secrets", ["k"])


def test_a_backfill_resumes_after_compaction_and_expiry_while_floe_is_stopped(
        floe, pg, duckdb_con):
    """Case 38 inside a backfill: floe stopped in the middle of one, `floe compact`
    then `floe expire` keeping only the newest snapshot. The compaction's snapshot
    carries the position, not the backfill's progress; the expired snapshots that
    did must not make floe take the table for copied (rows never read)."""
    run = floe(publication="pub", interval="200ms")
    record = backfill_killed_midway(run, pg)
    out = maint(run, "compact", "--table", "public.secrets", "--bronze-only")
    assert "public.secrets" in out, out
    maint(run, "expire", "--table", "public.secrets", "--older-than", "0s",
          "--retain-last", "1")
    resume_and_check_every_key_read_once(run, pg, duckdb_con, record)


def test_a_backfill_whose_table_got_another_key_while_floe_was_stopped_copies_again(
        floe, pg, duckdb_con):
    """floe SIGKILLed in the middle of a backfill by `k`; while it is down the table's
    primary key becomes `alt` (no row changes, so the stream brings nothing of the
    rows). floe resumed after the last `k` done as if it were an `alt` value, which
    skipped the rows whose `alt` sorts before it and that no chunk had read (930 of
    2,000), and recorded the backfill done; the key check that runs every few
    seconds then copied the table again, so nothing was lost in the end, but Bronze
    said "done" without those rows until then. The table is now copied again at
    once, with no backfill."""
    run = floe(publication="pub", interval="200ms")
    backfill_killed_midway(run, pg)
    pg.execute("ALTER TABLE secrets DROP CONSTRAINT secrets_pkey, "
               "ADD PRIMARY KEY (alt)")
    run.start()
    run.wait_until(lambda: any((snap.summary or {}).get("floe.snapshot-lsn") is not None
                               for snap in run.load("public.secrets").snapshots()), 60,
                   what="the copy again of public.secrets")
    run.stop()
    rows = run.rows(duckdb_con, "public.secrets")
    read = {r["k"] for r in rows if r["cdc_op"] == "r"}
    missing = {f"secret-{g:04d}" for g in range(1, 2001)} - read
    assert not missing, f"{len(missing)} key(s) never read: {sorted(missing)[:3]}"
    log = run.log_text()
    assert "the table is copied again instead" in log
    assert "resuming its backfill" not in log and log.count("backfill done") == 0, log
    silver(run)
    check_silver(run, pg, duckdb_con, "public.secrets", ["alt"])


def test_backfill_progress_keeps_key_values_out_of_table_metadata(floe, pg, duckdb_con):
    """#14 (h): the backfill's progress (the last key done, keys to select again)
    was written into Bronze snapshot summaries, where anyone who may read table
    metadata saw primary-key values. The summary now holds counts and names a file
    beside the data files; floe killed mid-backfill resumes from that file (after
    remove-orphans, which keeps it), and every key is read once."""
    run = floe(publication="pub", interval="200ms")
    record = backfill_killed_midway(run, pg)

    def metadata_texts():
        # Every metadata file holds every retained snapshot's summary.
        table = run.load("public.secrets")
        location = Path(local(table.metadata.location))
        return table, [p.read_text() for p in (location / "metadata").glob("*.metadata.json")]
    table, texts = metadata_texts()
    # (the table's name is in them; its keys, `secret-NNNN`, must not be)
    leaks = [t[max(0, t.find("secret-") - 200):t.find("secret-") + 50]
             for t in texts if "secret-" in t]
    assert texts and not leaks, leaks[:1]
    keys_file = (table.current_snapshot().summary or {}).get("floe.backfill-keys")
    assert keys_file and Path(local(keys_file)).is_file(), table.current_snapshot().summary
    assert "secret-" in Path(local(keys_file)).read_text()
    # remove-orphans (everything old enough) keeps the file the snapshot names.
    for p in Path(local(table.metadata.location)).rglob("*"):
        if p.is_file():
            os.utime(p, (time.time() - OLD,) * 2)
    maint(run, "remove-orphans")
    assert Path(local(keys_file)).is_file()

    resume_and_check_every_key_read_once(run, pg, duckdb_con, record)
    assert not any("secret-" in t for t in metadata_texts()[1])
    # A keys file is deleted once a later commit supersedes it, the last one when
    # the backfill is done (the kill came between checkpoints: none was left over).
    left = list((Path(local(table.metadata.location)) / "data" / "floe-backfill").glob("*"))
    assert left == [], left


def test_a_partial_update_inside_the_window_gets_its_key_selected_again(
        floe, pg, duckdb_con):
    """An update that leaves a TOASTed value unchanged (and so does not send it)
    commits inside a chunk's window, after the chunk's snapshot: it beats the chunk
    row, and since Bronze has no whole row of that key, the key is selected again
    with a later chunk. Made deterministic by pausing floe after the chunk's
    snapshot (failpoint `backfill.after-snapshot`) while the update commits."""
    pg.execute(SETUP + """
        CREATE TABLE docs (id int PRIMARY KEY, body text, n int);
        INSERT INTO docs SELECT d, (SELECT string_agg(md5(random()::text || i || d), '')
                                    FROM generate_series(1, 300) i), 0
          FROM generate_series(1, 3) d;
    """)
    run = floe(publication="pub", interval="300ms")
    publish_and_commit_inside_the_window(run, pg, "UPDATE docs SET n = n + 1 WHERE id = 2")
    run.wait_until(lambda: (latest_backfill(run, "public.docs") or {}).get("done"), 60,
                   what="the backfill of public.docs")
    records = [rec for _, rec in backfill_records(run, "public.docs")]
    run.stop()
    rows = run.rows(duckdb_con, "public.docs")
    check_order("docs", rows)
    two = [(r["cdc_op"], r["n"], r["body"] is None, r["cdc_unchanged"])
           for r in rows if r["id"] == 2]
    assert two == [("u", 1, True, ["body"]), ("r", 1, False, None)], two
    # One chunk for the table, one more for the key selected again.
    assert records[-1]["chunks"] == 2 and records[-1]["rows"] == 3, records
    cols = ["id", "body", "n"]
    assert bronze_state(rows, cols) == source_state(pg, "docs", cols)
    assert sorted(r["id"] for r in rows if r["cdc_op"] == "r") == [1, 2, 3]


def test_a_copy_again_during_a_backfill_ends_it(floe, pg, duckdb_con):
    """A retype Iceberg cannot promote makes floe copy the table again while its
    watermark backfill is under way: the copy holds every row, so the backfill ends
    with it. It went on with its next chunk, selected the columns by names a rename
    had changed since, failed, and reconnected (soak seed 240500161, whose check
    then waited for the backfill's `done` for ever)."""
    pg.execute(SETUP + DOCS.format(rows=6) + "ALTER TABLE docs ADD COLUMN code text;"
               "UPDATE docs SET code = id::text;")
    run = floe(publication="pub", interval="300ms")
    publish_and_pause_before_the_second_chunk(run, pg, 3000)
    with pg.connect(autocommit=False) as c:
        c.execute("ALTER TABLE docs ALTER COLUMN code TYPE int USING code::int")
        c.execute("ALTER TABLE docs RENAME COLUMN n TO m")
        c.execute("UPDATE docs SET m = 7 WHERE id = 4")
        c.commit()
    run.wait_until(lambda: "its backfill ends with the copy" in run.log_text(), 60,
                   what="the copy again to end the backfill")
    pg.execute("UPDATE docs SET m = 8 WHERE id = 5")
    run.wait_until(lambda: "floe.source.recopy-pending" not in
                   run.load("public.docs").properties, 60, what="the copy to commit")
    # The update may follow the copy's point: in Bronze once the slot confirms it (CI
    # stopped floe 20 ms after the copy, before the stream delivered it).
    wait_flushed(run, pg)
    run.stop()
    assert "reconnecting" not in run.log_text(), run.log_tail()
    rows = run.rows(duckdb_con, "public.docs")
    check_order("docs", rows)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])


@pytest.mark.parametrize("pause,ddl", [
    ("backfill.before-chunk",
     ["ALTER TABLE docs RENAME n TO tmp", "ALTER TABLE docs RENAME code TO n",
      "ALTER TABLE docs RENAME tmp TO code"]),
    ("backfill.before-high-watermark",
     ["ALTER TABLE docs RENAME id TO doc_id", "UPDATE docs SET n = -1 WHERE doc_id = 5",
      "ALTER TABLE docs RENAME doc_id TO \"doc.key\"",
      "UPDATE docs SET n = -2 WHERE \"doc.key\" = 6"]),
], ids=["names-swapped-without-a-change", "key-renamed-twice-with-changes"])
def test_columns_renamed_during_a_backfill_copy_the_table_again(floe, pg, duckdb_con,
                                                                pause, ddl):
    """Renames during a backfill. Two columns swap names between two chunks with no
    change to the table (so the stream says nothing of it): the next chunk selected
    the columns by the names Bronze knows and wrote each one's values under the
    other's name (2485 of 3000 rows in the break-it pass). Or the key column is
    renamed twice, each time with a change, inside a chunk's window (after its read,
    before its high watermark): the changes' keys were looked up under the old name,
    and floe reconnected for ever (break-it pass). The chunk now reads the catalog's
    columns under its snapshot and, where they differ from the stream's, the table
    is copied again; a change's key is found by its place in the replica identity
    (the next chunk, selecting by the old key name, asks for the copy again)."""
    pg.execute(SETUP + DOCS.format(rows=6) + "ALTER TABLE docs ADD COLUMN code int;"
               "UPDATE docs SET code = -id;")
    run = floe(publication="pub", interval="300ms")
    with_chunk_rows(run, 2)
    run.start(env={"FLOE_FAILPOINT": f"{pause}@2=sleep:3000"})
    run.wait_streaming()
    pg.execute("ALTER PUBLICATION pub ADD TABLE docs")
    run.wait_until(lambda: f"failpoint {pause}" in run.log_text(), 60,
                   what=f"floe paused at {pause} of the second chunk", interval=0.05)
    with pg.connect(autocommit=False) as c:
        for statement in ddl:
            c.execute(statement)
            if statement.startswith("UPDATE"):
                c.commit()
        c.commit()
    run.wait_until(lambda: "its backfill ends with the copy" in run.log_text(), 60,
                   what="the copy again to end the backfill")
    run.wait_until(lambda: "floe.source.recopy-pending" not in
                   run.load("public.docs").properties, 60, what="the copy to commit")
    key = pg.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON "
                     "a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
                     "WHERE i.indrelid = 'docs'::regclass AND i.indisprimary")[0][0]
    pg.execute(f'UPDATE docs SET body = body || \'!\' WHERE "{key}" = 1')
    run.wait_until(lambda: any(r["cdc_op"] == "u" and r["body"] and r["body"].endswith("!")
                               for r in run.rows_pyiceberg("public.docs")), 60,
                   what="a later change in Bronze")
    run.stop()
    assert "reconnecting" not in run.log_text(), run.log_tail()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs", [key])


SWAPPABLE_DOCS = DOCS.replace("id int PRIMARY KEY", "id int PRIMARY KEY DEFERRABLE") + \
    "ALTER TABLE docs REPLICA IDENTITY FULL;\n"
SWAP = "UPDATE docs SET id = CASE id WHEN {a} THEN {b} ELSE {a} END WHERE id IN ({a}, {b})"


@pytest.mark.parametrize("where,a,b", [
    ("ahead", 5, 6), ("behind", 1, 2), ("inside-the-window", 5, 6)])
def test_keys_swapped_by_one_statement_during_the_backfill_keep_both_rows(
        floe, pg, duckdb_con, where, a, b):
    """Soak seed 911151848: two keys of a deferrable-key table swapped by one
    statement during the table's backfill stream as `d a, c b, d b, c a`. The `d b`
    deletes the row that held b before the statement, not the one `c b` made, but
    the backfill took it for b's last word: b's history looked complete, its chunk
    row was dropped, and b was missing in Silver. A key deleted in the transaction
    that made it is now selected again, so its `r` row follows the swap."""
    pg.execute(SETUP + SWAPPABLE_DOCS.format(rows=6))
    run = floe(publication="pub", interval="300ms")
    if where == "inside-the-window":
        publish_and_commit_inside_the_window(run, pg, SWAP.format(a=a, b=b))
    else:
        publish_and_pause_before_the_second_chunk(run, pg, 4000)
        pg.execute(SWAP.format(a=a, b=b))
    run.wait_until(lambda: (latest_backfill(run, "public.docs") or {}).get("done"), 60,
                   what="the backfill of public.docs")
    pg.execute("UPDATE docs SET n = 9 WHERE id = 3")
    wait_flushed(run, pg)
    run.stop()
    swapped = [r["cdc_op"] for r in run.rows_pyiceberg("public.docs")
               if r["id"] in (a, b) and r["cdc_op"] in "cd"]
    assert swapped.count("c") == 2 and swapped.count("d") == 2, swapped
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])


def test_a_table_renamed_during_its_backfill_and_back_later_is_copied_again(
        floe, pg, duckdb_con):
    """A table renamed while its backfill ran: the next chunk found no table of its
    name (`42P01`) and floe stopped with that error at every start (its unfinished
    backfill could not resume either). The backfill now stops with a warning, the
    table under its new name is copied, floe restarts cleanly, and when the table is
    renamed back it is copied again: Silver equals psql under both names."""
    pg.execute(SETUP + DOCS.format(rows=6))
    run = floe(publication="pub", interval="300ms")
    publish_and_pause_before_the_second_chunk(run, pg, 4000)
    pg.execute("ALTER TABLE docs RENAME TO docs_moved")
    pg.execute("UPDATE docs_moved SET n = 5 WHERE id IN (1, 4)")
    run.wait_until(lambda: "public.docs: its backfill stops after 1 chunk(s)"
                   in run.log_text(), 60, what="the backfill to stop")
    run.wait_until(lambda: (latest_backfill(run, "public.docs_moved") or {}).get("done"),
                   60, what="the backfill of public.docs_moved")
    wait_flushed(run, pg)
    run.stop()
    run.start().wait_streaming()
    pg.execute("UPDATE docs_moved SET n = 6 WHERE id = 2")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs_moved", ["id"])
    pg.execute("ALTER TABLE docs_moved RENAME TO docs")
    pg.execute("DELETE FROM docs WHERE id = 3")
    run.start().wait_streaming()
    run.wait_until(lambda: any(r["cdc_op"] == "t" for r in run.rows_pyiceberg(
        "public.docs")), 60, what="the copy again of public.docs")
    pg.execute("UPDATE docs SET n = 8 WHERE id = 5")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])
