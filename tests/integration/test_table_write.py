"""Tables that floe creates and appends to, read by PyIceberg (SqlCatalog on
floe's SQLite catalog) and by DuckDB's iceberg extension."""

import datetime as dt
import json
import subprocess
import threading

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo

BASE = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def expected(ids):
    return [{"id": i, "name": f"name-{i}", "amount": i * 1.5,
             "ts": BASE + dt.timedelta(hours=i)} for i in sorted(ids)]


@pytest.fixture
def lake(tmp_path, tool):
    db = tmp_path / "catalog.db"
    warehouse = f"file://{tmp_path}/wh"

    def floe(*args, check=True):
        out = subprocess.run([str(tool("table_tool")), "--db", str(db),
                              "--warehouse", warehouse, *args],
                             capture_output=True, text=True)
        if check:
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)
        return out

    catalog = SqlCatalog("floe", uri=f"sqlite:///{db}", warehouse=warehouse)
    return floe, catalog


def py_rows(table, **scan):
    return sorted(table.scan(**scan).to_arrow().to_pylist(), key=lambda r: r["id"])


def duck_rows(con, metadata_location):
    con.execute("LOAD iceberg")
    rel = con.execute(
        "SELECT id, name, amount, ts FROM iceberg_scan(?) ORDER BY id",
        [metadata_location.removeprefix("file://")])
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()]


def test_appends_are_read_back_by_pyiceberg_and_duckdb(lake, duckdb_con):
    floe, catalog = lake
    floe("create", "bronze.shop.items")
    floe("append", "bronze.shop.items", "--start", "0", "--rows", "600", "--files", "3",
         "--summary", "floe.commit-lsn=100")
    out = floe("append", "bronze.shop.items", "--start", "600", "--rows", "400",
               "--summary", "floe.commit-lsn=200")

    table = catalog.load_table("bronze.shop.items")
    assert table.metadata_location == out["metadata_location"]
    assert py_rows(table) == expected(range(1000))
    snaps = table.snapshots()
    assert [s.sequence_number for s in snaps] == [1, 2]
    assert snaps[1].parent_snapshot_id == snaps[0].snapshot_id
    assert table.current_snapshot().summary["floe.commit-lsn"] == "200"
    assert table.current_snapshot().summary["total-records"] == "1000"
    assert table.current_snapshot().summary["total-data-files"] == "4"
    # time travel to the first snapshot
    assert py_rows(table, snapshot_id=snaps[0].snapshot_id) == expected(range(600))

    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(range(1000))


def test_partitioned_tables_are_read_and_pruned_by_both_readers(lake, duckdb_con):
    floe, catalog = lake
    floe("create", "silver.shop.items", "--partition", "bucket:8:id",
         "--partition", "day:ts",
         "--property", "write.parquet.bloom-filter-enabled.column.id=true")
    out = floe("append", "silver.shop.items", "--start", "0", "--rows", "240")

    table = catalog.load_table("silver.shop.items")
    assert [f.name for f in table.spec().fields] == ["id_bucket", "ts_day"]
    assert py_rows(table) == expected(range(240))
    all_files = list(table.scan().plan_files())
    pruned = list(table.scan(row_filter=EqualTo("id", 42)).plan_files())
    assert len(all_files) > 8 and 1 <= len(pruned) < len(all_files)
    assert py_rows(table, row_filter=EqualTo("id", 42)) == expected([42])
    # each data file holds a single (bucket, day) partition, with a bloom filter
    for task in all_files:
        assert "id_bucket=" in task.file.file_path and "/ts_day=2024-01-" in task.file.file_path

    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(range(240))
    duckdb_con.execute("LOAD iceberg")
    assert duckdb_con.execute(
        "SELECT count(*) FROM iceberg_scan(?) WHERE id = 42",
        [out["metadata_location"].removeprefix("file://")]).fetchone() == (1,)


def test_two_processes_committing_concurrently_lose_nothing(lake, duckdb_con):
    floe, catalog = lake
    floe("create", "bronze.shop.race")
    results, threads = [], []
    for start in (0, 1000):
        t = threading.Thread(target=lambda s=start: results.append(floe(
            "append-loop", "bronze.shop.race", "--start", str(s), "--commits", "100",
            check=False)))
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]

    table = catalog.load_table("bronze.shop.race")
    snaps = table.snapshots()
    assert len(snaps) == 200
    by_id = {s.snapshot_id: s for s in snaps}
    # linear history: following parents from the current snapshot visits all 200
    chain, at = [], table.current_snapshot()
    while at is not None:
        chain.append(at)
        at = by_id.get(at.parent_snapshot_id)
    assert len(chain) == 200
    assert [s.sequence_number for s in reversed(chain)] == list(range(1, 201))
    ids = list(range(100)) + list(range(1000, 1100))
    assert py_rows(table) == expected(ids)
    # every snapshot is readable and holds exactly as many rows as its number
    for snap in chain[::17]:
        assert len(table.scan(snapshot_id=snap.snapshot_id).to_arrow()) == \
            snap.sequence_number
    assert len(duck_rows(duckdb_con, table.metadata_location)) == 200


def test_a_writer_killed_before_committing_leaves_the_table_unchanged(lake, duckdb_con):
    floe, catalog = lake
    floe("create", "bronze.shop.crash")
    before = floe("append", "bronze.shop.crash", "--rows", "10")
    crashed = floe("append", "bronze.shop.crash", "--start", "10", "--rows", "10",
                   "--crash-before-commit", check=False)
    assert crashed.returncode == 9
    table = catalog.load_table("bronze.shop.crash")
    assert table.metadata_location == before["metadata_location"]
    assert py_rows(table) == expected(range(10))
    assert duck_rows(duckdb_con, table.metadata_location) == expected(range(10))
    # and the next writer carries on from there
    floe("append", "bronze.shop.crash", "--start", "10", "--rows", "5")
    assert py_rows(catalog.load_table("bronze.shop.crash")) == expected(range(15))
