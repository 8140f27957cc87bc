"""floe's table reader (scan planning + Arrow reads, via tests/tools/scan_tool)
against independent readers: tables written and evolved by PyIceberg are read by
floe and by PyIceberg's own scan, and tables written by floe by floe and DuckDB.
The rows must be the same, with and without filters, and filters on partition
columns must plan fewer files."""

import datetime as dt
import json
import os
import subprocess
import time
import uuid

import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import (DataFile, DataFileContent, FileFormat, ManifestContent,
                                ManifestEntry, ManifestEntryStatus, ManifestWriterV2,
                                write_manifest_list)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import (AddSnapshotUpdate, AssertRefSnapshotId,
                                    SetSnapshotRefUpdate)
from pyiceberg.typedef import Record
from pyiceberg.types import (DoubleType, FloatType, IntegerType, LongType, NestedField,
                             StringType, TimestamptzType)

BASE = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
CATEGORIES = ["red", "green", "blue"]


@pytest.fixture
def lake(tmp_path, tool):
    db = tmp_path / "catalog.db"
    warehouse = f"file://{tmp_path}/wh"
    catalog = SqlCatalog("floe", uri=f"sqlite:///{db}", warehouse=warehouse)

    def scan(table, filter=None, snapshot_id=None, columns=None):
        """floe's rows (as pyarrow gives them) and its plan trailer."""
        out_file = tmp_path / "scan.arrow"
        args = [str(tool("scan_tool")), "--db", str(db), table, "--quiet",
                "--arrow-out", str(out_file)]
        if filter is not None:
            args += ["--filter", filter]
        if snapshot_id is not None:
            args += ["--snapshot-id", str(snapshot_id)]
        if columns is not None:
            args += ["--columns", ",".join(columns)]
        proc = subprocess.run(args, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        trailer = json.loads(proc.stdout.strip().splitlines()[-1])
        with pa.ipc.open_file(out_file) as f:
            rows = f.read_all().to_pylist()
        assert trailer["rows"] == len(rows)
        return rows, trailer

    return catalog, scan, db, warehouse


def sort_rows(rows):
    return sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def py_rows(table, filter=None, snapshot_id=None, columns=None):
    kwargs = {}
    if filter is not None:
        kwargs["row_filter"] = filter
    if snapshot_id is not None:
        kwargs["snapshot_id"] = snapshot_id
    if columns is not None:
        kwargs["selected_fields"] = tuple(columns)
    return table.scan(**kwargs).to_arrow().to_pylist()


def assert_same(catalog, scan, ident, filter=None, snapshot_id=None, columns=None):
    table = catalog.load_table(ident)
    ours, trailer = scan(ident, filter, snapshot_id, columns)
    theirs = py_rows(table, filter, snapshot_id, columns)
    assert sort_rows(ours) == sort_rows(theirs), (filter, snapshot_id, columns)
    if columns is not None and ours:
        assert list(ours[0].keys()) == list(columns)
    return ours, trailer


def rows_table(ids, schema=None, with_null_names=True):
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": [None if (with_null_names and i % 10 == 9) else f"name-{i}" for i in ids],
        "category": [CATEGORIES[i % 3] for i in ids],
        "amount": [i * 1.5 for i in ids],
        "ts": pa.array([BASE + dt.timedelta(hours=5 * i) for i in ids],
                       pa.timestamp("us", tz="UTC")),
    }, schema=schema)


def base_schema():
    return Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "category", StringType(), required=False),
        NestedField(4, "amount", DoubleType(), required=False),
        NestedField(5, "ts", TimestamptzType(), required=False),
    )


FILTERS = [
    None,
    "id = 42",
    "id >= 100",
    "name = 'name-7'",
    "id in (1, 5, 250)",
    "amount < 20.5",
    "name is null",
    "name is not null and id < 30",
    "id >= 10 and id < 20",
    "id < 5 or id > 290",
    "category = 'green'",
    "ts >= '2024-01-20T00:00:00+00:00'",
    "not id >= 3",
]


