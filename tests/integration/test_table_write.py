"""Tables that floe creates and appends to, read by PyIceberg (SqlCatalog on
floe's SQLite catalog) and by DuckDB's iceberg extension."""

import re
import struct
import threading

from pyiceberg.expressions import EqualTo

from tablelake import expected, lake  # noqa: F401


def py_rows(table, **scan):
    return sorted(table.scan(**scan).to_arrow().to_pylist(), key=lambda r: r["id"])


def duck_rows(con, metadata_location):
    con.execute("LOAD iceberg")
    rel = con.execute(
        "SELECT id, name, amount, ts FROM iceberg_scan(?) ORDER BY id",
        [metadata_location.removeprefix("file://")])
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()]


def duck_files_read(con, location, where=None):
    """Data files DuckDB's iceberg_scan read for a query (EXPLAIN ANALYZE's
    `Total Files Read`)."""
    sql = "EXPLAIN ANALYZE SELECT count(*) FROM iceberg_scan(?)"
    if where:
        sql += f" WHERE {where}"
    plan = con.execute(sql, [location]).fetchall()[0][1]
    found = re.search(r"Total Files Read: (\d+)", plan)
    assert found, plan
    return int(found.group(1))


def long_bound(raw):
    return struct.unpack("<q", raw)[0]


def test_appends_are_read_back_by_pyiceberg_and_duckdb(lake, duckdb_con):
    floe, catalog, _ = lake
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
    floe, catalog, _ = lake
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
    location = out["metadata_location"].removeprefix("file://")
    assert duckdb_con.execute(
        "SELECT count(*) FROM iceberg_scan(?) WHERE id = 42", [location]).fetchone() == (1,)
    # DuckDB prunes data files too. Its iceberg extension (DuckDB 1.4.4) skips files
    # by the manifests' column bounds, not by bucket partition values: it reads the
    # files whose id bounds hold 42 (a bucket-only table is read whole), PyIceberg
    # the one file of 42's bucket and day.
    covering = [t for t in all_files
                if long_bound(t.file.lower_bounds[1]) <= 42 <= long_bound(
                    t.file.upper_bounds[1])]
    assert duck_files_read(duckdb_con, location) == len(all_files)
    assert 1 <= duck_files_read(duckdb_con, location, "id = 42") <= len(covering) < len(
        all_files)
    day3 = ("ts >= TIMESTAMPTZ '2024-01-03 00:00:00+00' "
            "AND ts < TIMESTAMPTZ '2024-01-04 00:00:00+00'")
    day3_files = [t for t in all_files if "/ts_day=2024-01-03/" in t.file.file_path]
    assert duck_files_read(duckdb_con, location, day3) == len(day3_files) < len(all_files)


def test_two_processes_committing_concurrently_lose_nothing(lake, duckdb_con):
    floe, catalog, _ = lake
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
    floe, catalog, _ = lake
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


def test_merged_manifests_are_read_by_pyiceberg_and_duckdb(lake, duckdb_con):
    floe, catalog, _ = lake
    floe("create", "bronze.shop.merged",
         "--property", "commit.manifest.min-count-to-merge=10")
    out = floe("append-loop", "bronze.shop.merged", "--commits", "300")

    table = catalog.load_table("bronze.shop.merged")
    assert table.metadata_location == out["metadata_location"]
    assert len(table.snapshots()) == 300
    manifests = table.current_snapshot().manifests(table.io)
    assert len(manifests) < 30
    # merged manifests hold the earlier commits' files as EXISTING entries
    assert sum(m.existing_files_count for m in manifests) > 0
    assert sum(m.added_files_count + m.existing_files_count for m in manifests) == 300
    assert py_rows(table) == expected(range(300))
    # each file keeps the sequence number of the commit that added it
    entries = [e for m in manifests for e in m.fetch_manifest_entry(table.io)]
    by_id = {s.snapshot_id: s.sequence_number for s in table.snapshots()}
    assert sorted(e.sequence_number for e in entries) == list(range(1, 301))
    assert all(by_id[e.snapshot_id] == e.sequence_number for e in entries)
    # time travel to a snapshot from before the last merge still reads
    old = table.snapshots()[149]
    assert len(table.scan(snapshot_id=old.snapshot_id).to_arrow()) == 150

    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(range(300))


def test_merged_delete_manifests_are_read_by_pyiceberg_and_duckdb(lake, duckdb_con):
    floe, catalog, _ = lake
    floe("create", "silver.shop.deletes",
         "--property", "commit.manifest.min-count-to-merge=3")
    floe("append", "silver.shop.deletes", "--rows", "20")
    for ids in ("1,2", "5", "7,8,9"):
        out = floe("delete-rows", "silver.shop.deletes", "--ids", ids)
    survivors = sorted(set(range(20)) - {1, 2, 5, 7, 8, 9})

    table = catalog.load_table("silver.shop.deletes")
    manifests = table.current_snapshot().manifests(table.io)
    deletes = [m for m in manifests if m.content.value == 1]
    # the third delete manifest reached min-count 3: one merged delete manifest
    assert len(deletes) == 1 and len(manifests) == 2
    assert deletes[0].added_files_count == 1 and deletes[0].existing_files_count == 2
    entries = deletes[0].fetch_manifest_entry(table.io)
    assert sorted(e.sequence_number for e in entries) == [2, 3, 4]
    assert py_rows(table) == expected(survivors)
    assert duck_rows(duckdb_con, out["metadata_location"]) == expected(survivors)
