"""Manifests and manifest lists written by floe (Avro C) read back by PyIceberg's own
Avro reader field by field, and PyIceberg's manifests read by floe's reader."""

from __future__ import annotations

import datetime
import json
import subprocess
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.conversions import from_bytes
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (DataFileContent, ManifestContent, ManifestEntryStatus,
                                read_manifest_list)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType,
                             FixedType, IntegerType, LongType, NestedField, StringType, StructType,
                             TimestamptzType, TimeType, UUIDType)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "price", DecimalType(9, 2)),
    NestedField(4, "day", DateType()),
    NestedField(5, "at", TimestamptzType()),
    NestedField(6, "key", UUIDType()),
    NestedField(7, "blob", BinaryType()),
    NestedField(8, "flag", BooleanType()),
    NestedField(9, "score", DoubleType()),
    NestedField(10, "code", FixedType(3)),
    NestedField(11, "t", TimeType()),
    schema_id=4,
)

PARTITION_TYPE = StructType(
    NestedField(1000, "id_bucket", IntegerType()),
    NestedField(1001, "day", DateType()),
    NestedField(1002, "name", StringType()),
    NestedField(1003, "price", DecimalType(9, 2)),
    NestedField(1004, "key", UUIDType()),
    NestedField(1005, "flag", BooleanType()),
    NestedField(1006, "blob", BinaryType()),
    NestedField(1007, "at", TimestamptzType()),
)

KEY = "f79c3e09-677c-4bbd-a479-3f349cb785e7"

ENTRIES = [
    {   # existing file with explicit numbers and every optional field set
        "status": 0, "snapshot_id": 41, "sequence_number": 2, "file_sequence_number": 1,
        "data_file": {
            "content": 0, "file_path": "file:///wh/t/data/a.parquet",
            "partition": [3, 19000, "café", "-12.34", KEY, True, "00ff10", 1700000000123456],
            "record_count": 100, "file_size_in_bytes": 4096,
            "column_sizes": {"1": 10, "2": 20}, "value_counts": {"1": 100, "2": 100},
            "null_value_counts": {"1": 0, "2": 7}, "nan_value_counts": {"9": 2},
            "lower_bounds": {"1": -5, "2": "aa", "3": "-99.50", "4": -3,
                             "5": 1600000000000000, "6": KEY, "7": "0001",
                             "8": False, "9": -1.5, "10": "616263", "11": 0},
            "upper_bounds": {"1": 500, "2": "zz", "3": "1234.56", "4": 20000,
                             "5": 1700000000000000, "6": KEY, "7": "ff",
                             "8": True, "9": 2.25, "10": "646566", "11": 86399999999},
            "key_metadata": "0102", "split_offsets": [4, 1048576],
            "sort_order_id": 0,
        },
    },
    {   # added in this snapshot: sequence numbers and snapshot id inherited
        "status": 1,
        "data_file": {
            "content": 0, "file_path": "file:///wh/t/data/b.parquet",
            "partition": [None, None, None, None, None, None, None, None],
            "record_count": 7, "file_size_in_bytes": 999,
        },
    },
    {   # deleted in this snapshot
        "status": 2, "snapshot_id": 42, "sequence_number": 1, "file_sequence_number": 1,
        "data_file": {
            "content": 0, "file_path": "file:///wh/t/data/c.parquet",
            "partition": [15, -1, "", "0.00", KEY, False, "", 0],
            "record_count": 3, "file_size_in_bytes": 10,
        },
    },
]


def run(tool, *args) -> str:
    out = subprocess.run([str(tool("manifest_tool")), *args], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def partition_value(field_type, value):
    """The tool's JSON form of a partition value, from what PyIceberg decoded."""
    if value is None:
        return None
    if isinstance(field_type, DecimalType):
        return str(value)
    if isinstance(field_type, UUIDType):
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=value))
    if isinstance(field_type, (BinaryType, FixedType)):
        return bytes(value).hex()
    if isinstance(field_type, DateType) and isinstance(value, datetime.date):
        return (value - datetime.date(1970, 1, 1)).days
    return value


