"""Spark reads what floe writes (issue 17): PySpark with the Iceberg Spark runtime, a
reader of Iceberg's own Java implementation (sparkreader.py), on the same tables as
floe, through

* `JdbcCatalog` over floe's SQLite catalog with a local warehouse, and
* `RESTCatalog` on Apache Iceberg's REST catalog server with the warehouse on S3
  (moto), with the bearer token the server requires;

and each time Silver, read by Spark, equals the source table row for row and column
for column (oracle.py's rules: numerics with their scale, timestamptz, dates,
booleans, floats, bytea, arrays, NULLs, TOAST values an update left unchanged, a
composite text key), and Bronze, read by Spark, folds (latest change per key) to the
source's keys, with as many changes as PyIceberg reads."""

from __future__ import annotations

import contextlib

import pytest

from floerun import floe  # noqa: F401
from restserver import RestCatalogServer
from s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from sparkreader import add_catalog, quoted, spark_differences, start_spark
from test_silver import silver, wait_bronze

WAREHOUSE = "s3://lake/warehouse/spark"
TOKEN = "floe-spark-reader-token"


@pytest.fixture(scope="module")
def spark():
    session = start_spark()
    try:
        yield session
    finally:
        session.stop()


def make_tables(pg) -> None:
    pg.execute("CREATE TABLE kinds (id bigint PRIMARY KEY, name text, amount numeric(12,3), "
               "at timestamptz, day date, flag boolean, ratio double precision, raw bytea, "
               "tags text[], note text)")
    pg.execute("ALTER TABLE kinds ALTER COLUMN note SET STORAGE EXTERNAL")
    pg.execute("CREATE TABLE pairs (a text, b int, v int, PRIMARY KEY (a, b))")
    pg.execute(
        "INSERT INTO kinds SELECT g, CASE WHEN g % 9 = 0 THEN NULL ELSE "
        "'n° ' || g || ' \"q\" ü 🧊' END, (g * 1.125 - 50)::numeric(12,3), "
        "timestamptz '2026-03-29 01:30:00+00' + g * interval '37 minutes 13.25 seconds', "
        "date '1999-12-31' + g, g % 2 = 0, g / 7.0, decode(md5(g::text), 'hex'), "
        "ARRAY['t' || g, NULL, ''], NULL FROM generate_series(1, 400) g")
    pg.execute("INSERT INTO pairs SELECT 'k' || (g % 13), g / 13, g FROM "
               "generate_series(1, 200) g")


def change_tables(pg) -> None:
    pg.execute("UPDATE kinds SET note = repeat(md5(id::text), 300) WHERE id <= 10")
    pg.execute("UPDATE kinds SET amount = -amount, flag = NOT flag WHERE id % 3 = 0")
    pg.execute("UPDATE kinds SET ratio = '-Infinity', at = NULL WHERE id = 12")
    pg.execute("DELETE FROM kinds WHERE id % 11 = 0")
    pg.execute("INSERT INTO kinds (id, name, day) SELECT g, 'new', date '2100-01-01' "
               "FROM generate_series(401, 450) g")
    pg.execute("UPDATE pairs SET v = -v WHERE b % 2 = 0")
    pg.execute("DELETE FROM pairs WHERE a = 'k3'")


def check_with_spark(spark, run, pg, catalog: str) -> None:
    for table, key in (("kinds", ["id"]), ("pairs", ["a", "b"])):
        ref = quoted(catalog, "silver", "svc", "public", table)
        problems = spark_differences(spark, pg, ref, f"public.{table}", key)
        assert not problems, "\n".join(problems)
        bronze = quoted(catalog, "bronze", "svc", "public", table)
        keys = ", ".join(key)
        latest = spark.sql(
            f"SELECT {keys} FROM (SELECT {keys}, cdc_op, row_number() OVER (PARTITION BY "
            f"{keys} ORDER BY cdc_commit_lsn DESC, cdc_seq DESC) AS rn FROM {bronze}) "
            "WHERE rn = 1 AND cdc_op <> 'd'").collect()
        with pg.connect() as conn:
            source = set(conn.execute(f"SELECT {keys} FROM public.{table}").fetchall())
        assert {tuple(r) for r in latest} == source, table
        changes = spark.sql(f"SELECT count(*) FROM {bronze}").collect()[0][0]
        assert changes == run.load(f"public.{table}").scan().to_arrow().num_rows, table


def stream_and_merge(run, pg) -> None:
    run.start().wait_streaming(timeout=120)
    change_tables(pg)
    wait_bronze(run, pg, "public.kinds", ["id"])
    wait_bronze(run, pg, "public.pairs", ["a", "b"])
    run.stop()
    silver(run)


def test_spark_reads_floes_tables_through_the_jdbc_catalog(floe, pg, spark):
    make_tables(pg)
    run = floe()
    stream_and_merge(run, pg)
    add_catalog(spark, "floe", {
        "catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        "uri": f"jdbc:sqlite:{run.warehouse / 'catalog.db'}",
        "warehouse": f"file://{run.warehouse}",
    })
    check_with_spark(spark, run, pg, "floe")


@contextlib.contextmanager
def merged_on_s3_and_rest(floe, pg, tmp_path, warehouse: str, token: str):
    """make_tables, then a pipeline on s3 + a REST catalog (`token` required) streams
    and merges them (stream_and_merge); yields (s3, rest, run), servers stopped after."""
    s3 = S3Server(tmp_path)
    rest = None
    try:
        s3.make_bucket(warehouse.removeprefix("s3://").split("/")[0])
        rest = RestCatalogServer(tmp_path / "rest", s3, warehouse, token=token)
        make_tables(pg)
        run = floe(warehouse_uri=warehouse,
                   catalog_yaml=f"catalog:\n  type: rest\n  uri: {rest.uri}\n"
                                f"  token: {token}\n",
                   catalog_factory=lambda: rest.pyiceberg_catalog(),
                   extra_yaml=s3.floe_yaml())
        stream_and_merge(run, pg)
        yield s3, rest, run
    finally:
        if rest is not None:
            rest.stop()
        s3.stop()


def test_spark_reads_floes_tables_through_a_rest_catalog_on_s3(floe, pg, spark, tmp_path):
    with merged_on_s3_and_rest(floe, pg, tmp_path, WAREHOUSE, TOKEN) as (s3, rest, run):
        add_catalog(spark, "lake", {
            "type": "rest",
            "uri": rest.uri,
            "token": TOKEN,
            "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
            "s3.endpoint": s3.endpoint,
            "s3.path-style-access": "true",
            "s3.access-key-id": ACCESS_KEY,
            "s3.secret-access-key": SECRET_KEY,
            "client.region": REGION,
        })
        check_with_spark(spark, run, pg, "lake")
