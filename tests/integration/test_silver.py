"""`floe silver` end to end: Bronze built by the real pipeline (`floe run` on a real
PostgreSQL), then Silver merged from it by `floe silver`, and read back by PyIceberg
AND DuckDB, which must both equal the source tables' current rows exactly, round
after round of inserts, updates (unchanged TOAST values included), deletes,
key-changing updates, a TRUNCATE in the middle of an increment and an added column.
Merges after the first must be merge-on-read: position delete files, no rewrite.
A table without a primary key gets no Silver table and a message saying how to
declare a key; declaring one in `silver.keys` builds it. The helpers are floerun.py
(`floe run`) and oracle.py (Silver against the source)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from floerun import floe, fold  # noqa: F401
from oracle import check_silver, silver_differences, source_rows

SERVICE = "svc"


def silver(run, config: Path | None = None, *args: str, expect_rc: int = 0) -> str:
    """Runs `floe silver` once; returns its output (logs)."""
    proc = subprocess.run([str(run.floe_bin), "silver", str(config or run.config_path), *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=run.base,
                          timeout=300)
    out = proc.stdout.decode(errors="replace")
    with open(run.base / "silver.log", "a") as log:
        log.write(out)
    assert proc.returncode == expect_rc, f"floe silver exited {proc.returncode}:\n{out}"
    return out


def silver_ident(table: str) -> tuple[str, ...]:
    return ("silver", SERVICE, *table.split("."))


def wait_bronze(run, pg, table: str, key: list[str]) -> None:
    """Waits until Bronze holds every change of `table` (its fold equals the source)."""
    want = {tuple(r[k] for k in key): r for r in source_rows(pg, table)}

    def caught_up():
        rows = run.rows_pyiceberg(table)
        state = fold(rows, key)
        return {k: {c: v for c, v in row.items() if c in want.get(k, row)}
                for k, row in state.items()} == want
    run.wait_until(caught_up, timeout=90, what=f"Bronze {table} to catch up with the source")


def current_summary(run, table: str) -> dict:
    t = run.catalog().load_table(silver_ident(table))
    snap = t.current_snapshot()
    summary = dict(snap.summary.additional_properties)
    summary["operation"] = snap.summary.operation.value
    return summary


def bronze_commit_lsn(run, table: str) -> int:
    return run.commit_lsns(table)[-1]


TOASTED = "repeat(md5(random()::text) || md5(random()::text), 300)"


@pytest.mark.every_version
def test_silver_follows_the_source_round_after_round(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, doc text)")
    # Out of line and uncompressed: an update that does not change doc does not send it.
    pg.execute("ALTER TABLE items ALTER COLUMN doc SET STORAGE EXTERNAL")
    pg.execute("CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b))")
    pg.execute("CREATE TABLE nokey (x int, y text)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g % 7, "
               f"CASE WHEN g % 10 = 0 THEN {TOASTED} END FROM generate_series(1, 300) g")
    pg.execute("INSERT INTO pairs SELECT g % 20, 'b' || (g / 20), g FROM generate_series(1, 80) g")
    pg.execute("INSERT INTO nokey SELECT g, 'y' || g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE).start()
    con = duckdb_con
    keys = {"public.items": ["id"], "public.pairs": ["a", "b"]}
    for t, k in keys.items():
        wait_bronze(run, pg, t, k)
    # floe names the server it reads (the matrix runs this test on each version).
    (number,), = pg.execute("SHOW server_version_num")
    version = f"{int(number) // 10000}.{int(number) % 10000}"
    assert f"source: PostgreSQL {version}, system " in run.log_text(), run.log_tail()
    run.wait_until(lambda: run.count("public.nokey") >= 10, what="Bronze nokey")

    # Round 0: every table is backfilled from its Bronze history.
    out = silver(run)
    assert "public.nokey" in out and "no primary key" in out, out
    assert "silver:\n    keys:\n      public.nokey: [column, ...]" in out, out
    assert not run.catalog().table_exists(silver_ident("public.nokey"))
    for t, k in keys.items():
        check_silver(run, pg, con, t, k)
        s = current_summary(run, t)
        assert s["floe.bronze-commit-lsn"] == str(bronze_commit_lsn(run, t)), s
    items = run.catalog().load_table(silver_ident("public.items"))
    assert str(items.spec()) .find("bucket[") >= 0, items.spec()
    assert items.spec().fields[0].name == "id_bucket"
    assert [items.schema().find_column_name(f.source_id) for f in items.sort_order().fields] \
        == ["id"]
    props = items.properties
    assert props["write.parquet.bloom-filter-enabled.column.id"] == "true"
    assert json.loads(props["floe.silver.key"]) == ["id"]
    pairs = run.catalog().load_table(silver_ident("public.pairs"))
    assert json.loads(pairs.properties["floe.silver.key"]) == ["a", "b"]
    assert pairs.properties["write.parquet.bloom-filter-enabled.column.b"] == "true"

    # Round 1: inserts, updates (one keeping a TOASTed value it does not send),
    # deletes, key-changing updates, several changes to one row in one transaction.
    with pg.connect(autocommit=False) as c:
        c.execute("INSERT INTO items SELECT g, 'new ' || g, 1, NULL "
                  "FROM generate_series(301, 350) g")
        c.execute("UPDATE items SET qty = qty + 100 WHERE id % 10 = 0 AND id <= 200")
        c.execute("DELETE FROM items WHERE id BETWEEN 21 AND 39")
        c.commit()
    pg.execute("UPDATE items SET id = id + 10000 WHERE id IN (1, 2, 3, 50)")
    with pg.connect(autocommit=False) as c:
        for i in range(5):
            c.execute("UPDATE items SET name = %s WHERE id = 5", (f"five v{i}",))
        c.execute("UPDATE items SET name = 'x', qty = -1 WHERE id = 60")
        c.commit()
    pg.execute("UPDATE pairs SET v = v * 10 WHERE a = 3")
    pg.execute("UPDATE pairs SET b = b || '-moved' WHERE a = 4")
    pg.execute("DELETE FROM pairs WHERE a = 5")
    for t, k in keys.items():
        wait_bronze(run, pg, t, k)
    before = current_summary(run, "public.items")
    silver(run)
    for t, k in keys.items():
        check_silver(run, pg, con, t, k)
    s = current_summary(run, "public.items")
    assert int(s.get("added-position-delete-files", 0)) > 0, s
    assert int(s.get("added-position-deletes", 0)) > 0, s
    assert "deleted-data-files" not in s, f"a merge rewrote data files: {s}"
    assert int(s["total-data-files"]) > int(before["total-data-files"]), (before, s)
    assert s["floe.bronze-commit-lsn"] == str(bronze_commit_lsn(run, "public.items")), s
    # The TOASTed documents survived updates that did not send them.
    toasted = [r for r in source_rows(pg, "items") if r["doc"] is not None]
    assert len(toasted) >= 15
    assert any(r["cdc_unchanged"] == ["doc"] for r in run.rows_pyiceberg("public.items")), \
        "the test meant to exercise unchanged TOAST values, but Bronze has none"
    # id 50 -> 10050 changed the key without sending the unchanged document: Silver
    # carried it over from the old key's row.
    moved = [r for r in run.rows_pyiceberg("public.items") if r["id"] == 10050]
    assert [r["cdc_unchanged"] for r in moved] == [["doc"]], moved
    assert [r["doc"] for r in check_silver(run, pg, con, "public.items", ["id"])
            if r["id"] == 10050][0] is not None
    sp = current_summary(run, "public.pairs")
    assert int(sp.get("added-position-delete-files", 0)) > 0, sp

    # Nothing new: nothing committed.
    snapshots = len(run.catalog().load_table(silver_ident("public.items")).snapshots())
    out = silver(run)
    assert "up to date" in out, out
    assert len(run.catalog().load_table(silver_ident("public.items")).snapshots()) == snapshots

    # Round 2: changes, a TRUNCATE, then more changes, all in one increment.
    pg.execute("UPDATE items SET qty = 7 WHERE id < 100")
    pg.execute("INSERT INTO items VALUES (5000, 'gone soon', 1, NULL)")
    pg.execute("TRUNCATE items")
    pg.execute("INSERT INTO items SELECT g, 'after ' || g, g, "
               f"CASE WHEN g % 3 = 0 THEN {TOASTED} END FROM generate_series(1, 40) g")
    pg.execute("UPDATE items SET qty = 0 WHERE id % 3 = 0")  # doc unchanged, not sent
    pg.execute("DELETE FROM items WHERE id = 40")
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    s = current_summary(run, "public.items")
    assert int(s.get("deleted-data-files", 0)) > 0, s

    # Round 3: a new column, and merge-on-read again after the truncate.
    pg.execute("ALTER TABLE items ADD COLUMN note text")
    pg.execute("UPDATE items SET note = 'n' || id WHERE id % 2 = 0")
    pg.execute("INSERT INTO items VALUES (41, 'late', 2, NULL, 'with note')")
    pg.execute("UPDATE items SET id = 1041 WHERE id = 1")
    wait_bronze(run, pg, "public.items", ["id"])
    out = silver(run)
    assert "added column note" in out, out
    got = check_silver(run, pg, con, "public.items", ["id"])
    assert any(r["note"] == "with note" for r in got)
    s = current_summary(run, "public.items")
    # Merge-on-read again: position deletes, unless the merge found the bucket's 4
    # small files (the copy's, the truncate's and this merge's) and folded them, the
    # deletes going with them (docs/silver.md, "Small files"); across a schema change.
    if "deleted-data-files" in s:
        assert "floe.merge.files-read" in s and int(s["total-data-files"]) < \
            int(s["deleted-data-files"]) + int(s["added-data-files"]), s
        assert int(s.get("total-delete-files", 0)) == 0, s
    else:
        assert int(s.get("added-position-delete-files", 0)) > 0, s

    # Round 4: rows whose earlier versions are already deleted by position: each
    # live row is deleted exactly once (rows deleted before are skipped). The merge's
    # delete file replaces the bucket's earlier one (its positions carried over), so
    # the new positions are those added less those removed.
    updated = pg.execute("WITH u AS (UPDATE items SET name = 'r4' WHERE id % 2 = 0 "
                         "RETURNING 1) SELECT count(*) FROM u")[0][0]
    assert updated > 10
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    s = current_summary(run, "public.items")
    assert int(s["added-position-deletes"]) - int(s.get("removed-position-deletes", 0)) \
        == updated, (updated, s)
    assert int(s["total-delete-files"]) <= int(s["total-data-files"]), s

    # Declaring a key for the table without one builds its Silver table.
    declared = run.base / "with-keys.yaml"
    declared.write_text(run.config_path.read_text()
                        + "silver:\n  concurrency: 2\n  keys:\n    public.nokey: [x]\n")
    out = silver(run, declared)
    assert "no primary key" not in out, out
    check_silver(run, pg, con, "public.nokey", ["x"])
    run.stop()


def test_silver_reports_a_failing_table_and_merges_the_others(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE good (id bigint PRIMARY KEY, v text)")
    pg.execute("CREATE TABLE other (id int PRIMARY KEY, w text)")
    pg.execute("INSERT INTO good SELECT g, 'v' || g FROM generate_series(1, 20) g")
    pg.execute("INSERT INTO other SELECT g, 'w' || g FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start()
    wait_bronze(run, pg, "public.good", ["id"])
    wait_bronze(run, pg, "public.other", ["id"])
    run.stop()
    # A merge key naming a column that does not exist fails that table only.
    bad = run.base / "bad-key.yaml"
    bad.write_text(run.config_path.read_text()
                   + "silver:\n  keys:\n    public.other: [nope]\n")
    out = silver(run, bad, expect_rc=1)
    assert "merge key column `nope` is not a column" in out, out
    assert "1 of the tables failed" in out, out
    check_silver(run, pg, duckdb_con, "public.good", ["id"])
    assert not run.catalog().table_exists(silver_ident("public.other"))

    # The scheduler: `--every` merges again and again until SIGTERM.
    run.start()
    loop = subprocess.Popen([str(run.floe_bin), "silver", str(run.config_path), "--every",
                             "1s"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=run.base)
    try:
        pg.execute("INSERT INTO good SELECT g, 'late' || g FROM generate_series(21, 30) g")
        pg.execute("DELETE FROM good WHERE id <= 5")
        pg.execute("UPDATE other SET w = 'changed'")

        def merged():
            return not silver_differences(run, pg, duckdb_con, "public.good", ["id"]) \
                and not silver_differences(run, pg, duckdb_con, "public.other", ["id"])
        run.wait_until(merged, timeout=90, what="the silver loop to merge the changes")
    finally:
        loop.terminate()
        out = loop.communicate(timeout=60)[0].decode(errors="replace")
    assert loop.returncode == 0, out
    assert out.count("Bronze tables of service") >= 2, out
    run.stop()


def test_silver_merges_tables_with_nested_columns_again_and_again(floe, pg, duckdb_con):
    """Array columns: Silver's nested field ids are its own, so later merges must not
    mistake them for a type change."""
    pg.execute("CREATE TABLE public.tagged (id int PRIMARY KEY, tags text[], "
               "scores int[])")
    pg.execute("INSERT INTO tagged VALUES (1, '{a,b}', '{1,2}'), (2, '{c}', NULL)")
    run = floe()
    run.start().wait_streaming()
    for round_no in range(3):
        pg.execute("UPDATE tagged SET tags = tags || %s::text, scores = "
                   "coalesce(scores, '{}') || %s WHERE id = 1", (f"r{round_no}", round_no))
        pg.execute("INSERT INTO tagged VALUES (%s, '{x}', '{7}')", (10 + round_no,))
        wait_bronze(run, pg, "public.tagged", ["id"])
        silver(run)
        check_silver(run, pg, duckdb_con, "public.tagged", ["id"])
    run.stop()


def test_merges_after_another_engine_changed_the_partition_spec(floe, pg, duckdb_con):
    """PyIceberg changes Silver's partitioning (bucket(N, id) to bucket(2N, id)) without
    rewriting the files, as an `ALTER TABLE` in another engine does. The next merges
    must still find and delete the changed rows in the older spec's files: read by
    PyIceberg and DuckDB, Silver equals the source, in both write modes."""
    from pyiceberg.transforms import BucketTransform

    for mode in ("merge-on-read", "copy-on-write"):
        table = f"public.spec_{mode.replace('-', '_')}"
        pg.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO {table} SELECT g, 'v' || g FROM generate_series(1, 3000) g")
    run = floe(extra_yaml=(
        "silver:\n"
        "  target_file_size: 1MiB\n"
        "  write_modes:\n"
        "    public.spec_copy_on_write: copy-on-write\n")).start().wait_streaming()
    for mode in ("merge-on-read", "copy-on-write"):
        table = f"public.spec_{mode.replace('-', '_')}"
        wait_bronze(run, pg, table, ["id"])
    silver(run)
    for mode in ("merge-on-read", "copy-on-write"):
        table = f"public.spec_{mode.replace('-', '_')}"
        t = run.catalog().load_table(silver_ident(table))
        assert t.properties["write.delete.mode"] == mode
        (old,) = t.spec().fields
        with t.update_spec() as update:
            update.remove_field(old.name)
            update.add_field("id", BucketTransform(old.transform.num_buckets * 2),
                             "id_bucket_more")
        pg.execute(f"UPDATE {table} SET v = 'u' || id WHERE id % 3 = 0")
        pg.execute(f"DELETE FROM {table} WHERE id % 7 = 0")
        pg.execute(f"INSERT INTO {table} SELECT g, 'n' FROM generate_series(3001, 3100) g")
        wait_bronze(run, pg, table, ["id"])
    for merge in range(2):  # the first merge after the change, and one more
        silver(run)
        for mode in ("merge-on-read", "copy-on-write"):
            table = f"public.spec_{mode.replace('-', '_')}"
            check_silver(run, pg, duckdb_con, table, ["id"])
            assert_deletes_of_their_data_files_spec(
                run.catalog().load_table(silver_ident(table)))
            if merge == 0:
                pg.execute(f"UPDATE {table} SET v = 'w' WHERE id % 5 = 0")
                wait_bronze(run, pg, table, ["id"])


def assert_deletes_of_their_data_files_spec(t) -> None:
    """Iceberg applies a position delete file only to data files of its own partition
    spec and partition (Java's readers check both; PyIceberg and DuckDB match paths
    alone): every position a live delete file names must be of a live data file of the
    delete file's spec and partition, read from the manifests with PyIceberg."""
    import pyarrow.parquet as pq
    from pyiceberg.manifest import ManifestContent

    data_of = {}
    deletes = []
    for manifest in t.current_snapshot().manifests(t.io):
        for entry in manifest.fetch_manifest_entry(t.io):
            f = entry.data_file
            where = (manifest.partition_spec_id, tuple(f.partition))
            if manifest.content == ManifestContent.DATA:
                data_of[f.file_path] = where
            else:
                deletes.append((f.file_path, where))
    for path, where in deletes:
        with t.io.new_input(path).open() as stream:
            named = set(pq.read_table(stream, columns=["file_path"]).column(0).to_pylist())
        for data_path in named:
            assert data_of.get(data_path) == where, (
                f"{path} (spec {where[0]}, partition {where[1]}) deletes rows of {data_path}, "
                f"which is {data_of.get(data_path, 'not a live data file')}")
