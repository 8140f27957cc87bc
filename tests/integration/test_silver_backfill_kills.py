"""`floe silver backfill` killed (SIGKILL) at random moments, seeded (FLOE_TEST_SEED,
printed): after every kill the Silver table holds, read by PyIceberg and by DuckDB,
exactly the rows it held before or exactly the export's, never an empty, missing or
mixed table; a `floe silver` pass after a kill merges on from whichever it holds; a
first seed killed after creating its table leaves a table that passes wait on, not
one they fill from Bronze. The last backfill and a pass leave Silver equal to the
source. Uses floerun.py, oracle.py, test_silver.py and test_silver_tools.py."""

from __future__ import annotations

import os
import random
import subprocess
import time

from pyiceberg.exceptions import NoSuchTableError

from floerun import floe  # noqa: F401
from oracle import check_silver, silver_by_reader, silver_table
from test_silver import silver, wait_bronze
from test_silver_tools import export, tool

TABLE = "public.items"


def silver_rows(run, con) -> dict[int, tuple] | None:
    """Silver's rows as id -> (v, n), the same by both readers; None: no table."""
    try:
        _, by_reader = silver_by_reader(run, con, TABLE)
    except NoSuchTableError:
        return None
    seen = {}
    for reader, (_, rows) in by_reader.items():
        seen[reader] = {r["id"]: (r["v"], r["n"]) for r in rows}
        assert len(seen[reader]) == len(rows), f"{reader}: a key twice"
    assert seen["PyIceberg"] == seen["DuckDB"]
    return seen["PyIceberg"]


def source_state(pg) -> dict[int, tuple]:
    return {r[0]: (r[1], r[2]) for r in pg.execute("SELECT id, v, n FROM items")}


def backfill_killed(run, parquet, lsn, delay: float, replace: bool) -> None:
    """Starts the backfill and SIGKILLs it after `delay` seconds (if it is still
    running)."""
    args = [str(run.floe_bin), "silver", "backfill", str(run.config_path), "--table",
            TABLE, "--parquet", str(parquet), "--lsn", lsn]
    if replace:
        args.append("--replace")
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=run.base)
    time.sleep(delay)
    proc.kill()
    proc.wait(60)


def test_a_backfill_killed_at_any_moment_leaves_the_old_rows_or_the_new(
        floe, pg, duckdb_con, tmp_path):
    seed = int(os.environ.get("FLOE_TEST_SEED", random.randrange(1 << 30)))
    print(f"FLOE_TEST_SEED={seed}")
    rng = random.Random(seed)
    pg.execute("CREATE TABLE items (id bigint PRIMARY KEY, v text, n int)")
    pg.execute("INSERT INTO items SELECT g, repeat(md5(g::text), 4), g % 97 "
               "FROM generate_series(1, 300000) g")
    run = floe().start().wait_streaming()
    wait_bronze(run, pg, TABLE, ["id"])
    run.stop()
    lsn_a = export(pg, "items", tmp_path / "a.parquet")
    rows_a = source_state(pg)

    # How long a whole backfill takes here: the kills land anywhere in it.
    started = time.monotonic()
    tool(run, "backfill", str(run.config_path), "--table", TABLE, "--parquet",
         str(tmp_path / "a.parquet"), "--lsn", lsn_a)
    took = time.monotonic() - started
    assert silver_rows(run, duckdb_con) == rows_a

    # A first seed killed: no table, a table with all of the export, or an empty one
    # marked as being seeded, which a pass leaves alone.
    waited = 0
    for attempt in range(16):
        if attempt >= 4 and waited:
            break
        try:
            run.catalog().drop_table(("silver", "svc", "public", "items"))
        except NoSuchTableError:
            pass
        delay = rng.uniform(took * 0.4, took)
        backfill_killed(run, tmp_path / "a.parquet", lsn_a, delay, replace=False)
        got = silver_rows(run, duckdb_con)
        assert got in (None, {}, rows_a), f"seed {seed}, first seed killed at {delay:.2f}s"
        print(f"first seed killed at {delay:.2f}s of {took:.2f}s: "
              f"{'no table' if got is None else 'empty' if not got else 'seeded'}")
        if got == {}:
            props = silver_table(run, TABLE).properties
            assert "floe.silver.seeding" in props, props
            out = silver(run)
            assert "waiting for `floe silver backfill`" in out, out
            out = tool(run, "verify", str(run.config_path))
            assert "has not committed its rows" in out, out
            assert silver_rows(run, duckdb_con) == {}
            waited += 1
    assert waited, f"seed {seed}: no kill landed between the table's creation and its rows"
    tool(run, "backfill", str(run.config_path), "--table", TABLE, "--parquet",
         str(tmp_path / "a.parquet"), "--lsn", lsn_a, "--replace")
    assert silver_rows(run, duckdb_con) == rows_a

    # The source changes (Bronze streams it), a second export B is taken; replaces with
    # A or B are killed at random moments, a pass sometimes runs after one.
    pg.execute("UPDATE items SET v = 'b', n = n + 1 WHERE id % 7 = 0")
    pg.execute("DELETE FROM items WHERE id % 11 = 0")
    pg.execute("INSERT INTO items SELECT g, 'new', 1 FROM generate_series(300001, 330000) g")
    run.start().wait_streaming()
    wait_bronze(run, pg, TABLE, ["id"])
    run.stop()
    lsn_b = export(pg, "items", tmp_path / "b.parquet")
    rows_b = source_state(pg)
    exports = {"a": (tmp_path / "a.parquet", lsn_a, rows_a),
               "b": (tmp_path / "b.parquet", lsn_b, rows_b)}
    before = rows_a
    for attempt in range(8):
        name = rng.choice("ab")
        parquet, lsn, rows = exports[name]
        delay = rng.uniform(0, took * 1.5)
        backfill_killed(run, parquet, lsn, delay, replace=True)
        got = silver_rows(run, duckdb_con)
        what = f"seed {seed}, attempt {attempt}: export {name} killed at {delay:.2f}s"
        assert got is not None, what + ": no Silver table"
        assert got == before or got == rows, what + ": neither the old rows nor the export's"
        print(f"{what} of {took:.2f}s: {'the export' if got == rows else 'the old rows'}")
        before = got
        if rng.random() < 0.4:
            silver(run)  # merges Bronze's changes after whichever watermark it holds
            before = silver_rows(run, duckdb_con)
            assert before == rows_b, what + ": a pass after it"

    tool(run, "backfill", str(run.config_path), "--table", TABLE, "--parquet",
         str(tmp_path / "b.parquet"), "--lsn", lsn_b, "--replace")
    silver(run)
    check_silver(run, pg, duckdb_con, TABLE, ["id"])