def floe_filter(f):
    """The filter as scan_tool reads it: timestamps as microseconds."""
    if f is not None and f.startswith("ts >= '"):
        value = dt.datetime.fromisoformat(f.split("'")[1])
        return f"ts >= {int(value.timestamp()) * 1_000_000}"
    return f


def check_filters(catalog, scan, ident, filters=FILTERS):
    table = catalog.load_table(ident)
    for f in filters:
        ours, _ = scan(ident, floe_filter(f))
        theirs = py_rows(table, f)
        assert sort_rows(ours) == sort_rows(theirs), f


def test_unpartitioned_appends_read_like_pyiceberg(lake):
    catalog, scan, _, _ = lake
    catalog.create_namespace("db")
    table = catalog.create_table("db.plain", base_schema())
    arrow_schema = table.schema().as_arrow()
    for start in (0, 100, 200):
        table.append(rows_table(list(range(start, start + 100)), arrow_schema))
    table = catalog.load_table("db.plain")
    ours, trailer = assert_same(catalog, scan, "db.plain")
    assert len(ours) == 300 and trailer["planned_files"] == 3
    check_filters(catalog, scan, "db.plain")
    # column bounds prune whole files
    _, trailer = scan("db.plain", "id >= 250")
    assert trailer["planned_files"] == 1 and trailer["files_skipped_by_metrics"] == 2
    # projection and time travel
    assert_same(catalog, scan, "db.plain", columns=["name", "id"])
    first = table.snapshots()[0].snapshot_id
    ours, _ = assert_same(catalog, scan, "db.plain", snapshot_id=first)
    assert len(ours) == 100
    assert_same(catalog, scan, "db.plain", filter="id > 50", snapshot_id=first)


def test_partitioned_tables_read_like_pyiceberg_and_prune(lake):
    catalog, scan, _, _ = lake
    catalog.create_namespace("db")
    spec = PartitionSpec(
        PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(),
                       name="category"),
        PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4),
                       name="id_bucket"),
        PartitionField(source_id=5, field_id=1002, transform=DayTransform(),
                       name="ts_day"),
    )
    table = catalog.create_table("db.parts", base_schema(), partition_spec=spec)
    arrow_schema = table.schema().as_arrow()
    for start in (0, 60, 120):
        table.append(rows_table(list(range(start, start + 60)), arrow_schema))
    table = catalog.load_table("db.parts")
    all_tasks = list(table.scan().plan_files())
    ours, trailer = assert_same(catalog, scan, "db.parts")
    assert len(ours) == 180
    assert trailer["planned_files"] == len(all_tasks) > 12
    check_filters(catalog, scan, "db.parts")
    # bucket: only files of id 42's bucket (and day, by bounds) are planned
    _, by_id = scan("db.parts", "id = 42")
    assert 1 <= by_id["planned_files"] < trailer["planned_files"]
    assert by_id["files_skipped_by_partition"] > 0
    # identity: one category of three
    _, by_cat = scan("db.parts", "category = 'red'")
    assert by_cat["planned_files"] < trailer["planned_files"]
    assert by_cat["planned_files"] == len(
        list(table.scan(row_filter="category = 'red'").plan_files()))
    # day: a range of timestamps prunes by the day partition
    cutoff = int((BASE + dt.timedelta(days=30)).timestamp()) * 1_000_000
    _, by_day = scan("db.parts", f"ts >= {cutoff}")
    assert by_day["planned_files"] < trailer["planned_files"]


