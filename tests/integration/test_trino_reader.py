"""Trino reads what floe writes (issue 17): a Trino server with its Iceberg connector
(trinoserver.py) on the same tables as floe, through its REST catalog support on
Apache Iceberg's REST catalog server with the warehouse on S3 (moto), and through
its JDBC catalog on floe's SQLite catalog with a local warehouse. The tables and
changes are test_spark_reader.py's; Silver, read by Trino, equals the source row for
row and column for column (oracle.py's rules), and Bronze, read by Trino, folds
(latest change per key) to the source's keys with as many changes as PyIceberg reads.
floe's namespaces have three levels (`bronze`.`svc`.`public`); Trino names them as
one schema, "bronze.svc.public"."""

from __future__ import annotations

import datetime as dt

from floerun import floe  # noqa: F401
from oracle import reader_differences
from s3server import ACCESS_KEY, REGION, SECRET_KEY
from test_silver import silver, wait_bronze
from test_spark_reader import merged_on_s3_and_rest
from trinoserver import TrinoServer

WAREHOUSE = "s3://lake/warehouse/trino"
TOKEN = "floe-trino-reader-token"


def _python(value):
    # Trino gives a timestamptz in its own zone object: the same instant in UTC, as
    # psycopg gives it.
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    if isinstance(value, list):
        return [_python(v) for v in value]
    return value


def check_with_trino(trino: TrinoServer, run, pg, catalog: str) -> None:
    for table, key in (("kinds", ["id"]), ("pairs", ["a", "b"])):
        silver = f'{catalog}."silver.svc.public"."{table}"'
        names, rows = trino.columns(f"SELECT * FROM {silver}")
        problems = reader_differences(f"Trino {silver}", names,
                                      [{n: _python(v) for n, v in zip(names, r)}
                                       for r in rows], pg, f"public.{table}", key)
        assert not problems, "\n".join(problems)
        bronze = f'{catalog}."bronze.svc.public"."{table}"'
        keys = ", ".join(key)
        _, latest = trino.columns(
            f"SELECT {keys} FROM (SELECT {keys}, cdc_op, row_number() OVER (PARTITION BY "
            f"{keys} ORDER BY cdc_commit_lsn DESC, cdc_seq DESC) AS rn FROM {bronze}) "
            "WHERE rn = 1 AND cdc_op <> 'd'")
        with pg.connect() as conn:
            source = set(conn.execute(f"SELECT {keys} FROM public.{table}").fetchall())
        assert set(latest) == source, table
        _, count = trino.columns(f"SELECT count(*) FROM {bronze}")
        assert count[0][0] == run.load(f"public.{table}").scan().to_arrow().num_rows, table


def test_trino_reads_floes_tables_through_rest_on_s3_and_the_jdbc_catalog(
        floe, pg, tmp_path):
    with merged_on_s3_and_rest(floe, pg, tmp_path, WAREHOUSE, TOKEN) as (s3, rest, on_rest):
        # A second pipeline (its own slot) copying the same source, changed since,
        # into a local warehouse behind floe's SQLite catalog.
        local = floe(service="svc", slot="floe_local")
        local.start().wait_streaming(timeout=120)
        wait_bronze(local, pg, "public.kinds", ["id"])
        wait_bronze(local, pg, "public.pairs", ["a", "b"])
        local.stop()
        silver(local)
        trino = TrinoServer(tmp_path / "trino", {
            "lake": {
                "connector.name": "iceberg",
                "iceberg.catalog.type": "rest",
                "iceberg.rest-catalog.uri": rest.uri,
                "iceberg.rest-catalog.security": "OAUTH2",
                "iceberg.rest-catalog.oauth2.token": TOKEN,
                "iceberg.rest-catalog.nested-namespace-enabled": "true",
                "fs.native-s3.enabled": "true",
                "s3.endpoint": s3.endpoint,
                "s3.region": REGION,
                "s3.path-style-access": "true",
                "s3.aws-access-key": ACCESS_KEY,
                "s3.aws-secret-key": SECRET_KEY,
            },
            "floe": {
                "connector.name": "iceberg",
                "iceberg.catalog.type": "jdbc",
                "iceberg.jdbc-catalog.driver-class": "org.sqlite.JDBC",
                "iceberg.jdbc-catalog.connection-url":
                    f"jdbc:sqlite:{local.warehouse / 'catalog.db'}",
                "iceberg.jdbc-catalog.catalog-name": "floe",
                "iceberg.jdbc-catalog.default-warehouse-dir": f"file://{local.warehouse}",
                "fs.native-local.enabled": "true",
                "local.location": "/",
            },
        })
        try:
            check_with_trino(trino, on_rest, pg, "lake")
            check_with_trino(trino, local, pg, "floe")
        finally:
            trino.stop()