@pytest.mark.parametrize("codec", ["deflate", "null"])
def test_pyiceberg_reads_every_field_floe_wrote(tmp_path, tool, codec):
    doc = {
        "schema": json.loads(SCHEMA.model_dump_json()),
        "partition_type": json.loads(PARTITION_TYPE.model_dump_json()),
        "partition_spec": [{"name": "id_bucket", "transform": "bucket[16]",
                            "source-id": 1, "field-id": 1000}],
        "spec_id": 0, "snapshot_id": 43, "parent_snapshot_id": 42,
        "sequence_number": 3, "codec": codec,
        "manifest": str(tmp_path / "m0.avro"),
        "manifest_list": str(tmp_path / "snap-43.avro"),
        "entries": ENTRIES,
    }
    (tmp_path / "in.json").write_text(json.dumps(doc))
    written = json.loads(run(tool, "write", str(tmp_path / "in.json")))

    io = PyArrowFileIO()
    manifests = list(read_manifest_list(io.new_input(str(tmp_path / "snap-43.avro"))))
    assert len(manifests) == 1
    m = manifests[0]
    assert m.manifest_path == str(tmp_path / "m0.avro")
    assert m.manifest_length == written["manifest_length"] == (tmp_path / "m0.avro").stat().st_size
    assert m.partition_spec_id == 0
    assert m.content == ManifestContent.DATA
    assert m.sequence_number == 3
    assert m.min_sequence_number == 2       # the live existing entry's
    assert m.added_snapshot_id == 43
    assert (m.added_files_count, m.existing_files_count, m.deleted_files_count) == (1, 1, 1)
    assert (m.added_rows_count, m.existing_rows_count, m.deleted_rows_count) == (7, 100, 3)
    assert m.key_metadata is None

    # Partition summaries, bounds decoded with PyIceberg's Appendix D reader.
    summaries = m.partitions
    assert len(summaries) == len(PARTITION_TYPE.fields)
    expect_bounds = {
        "id_bucket": (3, 15), "day": (-1, 19000), "name": ("", "café"),
        "price": (Decimal("-12.34"), Decimal("0.00")),
        "key": (uuid.UUID(KEY), uuid.UUID(KEY)), "flag": (False, True),
        "blob": (b"", b"\x00\xff\x10"), "at": (0, 1700000000123456),
    }
    for field, s in zip(PARTITION_TYPE.fields, summaries):
        assert s.contains_null is True, field.name     # the added entry is all nulls
        assert s.contains_nan is False
        lo, hi = expect_bounds[field.name]
        got_lo = from_bytes(field.field_type, s.lower_bound)
        got_hi = from_bytes(field.field_type, s.upper_bound)
        if isinstance(field.field_type, UUIDType):
            got_lo, got_hi = (v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=v)
                              for v in (got_lo, got_hi))
        assert (got_lo, got_hi) == (lo, hi), field.name

    entries = m.fetch_manifest_entry(io, discard_deleted=False)
    assert len(entries) == 3
    # Status, inherited snapshot ids and sequence numbers.
    assert [e.status for e in entries] == [ManifestEntryStatus.EXISTING,
                                           ManifestEntryStatus.ADDED,
                                           ManifestEntryStatus.DELETED]
    assert [e.snapshot_id for e in entries] == [41, 43, 42]
    assert [e.sequence_number for e in entries] == [2, 3, 1]
    assert [e.file_sequence_number for e in entries] == [1, 3, 1]

    for e, want in zip(entries, ENTRIES):
        f, w = e.data_file, want["data_file"]
        assert f.content == DataFileContent.DATA
        assert f.file_path == w["file_path"]
        assert f.file_format.value == "PARQUET"
        got_partition = [partition_value(fld.field_type, f.partition[i])
                         for i, fld in enumerate(PARTITION_TYPE.fields)]
        assert got_partition == w["partition"]
        assert f.record_count == w["record_count"]
        assert f.file_size_in_bytes == w["file_size_in_bytes"]
        for key in ("column_sizes", "value_counts", "null_value_counts",
                    "nan_value_counts"):
            want_map = {int(k): v for k, v in w.get(key, {}).items()}
            assert (getattr(f, key) or {}) == want_map, key
        assert (f.split_offsets or []) == w.get("split_offsets", [])
        assert (f.equality_ids or []) == []
        assert f.sort_order_id == w.get("sort_order_id")
        km = w.get("key_metadata")
        assert f.key_metadata == (bytes.fromhex(km) if km else None)

    # Column bounds decoded by PyIceberg.
    f = entries[0].data_file
    lower = {k: from_bytes(SCHEMA.find_field(k).field_type, v)
             for k, v in f.lower_bounds.items()}
    upper = {k: from_bytes(SCHEMA.find_field(k).field_type, v)
             for k, v in f.upper_bounds.items()}
    assert lower[1] == -5 and upper[1] == 500
    assert lower[2] == "aa" and upper[2] == "zz"
    assert lower[3] == Decimal("-99.50") and upper[3] == Decimal("1234.56")
    assert lower[4] == -3 and upper[4] == 20000
    assert lower[5] == 1600000000000000 and upper[5] == 1700000000000000
    for v in (lower[6], upper[6]):
        assert (v if isinstance(v, uuid.UUID) else uuid.UUID(bytes=v)) == uuid.UUID(KEY)
    assert lower[7] == b"\x00\x01" and upper[7] == b"\xff"
    assert lower[8] is False and upper[8] is True
    assert lower[9] == -1.5 and upper[9] == 2.25
    assert lower[10] == b"abc" and upper[10] == b"def"
    assert lower[11] == 0 and upper[11] == 86399999999
    assert entries[1].data_file.lower_bounds in (None, {})

    # The floe reader sees the same thing (and the headers carry the spec's keys).
    got = json.loads(run(tool, "read", str(tmp_path / "snap-43.avro"),
                         "--partition-type", PARTITION_TYPE.model_dump_json()))
    assert got["metadata"]["snapshot-id"] == "43"
    assert got["metadata"]["parent-snapshot-id"] == "42"
    assert got["metadata"]["sequence-number"] == "3"
    assert got["metadata"]["format-version"] == "2"
    assert got["metadata"]["avro.codec"] == codec
    meta = got["manifests"][0]["metadata"]
    assert meta["format-version"] == "2" and meta["content"] == "data"
    assert meta["partition-spec-id"] == "0" and meta["schema-id"] == "4"
    assert json.loads(meta["schema"])["schema-id"] == 4
    assert [e["snapshot_id"] for e in got["manifests"][0]["entries"]] == [41, 43, 42]


