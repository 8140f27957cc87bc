"""The independent readers the integration tests rely on work offline here."""


def test_duckdb_loads_its_iceberg_extension_without_network(duckdb_con):
    duckdb_con.execute("LOAD iceberg")
    names = {r[0] for r in duckdb_con.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE 'iceberg_%'"
    ).fetchall()}
    assert {"iceberg_scan", "iceberg_metadata", "iceberg_snapshots"} <= names


def test_pyiceberg_sql_catalog_and_duckdb_read_the_same_table(tmp_path, duckdb_con):
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("floe", uri=f"sqlite:///{tmp_path}/catalog.db",
                         warehouse=f"file://{tmp_path}/warehouse")
    catalog.create_namespace("bronze")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    table = catalog.create_table("bronze.t", schema=data.schema)
    table.append(data)
    assert catalog.load_table("bronze.t").scan().to_arrow().sort_by("id") == data
    # DuckDB's iceberg extension reads what PyIceberg wrote, from the metadata file.
    metadata = catalog.load_table("bronze.t").metadata_location.removeprefix("file://")
    duckdb_con.execute("LOAD iceberg")
    assert duckdb_con.execute(
        "SELECT sum(id), count(*) FROM iceberg_scan(?)", [metadata]).fetchone() == (6, 3)