def test_schema_evolution_by_pyiceberg_reads_by_field_id(lake):
    catalog, scan, _, _ = lake
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", IntegerType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "score", FloatType(), required=False),
    )
    table = catalog.create_table("db.evolve", schema)
    table.append(pa.table({
        "id": pa.array(range(50), pa.int32()),
        "name": [f"name-{i}" for i in range(50)],
        "score": pa.array([i / 4 for i in range(50)], pa.float32()),
    }))
    first = catalog.load_table("db.evolve").current_snapshot().snapshot_id
    with table.update_schema() as update:
        update.add_column("extra", StringType())
        update.rename_column("name", "label")
        update.update_column("id", LongType())
        update.update_column("score", DoubleType())
    table = catalog.load_table("db.evolve")
    table.append(pa.table({
        "id": pa.array(range(50, 80), pa.int64()),
        "label": [f"label-{i}" for i in range(50, 80)],
        "score": pa.array([i / 4 for i in range(50, 80)], pa.float64()),
        "extra": [f"x{i}" if i % 2 else None for i in range(50, 80)],
    }, schema=table.schema().as_arrow()))
    ours, _ = assert_same(catalog, scan, "db.evolve")
    assert len(ours) == 80
    by_id = {r["id"]: r for r in ours}
    assert by_id[3] == {"id": 3, "label": "name-3", "score": 0.75, "extra": None}
    assert by_id[51]["extra"] == "x51"
    for f in ["label = 'name-7'", "label = 'label-60'", "id >= 45 and id < 55",
              "extra is null", "extra = 'x51'", "score > 10.0", "id = 3"]:
        assert_same(catalog, scan, "db.evolve", filter=f)
    assert_same(catalog, scan, "db.evolve", columns=["extra", "label"])
    # the first snapshot reads in the schema it was written with
    old, _ = assert_same(catalog, scan, "db.evolve", snapshot_id=first)
    assert set(old[0].keys()) == {"id", "name", "score"} and len(old) == 50


def test_pyiceberg_deletes_read_like_pyiceberg(lake):
    catalog, scan, _, _ = lake
    catalog.create_namespace("db")
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000,
                                        transform=IdentityTransform(), name="category"))
    table = catalog.create_table("db.dels", base_schema(), partition_spec=spec,
                                 properties={"write.delete.mode": "merge-on-read"})
    arrow_schema = table.schema().as_arrow()
    table.append(rows_table(list(range(0, 90)), arrow_schema))
    table.append(rows_table(list(range(90, 120)), arrow_schema))
    before = catalog.load_table("db.dels").current_snapshot().snapshot_id
    # PyIceberg 0.12 falls back to copy-on-write: rewritten files and deleted entries.
    with pytest.warns(UserWarning, match="copy-on-write"):
        table.delete("id = 3")
    table = catalog.load_table("db.dels")
    table.delete("id >= 100 and id < 110")
    table = catalog.load_table("db.dels")
    table.delete("category = 'blue'")  # whole partition: entries deleted, no rewrite
    table = catalog.load_table("db.dels")
    ops = [s.summary.operation.value for s in table.snapshots()]
    assert ops.count("overwrite") + ops.count("delete") >= 3
    ours, _ = assert_same(catalog, scan, "db.dels")
    ids = {r["id"] for r in ours}
    assert 3 not in ids and 105 not in ids and 2 not in ids and 0 in ids
    check_filters(catalog, scan, "db.dels", FILTERS[:6])
    ours, _ = assert_same(catalog, scan, "db.dels", snapshot_id=before)
    assert len(ours) == 120