def test_pyiceberg_reads_floe_delete_manifests(tmp_path, tool):
    """A delete manifest: content, equality ids and referenced_data_file."""
    doc = {
        "schema": json.loads(SCHEMA.model_dump_json()),
        "partition_type": {"type": "struct", "fields": []},
        "content": 1, "snapshot_id": 7, "sequence_number": 5,
        "manifest": str(tmp_path / "d.avro"), "manifest_list": str(tmp_path / "l.avro"),
        "entries": [
            {"status": 1, "data_file": {"content": 2, "file_path": "/w/eq.parquet",
                                        "record_count": 2, "file_size_in_bytes": 50,
                                        "equality_ids": [1, 2]}},
            {"status": 1, "data_file": {"content": 1, "file_path": "/w/pos.parquet",
                                        "record_count": 4, "file_size_in_bytes": 60,
                                        "referenced_data_file": "/w/data.parquet"}},
        ],
    }
    (tmp_path / "in.json").write_text(json.dumps(doc))
    run(tool, "write", str(tmp_path / "in.json"))
    io = PyArrowFileIO()
    [m] = read_manifest_list(io.new_input(str(tmp_path / "l.avro")))
    assert m.content == ManifestContent.DELETES
    assert m.partitions == []
    eq, pos = m.fetch_manifest_entry(io, discard_deleted=False)
    assert eq.data_file.content == DataFileContent.EQUALITY_DELETES
    assert list(eq.data_file.equality_ids) == [1, 2]
    assert pos.data_file.content == DataFileContent.POSITION_DELETES
    assert eq.sequence_number == pos.sequence_number == 5
    if hasattr(pos.data_file, "referenced_data_file"):
        # PyIceberg reads field 143 only in its v3 schema; when it does, it must match.
        assert pos.data_file.referenced_data_file in (None, "/w/data.parquet")


