#!/usr/bin/env python3
"""Spark's side of the Silver comparison in bench/peers_bench.py (not run alone).

PySpark in local mode (local[2]) with the Iceberg Spark runtime and a Hadoop catalog
`bench` on the local disk. Two commands, each printing one JSON line on stdout:

* setup --files F.json --buckets N: creates bench.db.silver_orders (format 2,
  merge-on-read for merge/update/delete, bucket(N, order_id), write ordered by
  order_id, as floe's Silver table) and appends the Parquet data files listed in
  F.json (floe's starting Silver table, which holds data files only); prints the
  snapshot id.
* merge --bronze META --watermark W --snapshot S: rolls the table back to snapshot S
  if needed (a metadata-only commit), then runs and times ONE statement:

      MERGE INTO bench.db.silver_orders t
      USING (the latest Bronze change per key with cdc_commit_lsn > W) s
      ON t.order_id = s.order_id
      WHEN MATCHED AND s.cdc_op = 'd' THEN DELETE
      WHEN MATCHED THEN UPDATE SET <every column>
      WHEN NOT MATCHED AND s.cdc_op <> 'd' THEN INSERT <every column>

  The Bronze table is read by Spark itself from its metadata file (the same
  increment floe silver applies). Prints the statement's seconds, the JVM's CPU
  seconds during it, the session start-up time, the JVM's peak RSS, the new
  snapshot's summary and the table's current metadata file.

Common options: --jar (the iceberg-spark-runtime jar), --warehouse, --driver-memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

COLUMNS = ["order_id", "customer_id", "status", "amount", "created_at", "note",
           "cdc_commit_lsn"]
TABLE = "bench.db.silver_orders"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def jvm_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def jvm_hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def session(args):
    from pyspark.sql import SparkSession

    t0 = time.perf_counter()
    spark = (SparkSession.builder.master("local[2]").appName("floe-peers-bench")
             .config("spark.jars", args.jar)
             .config("spark.driver.memory", args.driver_memory)
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.extensions",
                     "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
             .config("spark.sql.catalog.bench", "org.apache.iceberg.spark.SparkCatalog")
             .config("spark.sql.catalog.bench.type", "hadoop")
             .config("spark.sql.catalog.bench.warehouse", args.warehouse)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    return spark, pid, time.perf_counter() - t0


def current_metadata(spark) -> str:
    rows = spark.sql(f"SELECT file FROM {TABLE}.metadata_log_entries "
                     "ORDER BY timestamp DESC LIMIT 1").collect()
    return rows[0][0].removeprefix("file:")


def setup(args) -> dict:
    spark, pid, start_s = session(args)
    files = json.loads(Path(args.files).read_text())
    df = spark.read.parquet(*files)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench.db")
    spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
    schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in df.schema.fields)
    spark.sql(f"""CREATE TABLE {TABLE} ({schema}) USING iceberg
      PARTITIONED BY (bucket({int(args.buckets)}, order_id))
      TBLPROPERTIES ('format-version' = '2',
                     'write.merge.mode' = 'merge-on-read',
                     'write.update.mode' = 'merge-on-read',
                     'write.delete.mode' = 'merge-on-read',
                     'write.target-file-size-bytes' = '134217728')""")
    spark.sql(f"ALTER TABLE {TABLE} WRITE ORDERED BY order_id")
    t0 = time.perf_counter()
    df.writeTo(TABLE).append()
    load_s = time.perf_counter() - t0
    snap = spark.sql(f"SELECT snapshot_id, summary FROM {TABLE}.snapshots "
                     "ORDER BY committed_at DESC LIMIT 1").collect()[0]
    out = {"snapshot_id": int(snap[0]), "rows": int(snap[1]["total-records"]),
           "data_files": int(snap[1]["total-data-files"]),
           "bytes": int(snap[1]["total-files-size"]), "load_seconds": load_s,
           "session_seconds": start_s, "schema": schema}
    spark.stop()
    return out


def merge(args) -> dict:
    spark, pid, start_s = session(args)
    cur = spark.sql(f"SELECT snapshot_id FROM {TABLE}.history "
                    "ORDER BY made_current_at DESC LIMIT 1").collect()[0][0]
    if int(cur) != int(args.snapshot):
        spark.sql(f"CALL bench.system.rollback_to_snapshot('db.silver_orders', "
                  f"{int(args.snapshot)})")
    bronze = spark.read.format("iceberg").load(args.bronze)
    bronze.createOrReplaceTempView("bronze")
    sets = ", ".join(f"t.{c} = s.{c}" for c in COLUMNS if c != "order_id")
    cols = ", ".join(COLUMNS)
    vals = ", ".join(f"s.{c}" for c in COLUMNS)
    statement = f"""MERGE INTO {TABLE} t
      USING (SELECT * FROM (
               SELECT *, row_number() OVER (PARTITION BY order_id
                                            ORDER BY cdc_commit_lsn DESC, cdc_seq DESC) AS rn
               FROM bronze WHERE cdc_commit_lsn > {int(args.watermark)}) x
             WHERE rn = 1) s
      ON t.order_id = s.order_id
      WHEN MATCHED AND s.cdc_op = 'd' THEN DELETE
      WHEN MATCHED THEN UPDATE SET {sets}
      WHEN NOT MATCHED AND s.cdc_op <> 'd' THEN INSERT ({cols}) VALUES ({vals})"""
    cpu0 = jvm_cpu(pid)
    t0 = time.perf_counter()
    spark.sql(statement)
    merge_s = time.perf_counter() - t0
    cpu = jvm_cpu(pid) - cpu0
    hwm = jvm_hwm_kb(pid)
    snap = spark.sql(f"SELECT snapshot_id, summary FROM {TABLE}.snapshots "
                     "ORDER BY committed_at DESC LIMIT 1").collect()[0]
    out = {"merge_seconds": merge_s, "merge_jvm_cpu_s": cpu, "session_seconds": start_s,
           "jvm_peak_rss_kb": hwm, "snapshot_id": int(snap[0]),
           "summary": dict(snap[1]), "metadata": current_metadata(spark),
           "statement": " ".join(statement.split())}
    spark.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--jar", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--driver-memory", default="8g")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("--files", required=True)
    s.add_argument("--buckets", required=True)
    m = sub.add_parser("merge")
    m.add_argument("--bronze", required=True)
    m.add_argument("--watermark", required=True)
    m.add_argument("--snapshot", required=True)
    args = p.parse_args()
    out = setup(args) if args.cmd == "setup" else merge(args)
    print(json.dumps(out, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