def test_floe_written_tables_read_like_duckdb(lake, tool, duckdb_con):
    catalog, scan, db, warehouse = lake

    def floe(*args):
        out = subprocess.run([str(tool("table_tool")), "--db", str(db),
                              "--warehouse", warehouse, *args],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    floe("create", "silver.shop.items", "--partition", "bucket:8:id",
         "--partition", "day:ts")
    floe("append", "silver.shop.items", "--start", "0", "--rows", "200")
    out = floe("append", "silver.shop.items", "--start", "200", "--rows", "40")
    duckdb_con.execute("LOAD iceberg")
    location = out["metadata_location"].removeprefix("file://")

    def duck(where=""):
        rel = duckdb_con.execute(
            f"SELECT id, name, amount, ts FROM iceberg_scan(?) {where} ORDER BY id",
            [location])
        cols = [d[0] for d in rel.description]
        return [dict(zip(cols, r)) for r in rel.fetchall()]

    ours, all_plan = scan("silver.shop.items")
    assert sorted(ours, key=lambda r: r["id"]) == duck()
    assert len(ours) == 240
    ours, by_id = scan("silver.shop.items", "id = 42")
    assert ours == duck("WHERE id = 42")
    assert 1 <= by_id["planned_files"] < all_plan["planned_files"]
    ours, _ = scan("silver.shop.items", "id >= 100 and name != 'name-150'")
    assert sorted(ours, key=lambda r: r["id"]) == duck(
        "WHERE id >= 100 AND name != 'name-150'")
    # and PyIceberg agrees too
    assert_same(catalog, scan, "silver.shop.items", filter="id < 17")


# ---- delete files --------------------------------------------------------------------
# PyIceberg 0.12 writes deletes copy-on-write only, so merge-on-read delete files are
# committed here with PyIceberg's own manifest writer (its v2 writer with the manifest
# content switched to deletes) and its catalog commit.


class _DeleteManifestWriter(ManifestWriterV2):
    def content(self):
        return ManifestContent.DELETES

    @property
    def _meta(self):
        return {**super()._meta, "content": "deletes"}


def commit_delete_files(catalog, ident, files):
    """files: (content, partition tuple, arrow rows with PARQUET:field_id, equality ids)."""
    table = catalog.load_table(ident)
    parent = table.current_snapshot()
    snapshot_id = uuid.uuid4().int & ((1 << 62) - 1)
    sequence_number = table.metadata.next_sequence_number()
    location = table.location().removeprefix("file://")
    data_files = []
    for content, partition, rows, equality_ids in files:
        path = f"{location}/data/delete-{uuid.uuid4()}.parquet"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(rows, path)
        data_files.append(DataFile.from_args(
            _table_format_version=2, content=content, file_path=f"file://{path}",
            file_format=FileFormat.PARQUET, partition=Record(*partition),
            record_count=rows.num_rows, file_size_in_bytes=os.path.getsize(path),
            equality_ids=equality_ids))
    manifest_path = f"file://{location}/metadata/{uuid.uuid4()}-m0.avro"
    with _DeleteManifestWriter(table.spec(), table.schema(),
                               table.io.new_output(manifest_path), snapshot_id,
                               "deflate") as writer:
        for f in data_files:
            writer.add_entry(ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=f))
    list_path = f"file://{location}/metadata/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
    with write_manifest_list(2, table.io.new_output(list_path), snapshot_id,
                             parent.snapshot_id, sequence_number, "deflate") as lw:
        lw.add_manifests(parent.manifests(table.io) + [writer.to_manifest_file()])
    snapshot = Snapshot(snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id,
                        sequence_number=sequence_number,
                        timestamp_ms=int(time.time() * 1000), manifest_list=list_path,
                        summary=Summary(Operation.OVERWRITE),
                        schema_id=table.schema().schema_id)
    catalog.commit_table(
        table, (AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id),),
        (AddSnapshotUpdate(snapshot=snapshot),
         SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snapshot_id)))
    return catalog.load_table(ident)


def position_rows(pairs):
    return pa.table(
        [pa.array([p for p, _ in pairs], pa.string()),
         pa.array([n for _, n in pairs], pa.int64())],
        schema=pa.schema([
            pa.field("file_path", pa.string(), nullable=False,
                     metadata={"PARQUET:field_id": "2147483546"}),
            pa.field("pos", pa.int64(), nullable=False,
                     metadata={"PARQUET:field_id": "2147483545"})]))


