"""floe's Parquet data-file writer, checked by readers that are not floe:
DuckDB (parquet_schema / parquet_metadata / parquet_bloom_probe) and pyarrow."""

import json
import os
import subprocess

import pyarrow.parquet as pq
import pytest

ROWS = 5000
ROW_GROUP_ROWS = 2000
FIELD_IDS = {"id": 1, "name": 2, "amount": 3, "tags": 4, "element": 5}


@pytest.fixture(scope="module")
def sample(tool, tmp_path_factory):
    path = tmp_path_factory.mktemp("parquet") / "sample.parquet"
    out = subprocess.run(
        [str(tool("write_parquet_sample")), "--out", str(path), "--rows", str(ROWS),
         "--batch-rows", "700", "--row-group-rows", str(ROW_GROUP_ROWS),
         "--bloom", "id", "--bloom", "name", "--fpp", "0.001"],
        check=True, capture_output=True, text=True)
    return path, json.loads(out.stdout)


def expected_row(i):
    return {"id": 2 * i, "name": None if i % 7 == 0 else f"name-{i}", "amount": i / 4.0,
            "tags": [f"t{i % 3}"]}


def test_pyarrow_reads_back_every_row(sample):
    path, _ = sample
    table = pq.read_table(path)
    assert table.num_rows == ROWS
    assert table.to_pylist() == [expected_row(i) for i in range(ROWS)]


def test_duckdb_sees_the_iceberg_field_ids(sample, duckdb_con):
    path, _ = sample
    ids = dict(duckdb_con.execute(
        "SELECT name, field_id FROM parquet_schema(?) WHERE field_id IS NOT NULL",
        [str(path)]).fetchall())
    assert ids == FIELD_IDS
    # and pyarrow agrees, through the Arrow field metadata
    schema = pq.read_schema(path)
    assert schema.field("id").metadata[b"PARQUET:field_id"] == b"1"
    assert schema.field("tags").type.value_field.metadata[b"PARQUET:field_id"] == b"5"


def test_duckdb_sees_zstd_statistics_and_bloom_filters_where_asked(sample, duckdb_con):
    path, _ = sample
    rows = duckdb_con.execute(
        "SELECT row_group_id, path_in_schema, compression, stats_min, stats_max, "
        "stats_null_count, bloom_filter_offset FROM parquet_metadata(?) "
        "ORDER BY row_group_id, column_id", [str(path)]).fetchall()
    assert {r[0] for r in rows} == {0, 1, 2}
    for rg, col, codec, lo, hi, nulls, bloom in rows:
        assert codec == "ZSTD", (rg, col)
        first, last = rg * ROW_GROUP_ROWS, min(ROWS, (rg + 1) * ROW_GROUP_ROWS) - 1
        if col == "id":
            assert (int(lo), int(hi)) == (2 * first, 2 * last)
            assert nulls == 0
        if col == "name":
            assert nulls == sum(1 for i in range(first, last + 1) if i % 7 == 0)
        if col in ("id", "name"):
            assert bloom is not None and bloom > 0, (rg, col)
        else:
            assert bloom is None, (rg, col)


def test_bloom_filters_answer_present_and_absent_keys(sample, duckdb_con):
    path, _ = sample

    def excluded(column, value):
        return dict(duckdb_con.execute(
            "SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe(?, ?, ?)",
            [str(path), column, value]).fetchall())

    # Present keys: the row group holding them never excludes them.
    for i in (0, 1, 1999, 2000, 4321, ROWS - 1):
        assert excluded("id", 2 * i)[i // ROW_GROUP_ROWS] is False
        if i % 7:
            assert excluded("name", f"name-{i}")[i // ROW_GROUP_ROWS] is False
    # Absent keys are excluded, bar the rare false positive (fpp 0.001).
    probes = [excluded("id", 2 * i + 1) for i in range(0, ROWS, 25)]
    probes += [excluded("name", f"nobody-{i}") for i in range(200)]
    answers = [v for p in probes for v in p.values()]
    assert sum(answers) >= 0.98 * len(answers)
    # A column without a bloom filter can never exclude.
    assert set(excluded("amount", 12345.0).values()) == {False}


def test_floe_metrics_agree_with_the_file(sample):
    path, metrics = sample
    md = pq.ParquetFile(path).metadata
    assert metrics["record_count"] == md.num_rows == ROWS
    assert metrics["file_size_bytes"] == os.path.getsize(path)
    assert len(metrics["split_offsets"]) == md.num_row_groups == 3
    by_path = {c["path"]: c for c in metrics["columns"]}
    assert {c["path"]: c["field_id"] for c in metrics["columns"]} == {
        "id": 1, "name": 2, "amount": 3, "tags.list.element": 5}
    for ci in range(md.num_columns):
        col = md.row_group(0).column(ci)
        m = by_path[col.path_in_schema]
        assert m["value_count"] == sum(md.row_group(r).column(ci).num_values
                                       for r in range(md.num_row_groups))
        assert m["null_count"] == sum(md.row_group(r).column(ci).statistics.null_count
                                      for r in range(md.num_row_groups))
        assert m["compressed_size"] == sum(md.row_group(r).column(ci).total_compressed_size
                                           for r in range(md.num_row_groups))
        assert m["has_bloom_filter"] == (col.path_in_schema in ("id", "name"))
        assert m["has_bounds"]
    assert by_path["name"]["null_count"] == sum(1 for i in range(ROWS) if i % 7 == 0)
