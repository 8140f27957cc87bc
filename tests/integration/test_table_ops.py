"""Row deltas with position deletes, compaction, snapshot expiry, orphan removal and
schema evolution done by floe's Table (through tests/tools/table_tool), read back by
PyIceberg and DuckDB's iceberg extension."""

import datetime as dt
import time
from pathlib import Path


from tablelake import BASE, expected, lake  # noqa: F401


def py_rows(table, **scan):
    return sorted(table.scan(**scan).to_arrow().to_pylist(), key=lambda r: r["id"])


def duck_rows(con, metadata_location, columns="id, name, amount, ts"):
    con.execute("LOAD iceberg")
    rel = con.execute(
        f"SELECT {columns} FROM iceberg_scan(?) ORDER BY id",
        [metadata_location.removeprefix("file://")])
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()]


def files_on_disk(root: Path):
    return {str(p) for p in root.rglob("*") if p.is_file()}


def local(location: str) -> str:
    return location.removeprefix("file://").removeprefix("file:")


def now_ms():
    return int(time.time() * 1000)


def test_position_deletes_hide_exactly_the_deleted_rows(lake, duckdb_con):
    floe, catalog, _ = lake
    floe("create", "silver.shop.items")
    floe("append", "silver.shop.items", "--rows", "100", "--files", "3")
    out = floe("delete-rows", "silver.shop.items", "--ids", "3,5,7,50,99")
    assert out["deleted_rows"] == 5
    survivors = sorted(set(range(100)) - {3, 5, 7, 50, 99})

    table = catalog.load_table("silver.shop.items")
    snap = table.current_snapshot()
    assert snap.summary.operation.value == "delete"
    assert snap.summary["added-position-deletes"] == "5"
    assert snap.summary["total-position-deletes"] == "5"
    assert snap.summary["total-delete-files"] == "1"
    assert snap.summary["total-records"] == "100"
    assert py_rows(table) == expected(survivors)
    tasks = list(table.scan().plan_files())
    assert sum(len(t.delete_files) for t in tasks) >= 2  # the deletes span files
    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(survivors)

    # a second delta on top, in a partitioned table too
    out = floe("delete-rows", "silver.shop.items", "--ids", "0,98")
    survivors = sorted(set(survivors) - {0, 98})
    table = catalog.load_table("silver.shop.items")
    assert py_rows(table) == expected(survivors)
    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(survivors)


def test_partitioned_row_delta_writes_one_delete_file_per_partition(lake, duckdb_con):
    floe, catalog, _ = lake
    floe("create", "silver.shop.parts", "--partition", "bucket:4:id")
    floe("append", "silver.shop.parts", "--rows", "80")
    out = floe("delete-rows", "silver.shop.parts", "--ids", "1,2,3,4,5,6,7,8,9,10")
    assert out["deleted_rows"] == 10
    survivors = sorted(set(range(80)) - set(range(1, 11)))
    table = catalog.load_table("silver.shop.parts")
    assert int(table.current_snapshot().summary["added-delete-files"]) == \
        len(out["delete_files"]) > 1
    assert py_rows(table) == expected(survivors)
    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(survivors)


def test_compaction_keeps_the_rows_and_leaves_no_delete_files(lake, duckdb_con):
    floe, catalog, _ = lake
    floe("create", "silver.shop.compact")
    floe("append", "silver.shop.compact", "--rows", "60", "--files", "3")
    floe("append", "silver.shop.compact", "--start", "60", "--rows", "40")
    floe("delete-rows", "silver.shop.compact", "--ids", "1,20,61,77")
    survivors = sorted(set(range(100)) - {1, 20, 61, 77})
    out = floe("compact", "silver.shop.compact")
    assert out["added_files"] == 1

    table = catalog.load_table("silver.shop.compact")
    snap = table.current_snapshot()
    assert snap.summary.operation.value == "replace"
    assert snap.summary["total-delete-files"] == "0"
    assert snap.summary["total-position-deletes"] == "0"
    assert snap.summary["total-data-files"] == "1"
    assert snap.summary["total-records"] == str(len(survivors))
    assert snap.summary["deleted-data-files"] == "4"
    assert snap.summary["removed-delete-files"] == "1"
    tasks = list(table.scan().plan_files())
    assert len(tasks) == 1 and tasks[0].delete_files == set()
    assert py_rows(table) == expected(survivors)
    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(survivors)
    # the snapshot before the compaction still reads the same rows
    parent = snap.parent_snapshot_id
    assert py_rows(table, snapshot_id=parent) == expected(survivors)