def test_position_and_equality_deletes_follow_the_spec(lake, duckdb_con):
    catalog, scan, _, _ = lake
    catalog.create_namespace("db")
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000,
                                        transform=IdentityTransform(), name="category"))
    ident = "db.mor"
    table = catalog.create_table(ident, base_schema(), partition_spec=spec)
    table.append(rows_table(list(range(60)), table.schema().as_arrow()))
    table = catalog.load_table(ident)
    files = {t.file.partition[0]: t.file.file_path for t in table.scan().plan_files()}
    assert sorted(files) == sorted(CATEGORIES)

    # Position deletes, each file in its data file's partition.
    table = commit_delete_files(catalog, ident, [
        (DataFileContent.POSITION_DELETES, ("red",),
         position_rows([(files["red"], 0), (files["red"], 5)]), None),
        (DataFileContent.POSITION_DELETES, ("green",),
         position_rows([(files["green"], 1)]), None),
    ])
    duckdb_con.execute("LOAD iceberg")

    def duck():
        rel = duckdb_con.execute(
            "SELECT id FROM iceberg_scan(?) ORDER BY id",
            [table.metadata_location.removeprefix("file://")])
        return [r[0] for r in rel.fetchall()]

    ours, trailer = assert_same(catalog, scan, ident)
    assert trailer["task_delete_files"] == 2
    assert len(ours) == 57 and sorted(r["id"] for r in ours) == duck()
    for f in ["category = 'red'", "id < 10", "name is null"]:
        assert_same(catalog, scan, ident, filter=f)
    _, blue = scan(ident, "category = 'blue'")
    assert blue["planned_files"] == 1 and blue["task_delete_files"] == 0

    # Equality deletes on `name` in partition green: rows of green named name-1 or
    # name-4 go; name-3 is red, so that row stays. Rows appended afterwards (a higher
    # sequence number) with a deleted name stay too.
    before = table.current_snapshot().snapshot_id
    eq_rows = pa.table([pa.array(["name-1", "name-4", "name-3"])], schema=pa.schema([
        pa.field("name", pa.string(), metadata={"PARQUET:field_id": "2"})]))
    table = commit_delete_files(catalog, ident, [
        (DataFileContent.EQUALITY_DELETES, ("green",), eq_rows, [2])])
    later = rows_table([1000, 1001], table.schema().as_arrow())
    later = later.set_column(1, "name", pa.array(["name-1", "name-4"]))
    later = later.set_column(2, "category", pa.array(["green", "green"]))
    table.append(later)
    table = catalog.load_table(ident)

    expected = [r for r in py_rows(table, snapshot_id=before)
                if not (r["category"] == "green" and r["name"] in ("name-1", "name-4"))]
    expected += later.to_pylist()
    ours, trailer = scan(ident)
    assert sort_rows(ours) == sort_rows(expected)
    ids = {r["id"] for r in ours}
    assert 3 in ids and 1 not in ids and 4 not in ids and {1000, 1001} <= ids
    ours, _ = scan(ident, "name = 'name-4'")
    assert [r["id"] for r in ours] == [1001]


def test_files_of_older_partition_specs_are_planned_under_their_own_spec(lake):
    catalog, scan, _, _ = lake
    catalog.create_namespace("db")
    ident = "db.specs"
    table = catalog.create_table(ident, base_schema())
    table.append(rows_table(list(range(0, 40)), table.schema().as_arrow()))
    with table.update_spec() as update:
        update.add_field("id", BucketTransform(4), "id_bucket")
    table = catalog.load_table(ident)
    table.append(rows_table(list(range(40, 80)), table.schema().as_arrow()))
    with table.update_spec() as update:
        update.add_identity("category")
    table = catalog.load_table(ident)
    table.append(rows_table(list(range(80, 120)), table.schema().as_arrow()))
    table = catalog.load_table(ident)
    assert len(table.specs()) == 3
    ours, everything = assert_same(catalog, scan, ident)
    assert len(ours) == 120
    check_filters(catalog, scan, ident)
    _, by_id = scan(ident, "id = 85")
    # the unpartitioned file is kept by bounds only when they allow 85: they do not
    assert by_id["planned_files"] < everything["planned_files"]
    assert by_id["planned_files"] == len(list(table.scan(row_filter="id = 85").plan_files()))