def test_floe_reads_manifests_pyiceberg_wrote(tmp_path, tool):
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(3, "day", DateType()),
        NestedField(4, "price", DecimalType(9, 2)),
    )
    spec = PartitionSpec(
        # Identity only: day / bucket need pyiceberg-core, which this environment lacks.
        PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(),
                       name="day"),
        PartitionField(source_id=2, field_id=1001, transform=IdentityTransform(),
                       name="name"),
        PartitionField(source_id=4, field_id=1002, transform=IdentityTransform(),
                       name="price"),
    )
    table = catalog.create_table("db.t", schema=schema, partition_spec=spec)
    arrow_schema = schema.as_arrow()
    d = datetime.date
    for batch in (
        [(1, "a", d(2024, 1, 1), Decimal("1.50")),
         (2, "b", d(2024, 1, 2), Decimal("-2.25")),
         (3, None, None, None)],
        [(4, "a", d(2024, 1, 1), Decimal("9999999.99"))],
    ):
        cols = list(zip(*batch))
        table.append(pa.Table.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(cols, arrow_schema)],
            schema=arrow_schema))
    table = catalog.load_table("db.t")
    snapshot = table.current_snapshot()
    ptype = table.spec().partition_type(table.schema())

    got = json.loads(run(tool, "read", snapshot.manifest_list,
                         "--partition-type", ptype.model_dump_json()))
    assert got["metadata"]["snapshot-id"] == str(snapshot.snapshot_id)
    assert got["metadata"]["format-version"] == "2"

    io = table.io
    want = list(read_manifest_list(io.new_input(snapshot.manifest_list)))
    assert len(got["manifests"]) == len(want) == 2
    total_entries = 0
    for g, w in zip(got["manifests"], want):
        for key in ("manifest_path", "manifest_length", "partition_spec_id",
                    "sequence_number", "min_sequence_number", "added_snapshot_id",
                    "added_files_count", "existing_files_count", "deleted_files_count",
                    "added_rows_count", "existing_rows_count", "deleted_rows_count"):
            assert g[key] == getattr(w, key), key
        assert g["content"] == int(w.content)
        assert len(g["partitions"]) == len(w.partitions or [])
        for gs, ws in zip(g["partitions"], w.partitions or []):
            assert gs["contains_null"] == ws.contains_null
            assert gs["contains_nan"] == ws.contains_nan
            assert gs["lower_bound"] == (ws.lower_bound.hex() if ws.lower_bound else None)
            assert gs["upper_bound"] == (ws.upper_bound.hex() if ws.upper_bound else None)
        assert g["metadata"]["format-version"] == "2"

        w_entries = w.fetch_manifest_entry(io, discard_deleted=False)
        assert len(g["entries"]) == len(w_entries)
        for ge, we in zip(g["entries"], w_entries):
            total_entries += 1
            assert ge["status"] == int(we.status)
            assert ge["snapshot_id"] == we.snapshot_id
            assert ge["sequence_number"] == we.sequence_number
            assert ge["file_sequence_number"] == we.file_sequence_number
            gf, wf = ge["data_file"], we.data_file
            assert gf["content"] == int(wf.content)
            assert gf["file_path"] == wf.file_path
            assert gf["file_format"] == wf.file_format.value
            assert gf["record_count"] == wf.record_count
            assert gf["file_size_in_bytes"] == wf.file_size_in_bytes
            assert gf["partition"] == [partition_value(fld.field_type, wf.partition[i])
                                       for i, fld in enumerate(ptype.fields)]
            for key in ("column_sizes", "value_counts", "null_value_counts",
                        "nan_value_counts"):
                assert {int(k): v for k, v in gf[key].items()} == (getattr(wf, key) or {}), key
            for key in ("lower_bounds", "upper_bounds"):
                assert {int(k): bytes.fromhex(v) for k, v in gf[key].items()} == \
                    (getattr(wf, key) or {}), key
            assert gf["split_offsets"] == list(wf.split_offsets or [])
            assert gf["sort_order_id"] == wf.sort_order_id
    assert total_entries == 4   # 3 files from the first append (3 partitions), 1 more