def test_expiry_removes_old_snapshots_and_their_files_only(lake, duckdb_con):
    floe, catalog, wh = lake
    floe("create", "silver.shop.expire")
    floe("append", "silver.shop.expire", "--rows", "30", "--files", "2")
    floe("delete-rows", "silver.shop.expire", "--ids", "4")
    floe("compact", "silver.shop.expire")
    floe("append", "silver.shop.expire", "--start", "30", "--rows", "10")
    table = catalog.load_table("silver.shop.expire")
    old_files = {local(t.file.file_path) for t in
                 table.scan(snapshot_id=table.snapshots()[0].snapshot_id).plan_files()}
    assert len(old_files) == 2
    survivors = sorted(set(range(40)) - {4})

    out = floe("expire", "silver.shop.expire", "--older-than-ms", str(now_ms() + 1000),
               "--retain", "1")
    assert len(out["expired_snapshot_ids"]) == 3
    assert {local(p) for p in out["deleted_data_files"]} == old_files
    assert len(out["deleted_delete_files"]) == 1
    on_disk = files_on_disk(wh)
    for path in (out["deleted_data_files"] + out["deleted_delete_files"]
                 + out["deleted_manifests"] + out["deleted_manifest_lists"]):
        assert local(path) not in on_disk

    table = catalog.load_table("silver.shop.expire")
    assert len(table.snapshots()) == 1
    assert py_rows(table) == expected(survivors)
    # every file the current snapshot reads is still there
    for task in table.scan().plan_files():
        assert local(task.file.file_path) in on_disk
    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(survivors)


def test_orphan_removal_deletes_a_crashed_writers_files_and_nothing_else(lake, duckdb_con):
    floe, catalog, wh = lake
    floe("create", "bronze.shop.orphans")
    floe("append", "bronze.shop.orphans", "--rows", "20", "--files", "2")
    floe("delete-rows", "bronze.shop.orphans", "--ids", "3")
    before = files_on_disk(wh)
    crashed = floe("append", "bronze.shop.orphans", "--start", "20", "--rows", "10",
                   "--files", "2", "--crash-before-commit", check=False)
    assert crashed.returncode == 9
    left_behind = files_on_disk(wh) - before
    assert len(left_behind) == 2

    # too young: an in-flight write is never removed
    out = floe("remove-orphans", "bronze.shop.orphans", "--older-than-ms",
               str(now_ms() - 3600 * 1000))
    assert out["removed"] == []
    out = floe("remove-orphans", "bronze.shop.orphans", "--older-than-ms",
               str(now_ms() + 60 * 1000))
    assert {local(p) for p in out["removed"]} == left_behind
    assert files_on_disk(wh) == before

    survivors = sorted(set(range(20)) - {3})
    table = catalog.load_table("bronze.shop.orphans")
    assert py_rows(table) == expected(survivors)
    for snap in table.snapshots():
        table.scan(snapshot_id=snap.snapshot_id).to_arrow()  # all history readable
    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(survivors)


def test_schema_evolution_reads_old_and_new_files(lake, duckdb_con):
    floe, catalog, _ = lake
    floe("create", "silver.shop.evolve")
    floe("append", "silver.shop.evolve", "--rows", "10")
    floe("evolve", "silver.shop.evolve", "--add-column", "qty:int",
         "--rename", "name=full_name", "--drop", "amount")
    floe("append", "silver.shop.evolve", "--start", "10", "--rows", "10")
    out = floe("evolve", "silver.shop.evolve", "--widen", "qty:long")
    assert out["schema_id"] == 2
    out = floe("append", "silver.shop.evolve", "--start", "20", "--rows", "10")

    def row(i):
        return {"id": i, "full_name": f"name-{i}", "ts": BASE + dt.timedelta(hours=i),
                "qty": None if i < 10 else i * 10}

    table = catalog.load_table("silver.shop.evolve")
    schema = table.schema()
    assert [f.name for f in schema.fields] == ["id", "full_name", "ts", "qty"]
    assert str(schema.find_field("qty").field_type) == "long"
    assert py_rows(table) == [row(i) for i in range(30)]
    assert duck_rows(duckdb_con, out["metadata_location"],
                     "id, full_name, ts, qty") == [row(i) for i in range(30)]
    # old snapshots still read with their own schema
    first = table.snapshots()[0]
    assert len(table.scan(snapshot_id=first.snapshot_id).to_arrow()) == 10
