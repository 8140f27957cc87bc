"""A Silver merge reads only the row groups that may hold its keys: Silver data
files with many row groups (a small `write.parquet.row-group-limit` set on the Silver
tables with PyIceberg), a merge touching a few keys, and the merge's counters in the
Silver snapshot summary (`floe.merge.*`, read with PyIceberg): row groups skipped by
their min/max key statistics, skipped by their bloom filters (a new key inside a row
group's key range), few read, and the Parquet bytes read from Silver well below the
table's size. Silver must still equal the source (PyIceberg and DuckDB against a
PostgreSQL query) for an int key, a composite (text, int) key and a uuid key."""

from __future__ import annotations

from floerun import floe  # noqa: F401
from oracle import check_silver
from test_silver import (bronze_commit_lsn, current_summary, silver, silver_ident,
                         wait_bronze)

ROW_GROUP_ROWS = 500
ROWS = 20000
# About 100 bytes of incompressible text per row: files of megabytes, so that the
# Parquet footer read (64 KiB) is a small part of one.
PAYLOAD = "md5(g::text) || md5((g + 1)::text) || md5((g + 2)::text)"
COUNTERS = ("floe.merge.files-read", "floe.merge.row-groups-read",
            "floe.merge.row-groups-skipped-stats", "floe.merge.row-groups-skipped-bloom",
            "floe.merge.silver-bytes-read", "floe.merge.bronze-bytes-read",
            "floe.merge.bytes-written")


def counters(run, table: str) -> dict:
    s = current_summary(run, table)
    for k in COUNTERS:
        assert k in s, f"{table}: {k} missing from the Silver snapshot summary {s}"
        assert s[k].isdigit(), (k, s[k])
    return {k: int(s[k]) for k in COUNTERS} | {"total-files-size": int(s["total-files-size"])}


def small_row_groups(run, table: str) -> None:
    t = run.catalog().load_table(silver_ident(table))
    with t.transaction() as tx:
        tx.set_properties({"write.parquet.row-group-limit": str(ROW_GROUP_ROWS)})


def test_merge_skips_row_groups_by_stats_and_bloom(floe, pg, duckdb_con):
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, v text)")
    pg.execute("CREATE TABLE pairs (region text, id int, v text, PRIMARY KEY (region, id))")
    pg.execute("CREATE TABLE tokens (tok uuid PRIMARY KEY, v int)")
    # Even ids only: an odd id lies inside some row group's range without being in it.
    pg.execute(f"INSERT INTO items SELECT 2 * g, {PAYLOAD} FROM generate_series(1, {ROWS}) g")
    pg.execute(f"INSERT INTO pairs SELECT 'r' || (g % 5), 2 * g, {PAYLOAD} "
               f"FROM generate_series(1, {ROWS}) g")
    pg.execute(f"INSERT INTO tokens SELECT gen_random_uuid(), g FROM generate_series(1, {ROWS}) g")
    keys = {"public.items": ["id"], "public.pairs": ["region", "id"]}
    run = floe(service="svc").start()
    for t, k in keys.items():
        wait_bronze(run, pg, t, k)
    run.wait_until(lambda: run.count("public.tokens") >= ROWS, what="Bronze tokens")

    # Backfill, then rewrite every row into files of many small row groups.
    silver(run)
    for t in (*keys, "public.tokens"):
        small_row_groups(run, t)
    pg.execute("UPDATE items SET v = v || '!'")
    pg.execute("UPDATE pairs SET v = v || '!'")
    pg.execute("UPDATE tokens SET v = v + 1")
    for t, k in keys.items():
        wait_bronze(run, pg, t, k)
    run.wait_until(lambda: run.count("public.tokens") >= 2 * ROWS, what="Bronze tokens")
    silver(run)
    for t, k in keys.items():
        check_silver(run, pg, con, t, k)
    check_silver(run, pg, con, "public.tokens", ["tok"])
    for t in (*keys, "public.tokens"):
        c = counters(run, t)
        # Every row was updated: no row group could be skipped.
        assert c["floe.merge.row-groups-read"] >= 1, (t, c)
        assert c["floe.merge.row-groups-skipped-stats"] == 0, (t, c)
        assert c["floe.merge.row-groups-skipped-bloom"] == 0, (t, c)
        assert c["floe.merge.bronze-bytes-read"] > 0, (t, c)
        assert c["floe.merge.bytes-written"] > 0, (t, c)

    # A few keys: updates and a delete of existing keys, inserts of new keys inside
    # the key range (odd ids, a new uuid) and beyond it.
    pg.execute("UPDATE items SET v = 'changed' WHERE id IN (20, 24000)")
    pg.execute("DELETE FROM items WHERE id = 35000")
    pg.execute("INSERT INTO items VALUES (12501, 'odd'), (100001, 'beyond')")
    pg.execute("UPDATE pairs SET v = 'changed' WHERE (region, id) IN (('r1', 2), ('r3', 30006))")
    pg.execute("INSERT INTO pairs VALUES ('r2', 1001, 'odd'), ('zz', 1, 'beyond')")
    with pg.connect() as conn:
        tokens = [r[0] for r in conn.execute("SELECT tok FROM tokens ORDER BY tok").fetchall()]
    pg.execute("UPDATE tokens SET v = -1 WHERE tok IN (%s, %s)", (tokens[10], tokens[2000]))
    pg.execute("INSERT INTO tokens VALUES (gen_random_uuid(), 7), (gen_random_uuid(), 8)")
    for t, k in keys.items():
        wait_bronze(run, pg, t, k)
    run.wait_until(lambda: run.count("public.tokens") >= 2 * ROWS + 4, what="Bronze tokens")
    out = silver(run)
    assert "row groups read" in out, out
    for t, k in keys.items():
        check_silver(run, pg, con, t, k)
        assert current_summary(run, t)["floe.bronze-commit-lsn"] == \
            str(bronze_commit_lsn(run, t))
    check_silver(run, pg, con, "public.tokens", ["tok"])

    for t, existing in (("public.items", 3), ("public.pairs", 2), ("public.tokens", 2)):
        c = counters(run, t)
        read = c["floe.merge.row-groups-read"]
        skipped = c["floe.merge.row-groups-skipped-stats"] + \
            c["floe.merge.row-groups-skipped-bloom"]
        # A touched key lives in one row group of the rewritten files and in one of
        # the files it was deleted from: at most two row groups per existing key.
        assert 1 <= read <= 2 * existing, (t, c)
        # 20000 rows in row groups of 500: dozens of row groups, nearly all skipped.
        assert skipped >= 20, (t, c)
        assert c["floe.merge.row-groups-skipped-stats"] > 0, (t, c)
        assert c["floe.merge.files-read"] >= 1, (t, c)
        assert 0 < c["floe.merge.silver-bytes-read"] < c["total-files-size"], (t, c)
        assert c["floe.merge.bronze-bytes-read"] > 0, (t, c)
        assert c["floe.merge.bytes-written"] > 0, (t, c)
    # The odd ids lie inside a row group's key range: only its bloom filter can skip it.
    for t in keys:
        assert counters(run, t)["floe.merge.row-groups-skipped-bloom"] >= 1, \
            (t, counters(run, t))
    run.stop()
