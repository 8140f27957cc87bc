"""Progress of long operations: a `floe silver` pass counts the Bronze rows it
reads (the total from the snapshot summaries above Silver's watermark) and logs a
last line when it ends; on a terminal it redraws a bar instead. `floe silver
backfill` counts the export's rows read. Uses floerun.py, test_silver.py and oracle.py."""

from __future__ import annotations

import os
import pty
import re
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq

from floerun import floe  # noqa: F401
from oracle import check_silver
from test_silver import silver, wait_bronze
from test_silver_tools import export, tool

PASS_LINE = re.compile(r"silver: (\d+)/(\d+) Bronze rows \(100%\), (\d+)/(\d+) tables")


def last_pass_line(out: str) -> tuple[int, int, int, int]:
    found = PASS_LINE.findall(out)
    assert found, out
    return tuple(int(x) for x in found[-1])


def test_a_silver_pass_counts_the_bronze_rows_it_reads(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE a (id int PRIMARY KEY, v text)")
    pg.execute("CREATE TABLE b (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO a SELECT g, 'a' FROM generate_series(1, 300) g")
    pg.execute("INSERT INTO b SELECT g, 'b' FROM generate_series(1, 200) g")
    run = floe().start().wait_streaming()
    wait_bronze(run, pg, "public.a", ["id"])
    wait_bronze(run, pg, "public.b", ["id"])

    # first pass: every Bronze row (the copies) is read
    out = silver(run)
    assert last_pass_line(out) == (500, 500, 2, 2), out

    # second pass: only what came after the watermark (40 changes, all to a)
    pg.execute("UPDATE a SET v = 'u' WHERE id <= 30")
    pg.execute("DELETE FROM a WHERE id > 290")
    wait_bronze(run, pg, "public.a", ["id"])
    out = silver(run)
    assert last_pass_line(out) == (40, 40, 2, 2), out
    check_silver(run, pg, duckdb_con, "public.a", ["id"])

    # nothing new: nothing to read
    out = silver(run)
    assert "silver: 0 Bronze rows, 2/2 tables, done in" in out, out

    # on a terminal: a bar redrawn in place, ending full
    pg.execute("UPDATE b SET v = 'tty' WHERE id <= 5")
    wait_bronze(run, pg, "public.b", ["id"])
    run.stop()
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([str(run.floe_bin), "silver", str(run.config_path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=follower, cwd=run.base)
        os.close(follower)
        follower = None
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the other end closed
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(120) == 0
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    tty = b"".join(chunks).decode(errors="replace")
    assert "\r" in tty, tty
    assert "silver: [####################] 5/5 Bronze rows (100%), 2/2 tables" in tty, tty


def test_backfill_counts_the_rows_of_the_export(floe, pg, duckdb_con, tmp_path):
    pg.execute("CREATE TABLE orders (id int PRIMARY KEY, customer text)")
    pg.execute("INSERT INTO orders SELECT g, 'c' || g FROM generate_series(1, 1234) g")
    run = floe().start().wait_streaming()
    wait_bronze(run, pg, "public.orders", ["id"])
    lsn = export(pg, "orders", tmp_path / "orders.parquet")
    run.stop()
    out = tool(run, "backfill", str(run.config_path), "--table", "public.orders",
               "--parquet", str(tmp_path / "orders.parquet"), "--lsn", lsn)
    assert re.search(r"backfill: 1234/1234 rows read \(100%\), written", out), out
    # Seeded above Bronze's last commit of the quiet table: nothing to merge, no warning.
    out = silver(run)
    assert "is up to date" in out and "warning" not in out, out


def test_a_failed_backfill_says_so_and_an_all_null_column_is_read(floe, pg, duckdb_con,
                                                                  tmp_path):
    """A backfill refused on its export ends its progress line with `failed`, not a
    finished 100%; an export in files where one file's column holds only nulls (the
    null type pyarrow writes for [None, None]) is seeded, the column named when the
    files really differ."""
    pg.execute("CREATE TABLE notes (id int PRIMARY KEY, body text)")
    pg.execute("INSERT INTO notes VALUES (1, 'one'), (2, 'two'), (3, NULL), (4, NULL)")
    run = floe().start().wait_streaming()
    wait_bronze(run, pg, "public.notes", ["id"])
    lsn = export(pg, "notes", tmp_path / "whole.parquet")
    run.stop()
    parts = tmp_path / "parts"
    parts.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "body": ["one", "two"]}), parts / "a.parquet")
    pq.write_table(pa.table({"id": [3, 4], "body": [None, None]}), parts / "b.parquet")
    assert pq.read_schema(parts / "b.parquet").field("body").type == pa.null()
    pq.write_table(pa.table({"id": [5], "body": [7]}), parts / "c.parquet")
    out = tool(run, "backfill", str(run.config_path), "--table", "public.notes",
               "--parquet", str(parts), "--lsn", lsn, expect_rc=1)
    assert "column `body` is int64 in " in out and "c.parquet" in out, out
    assert re.search(r"backfill: 0/5 rows read \(0%\), failed after", out), out
    assert "(100%)" not in out and "done in" not in out, out

    (parts / "c.parquet").unlink()
    out = tool(run, "backfill", str(run.config_path), "--table", "public.notes",
               "--parquet", str(parts), "--lsn", lsn)
    assert re.search(r"backfill: 4/4 rows read \(100%\), written", out), out
    check_silver(run, pg, duckdb_con, "public.notes", ["id"])
