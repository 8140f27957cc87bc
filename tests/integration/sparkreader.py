"""PySpark with the Iceberg Spark runtime as an independent reader of floe's tables
(issue 17), through Apache Iceberg's own Java catalogs: `RESTCatalog` (floe on s3 +
a REST catalog) and `JdbcCatalog` (floe's SQLite catalog). Not a test file.

scripts/bootstrap installs PySpark (requirements-dev.txt) and copies the jars of
scripts/spark-reader/pom.xml (the Iceberg Spark runtime, the AWS bundle for S3FileIO,
SQLite's JDBC driver) into .venv/spark-jars. Spark runs in this process's JVM
(local[1], UI off, bound to 127.0.0.1, session time zone UTC); one session serves a
test module (`spark` fixture in the test files), each catalog added to it by name.

`spark_differences(spark, pg, table_ref, source_table, key)` compares what Spark
reads with the source table read by psycopg (oracle.py's rules: the same columns,
keys and values of the same Python type), after turning Spark's Python values into
psycopg's: a timestamptz (Spark's TimestampType, given naive in UTC) made aware, a
binary value bytes.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

from oracle import reader_differences

SPARK_JARS = Path(sys.prefix) / "spark-jars"


def start_spark():
    """A local SparkSession with the Iceberg runtime on its class path."""
    from pyspark.sql import SparkSession

    jars = sorted(SPARK_JARS.glob("*.jar"))
    if not jars:
        raise RuntimeError(f"no jars in {SPARK_JARS}; run scripts/bootstrap")
    return (SparkSession.builder.master("local[1]").appName("floe-reader")
            .config("spark.jars", ",".join(str(j) for j in jars))
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.memory", "1g")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate())


def add_catalog(spark, name: str, props: dict[str, str]) -> None:
    """Names an Iceberg catalog in the session (SparkCatalog over `props`)."""
    spark.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
    for k, v in props.items():
        spark.conf.set(f"spark.sql.catalog.{name}.{k}", v)


def quoted(*parts: str) -> str:
    """A multi-part identifier for Spark SQL, every part back-quoted."""
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def _python(value: Any, aware: bool) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    if aware and isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, list):
        return [_python(v, aware) for v in value]
    return value


def spark_rows(spark, ref: str) -> tuple[list[str], list[dict]]:
    """The columns and rows Spark reads from the table `ref` (quoted())."""
    from pyspark.sql.types import ArrayType, TimestampType

    df = spark.table(ref)
    aware = {f.name for f in df.schema.fields
             if isinstance(f.dataType, TimestampType) or (
                 isinstance(f.dataType, ArrayType)
                 and isinstance(f.dataType.elementType, TimestampType))}
    rows = [{k: _python(v, k in aware) for k, v in r.asDict(recursive=True).items()}
            for r in df.collect()]
    return df.columns, rows


def spark_differences(spark, pg, ref: str, table, key: list[str]) -> list[str]:
    """How the Silver table Spark reads at `ref` differs from the source `table`."""
    names, rows = spark_rows(spark, ref)
    return reader_differences(f"Spark {ref}", names, rows, pg, table, key)
