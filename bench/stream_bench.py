#!/usr/bin/env python3
"""Streaming and snapshot benchmarks of floe against their physical limits.

Run by bench/run after the Iceberg bench, and by bench/versions_bench.py once per
PostgreSQL version; prints one JSON document on stdout, progress on stderr.
Everything happens on one throwaway cluster (tests/integration/pgcluster.py) of
FLOE_PG_VERSION (15 by default), read by that version's pg_recvlogical (18's for
17, whose binaries carry no client programs).

Streaming (issues 4, 5). For each workload, one logical `pgoutput` slot per
consumer and run is created BEFORE the backlog is generated, so every consumer
drains the very same WAL from its own slot, up to the backlog's end:

* `pg_recvlogical --endpos` to /dev/null: the physical limit of one slot (the
  walsender's decoding plus the wire);
* floe decode-only: tests/tools/stream_tool --summary --ack --quiet
  --max-transactions T (floe's ChangeStream: pgoutput decoding, type conversion
  into Arrow batches, acknowledgements; no output);
* floe end-to-end: `floe run` (snapshot: never, checkpoint.interval 1s), timed
  from start until Bronze's committed `floe.commit-lsn` reaches the last
  transaction's commit LSN, then stopped with SIGTERM.

Runs are interleaved (run 1 of every consumer, then run 2, ...); each figure is
the median. Bytes: one extra, untimed pg_recvlogical drain writes the pgoutput
stream to a file (pgoutput bytes per change); Bronze's Parquet bytes are the data
files of the last floe run.

Snapshot (issue 4): `COPY (SELECT * FROM t) TO STDOUT` through psql to /dev/null
(the limit: one COPY stream; the same with `(FORMAT binary)` for reference) against
tests/tools/snapshot_tool with 1, 2 and 4 workers (floe's SnapshotReader over an
exported snapshot, decoding into Arrow arrays of the type mapping, no checksum), in
each of BENCH_SNAPSHOT_MODES: `arrow-binary` (binary COPY), `arrow-text` (text COPY
through the text converters), `text` (text values only, what `floe run`'s sink is
handed today).

Environment: FLOE_BUILD_DIR (default build/release), BENCH_STREAM_ROWS (2000000),
BENCH_STREAM_TX_ROWS (2000), BENCH_STREAM_MIXED_TX (200000), BENCH_STREAM_RUNS (3),
BENCH_SNAPSHOT_ROWS (2000000), BENCH_SNAPSHOT_RUNS (BENCH_STREAM_RUNS),
BENCH_SNAPSHOT_WORKERS (1,2,4), BENCH_SNAPSHOT_MODES (arrow-binary,arrow-text,text),
BENCH_PARTS (bulk,mixed,snapshot,sustained: which parts run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from pgcluster import PgCluster, client_tool  # noqa: E402

import psycopg  # noqa: E402

BUILD = Path(os.environ.get("FLOE_BUILD_DIR", ROOT / "build" / "release")).resolve()
FLOE = BUILD / "src" / "floe" / "cli" / "floe"
STREAM_TOOL = BUILD / "tests" / "tools" / "stream_tool"
SNAPSHOT_TOOL = BUILD / "tests" / "tools" / "snapshot_tool"

ROWS = int(os.environ.get("BENCH_STREAM_ROWS", "2000000"))
TX_ROWS = int(os.environ.get("BENCH_STREAM_TX_ROWS", "2000"))
MIXED_TX = int(os.environ.get("BENCH_STREAM_MIXED_TX", "200000"))
RUNS = int(os.environ.get("BENCH_STREAM_RUNS", "3"))
SNAP_ROWS = int(os.environ.get("BENCH_SNAPSHOT_ROWS", "2000000"))
SNAP_RUNS = int(os.environ.get("BENCH_SNAPSHOT_RUNS", str(RUNS)))
SNAP_WORKERS = [int(w) for w in
                os.environ.get("BENCH_SNAPSHOT_WORKERS", "1,2,4").split(",")]
SNAP_MODES = os.environ.get("BENCH_SNAPSHOT_MODES", "arrow-binary,arrow-text,text").split(",")
PARTS = os.environ.get("BENCH_PARTS", "bulk,mixed,snapshot,sustained").split(",")
# snapshot_tool arguments of each mode.
SNAP_MODE_ARGS = {
    "arrow-binary": ["--output", "arrow", "--copy-format", "binary"],
    "arrow-text": ["--output", "arrow", "--copy-format", "text"],
    "text": ["--output", "text"],
}

# The server is the same for every consumer; these only keep checkpoints out of the
# way of the backlog generation.
SERVER_CONF = {"max_wal_size": "'8GB'", "checkpoint_timeout": "'30min'"}

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"stream_bench: {msg}", file=sys.stderr, flush=True)


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def lsn_text(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


# -- processes ----------------------------------------------------------------------


def run_timed(args: list[str], stdout=subprocess.DEVNULL, timeout: float = 3600):
    """Runs a process to completion; returns (wall seconds, rusage, stdout text or
    None), with rusage.ru_maxrss replaced by the child's own peak RSS in KiB. CPU
    comes from wait4 on this very child. Peak RSS is VmHWM, sampled every few ms
    while it runs: wait4's ru_maxrss would include this Python process's, which the
    child inherits at fork/exec."""
    out_file = None
    if stdout == subprocess.PIPE:
        out_file = tempfile.TemporaryFile()
        stdout = out_file
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=stdout,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    hwm = 0
    while True:
        try:
            hwm = max(hwm, proc_hwm_kb(proc.pid))
        except (OSError, ValueError):
            pass
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{args[0]} did not finish within {timeout}s")
        time.sleep(0.005)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    text = None
    if out_file is not None:
        out_file.seek(0)
        text = out_file.read().decode(errors="replace")
        out_file.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {proc.returncode}:\n"
                           f"{text or ''}\n{err[-4000:]}")
    return seconds, Usage(usage.ru_utime, usage.ru_stime, hwm), text


class Usage:
    def __init__(self, utime: float, stime: float, maxrss_kb: int):
        self.ru_utime, self.ru_stime, self.ru_maxrss = utime, stime, maxrss_kb


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command: state is field 3; utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def proc_hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


# -- the cluster ----------------------------------------------------------------------


class Bench:
    def __init__(self, pg: PgCluster, work: Path):
        self.pg = pg
        self.work = work
        self.conn = psycopg.connect(pg.dsn(), autocommit=True)

    def sql(self, query: str, params=None):
        cur = self.conn.execute(query, params)
        return cur.fetchall() if cur.description else None

    def one(self, query: str, params=None):
        return self.sql(query, params)[0][0]

    def create_slots(self, names: list[str]) -> None:
        for name in names:
            self.sql("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))

    def drop_slots(self, names: list[str]) -> None:
        for name in names:
            self.sql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = %s", (name,))

    def checkpoint_and_settle(self) -> None:
        self.sql("CHECKPOINT")
        time.sleep(1)

    # -- consumers ----------------------------------------------------------------

    def recvlogical_args(self, slot: str, pub: str, proto: int, end: str, out: str,
                         binary: bool = False):
        return [str(client_tool("pg_recvlogical")), "-h", "127.0.0.1",
                "-p", str(self.pg.port), "-U", "postgres", "-d", "postgres",
                "--slot", slot, "--start", "--no-loop",
                "-o", f"proto_version={proto}", "-o", f"publication_names={pub}",
                "-o", "messages=true", "-o", "streaming=on",
                *(["-o", "binary=true"] if binary else []),
                "--endpos", end, "-f", out]

    def pg_recvlogical(self, slot, pub, proto, end, out="/dev/null", binary=False):
        seconds, usage, _ = run_timed(
            self.recvlogical_args(slot, pub, proto, end, out, binary))
        return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_kb": usage.ru_maxrss}

    def stream_tool_args(self, slot, pub, transactions, binary=False):
        return [str(STREAM_TOOL), "--dsn", self.pg.dsn(), "--slot", slot,
                "--publication", pub, "--summary", "--ack", "--quiet",
                "--max-transactions", str(transactions), "--seconds", "3600",
                *(["--binary"] if binary else [])]

    def floe_decode(self, slot, pub, transactions, changes, binary=False):
        seconds, usage, text = run_timed(
            self.stream_tool_args(slot, pub, transactions, binary), stdout=subprocess.PIPE)
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        start, end = lines[0], lines[-1]
        if end.get("type") != "END" or end["reason"] != "max_transactions" or \
                end["rows"] != changes or end["transactions"] != transactions:
            raise RuntimeError(f"stream_tool did not deliver the backlog: {end}")
        return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_kb": usage.ru_maxrss, "proto_version": start["proto_version"],
                "last_commit_lsn": end["last_commit_lsn"],
                "last_end_lsn": end["last_end_lsn"]}

    def floe_config(self, base: Path, slot: str, pub: str, interval: str = "1s") -> Path:
        warehouse = base / "warehouse"
        warehouse.mkdir(parents=True)
        config = base / "pipeline.yaml"
        config.write_text(
            "service: bench\n"
            "source:\n"
            f"  conninfo: \"{self.pg.dsn()}\"\n"
            f"  slot: {slot}\n"
            f"  publication: {pub}\n"
            "  snapshot: never\n"
            f"warehouse: {warehouse}\n"
            "checkpoint:\n"
            f"  interval: {interval}\n"
            "metrics:\n"
            "  listen: 127.0.0.1:0\n")
        return config

    @staticmethod
    def current_summary(warehouse: Path, table: str) -> dict | None:
        """The summary of Bronze `table`'s current snapshot, straight from the SQLite
        catalog and the metadata file it points at (None: nothing committed yet)."""
        db = warehouse / "catalog.db"
        if not db.exists():
            return None
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
            try:
                row = con.execute(
                    "SELECT metadata_location FROM iceberg_tables WHERE "
                    "table_namespace = 'bronze.bench.public' AND table_name = ?",
                    (table,)).fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            return None
        if not row or not row[0]:
            return None
        meta = json.loads(Path(row[0].removeprefix("file://")).read_text())
        current = meta.get("current-snapshot-id")
        for snap in meta.get("snapshots", []):
            if snap["snapshot-id"] == current:
                return snap.get("summary", {})
        return None

    @staticmethod
    def committed_lsn(warehouse: Path, table: str) -> int | None:
        """floe.commit-lsn of the table's current snapshot (None: nothing committed
        yet)."""
        value = (Bench.current_summary(warehouse, table) or {}).get("floe.commit-lsn")
        return int(value) if value is not None else None

    def floe_run(self, base: Path, slot: str, pub: str, table: str, target_lsn: int,
                 changes: int):
        config = self.floe_config(base, slot, pub)
        warehouse = base / "warehouse"
        log_path = base / "floe.log"
        with open(log_path, "wb") as log_file:
            t0 = time.perf_counter()
            proc = subprocess.Popen([str(FLOE), "run", str(config)],
                                    stdin=subprocess.DEVNULL, stdout=log_file,
                                    stderr=subprocess.STDOUT, cwd=base)
            try:
                while True:
                    if proc.poll() is not None:
                        raise RuntimeError(f"floe run exited {proc.returncode}:\n"
                                           + log_path.read_text()[-4000:])
                    lsn = self.committed_lsn(warehouse, table)
                    if lsn is not None and lsn >= target_lsn:
                        break
                    if time.perf_counter() - t0 > 3600:
                        raise RuntimeError("floe run did not catch up within an hour")
                    time.sleep(0.05)
                seconds = time.perf_counter() - t0
                cpu = proc_cpu_seconds(proc.pid)
                hwm = proc_hwm_kb(proc.pid)
                proc.send_signal(signal.SIGTERM)
                rc = proc.wait(120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if rc != 0:
            raise RuntimeError(f"floe run exited {rc} on SIGTERM:\n"
                               + log_path.read_text()[-4000:])
        data = [p for p in warehouse.rglob("*.parquet")
                if f"/{table}/" in str(p) and "/data/" in str(p)]
        parquet_bytes = sum(p.stat().st_size for p in data)
        total = self.bronze_rows(warehouse, table)
        if total != changes:
            raise RuntimeError(f"Bronze {table} holds {total} rows, expected {changes}")
        return {"seconds": seconds, "cpu_s": cpu, "peak_rss_kb": hwm,
                "parquet_bytes": parquet_bytes, "data_files": len(data)}

    @staticmethod
    def bronze_rows(warehouse: Path, table: str) -> int:
        from pyiceberg.catalog.sql import SqlCatalog

        cat = SqlCatalog("floe", uri=f"sqlite:///{warehouse / 'catalog.db'}",
                         warehouse=f"file://{warehouse}")
        snap = cat.load_table(("bronze", "bench", "public", table)).current_snapshot()
        return int(snap.summary.get("total-records", -1)) if snap else 0


# -- workloads ------------------------------------------------------------------------

ORDERS_COLUMNS = """(order_id bigint PRIMARY KEY, customer_id bigint NOT NULL,
  status text NOT NULL, amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL,
  note text)"""

# Row g of the orders-like tables (note: 10% non-null, as in the Iceberg bench).
ORDERS_ROW = """g, (g::bigint * 7919) % 100000,
  (ARRAY['new','paid','shipped','delivered','cancelled'])[1 + (g % 5)::int],
  ((g::bigint * 37) % 1000000) / 100.0, timestamptz '2026-01-01' + g * interval '1 second',
  CASE WHEN g % 10 = 0 THEN 'note ' || md5(g::text) END"""


def setup_bulk(b: Bench) -> None:
    b.sql(f"CREATE TABLE bulk_orders {ORDERS_COLUMNS}")
    b.sql("CREATE PUBLICATION pub_bulk FOR TABLE bulk_orders")
    b.sql(f"""CREATE PROCEDURE gen_bulk(n bigint, per_tx int) LANGUAGE plpgsql AS $$
      DECLARE i bigint := 0;
      BEGIN
        WHILE i < n LOOP
          INSERT INTO bulk_orders SELECT {ORDERS_ROW}
            FROM generate_series(i + 1, least(i + per_tx, n)) g;
          i := i + per_tx;
          COMMIT;
        END LOOP;
      END $$""")


def generate_bulk(b: Bench) -> None:
    b.sql("CALL gen_bulk(%s, %s)", (ROWS, TX_ROWS))


def setup_mixed(b: Bench) -> None:
    # Rows 1..N exist before the slots: transaction i updates or deletes row i.
    b.sql(f"CREATE TABLE mixed_orders {ORDERS_COLUMNS}")
    b.sql(f"INSERT INTO mixed_orders SELECT {ORDERS_ROW} "
          f"FROM generate_series(1, {int(MIXED_TX)}) g")
    b.sql("VACUUM ANALYZE mixed_orders")
    b.sql("CREATE PUBLICATION pub_mixed FOR TABLE mixed_orders")
    # 50% inserts, 35% updates, 15% deletes, one row per transaction.
    b.sql(f"""CREATE PROCEDURE gen_mixed(n bigint) LANGUAGE plpgsql AS $$
      BEGIN
        FOR i IN 1..n LOOP
          IF i % 20 < 10 THEN
            INSERT INTO mixed_orders SELECT {ORDERS_ROW}
              FROM (SELECT 1000000000 + i AS g) s;
          ELSIF i % 20 < 17 THEN
            UPDATE mixed_orders SET status = 'paid', amount = amount + 1,
              note = 'updated ' || i WHERE order_id = i;
          ELSE
            DELETE FROM mixed_orders WHERE order_id = i;
          END IF;
          COMMIT;
        END LOOP;
      END $$""")


def generate_mixed(b: Bench) -> None:
    b.sql("CALL gen_mixed(%s)", (MIXED_TX,))


def stream_workload(b: Bench, name: str, title: str, table: str, pub: str,
                    changes: int, transactions: int, setup, generate) -> dict:
    log(f"{name}: setting up")
    load_start = list(os.getloadavg())
    setup(b)
    slots = {kind: [f"{name}_{kind}_{r}" for r in range(RUNS)]
             for kind in ("recv", "recvb", "decode", "decodeb", "floe")}
    slots["bytes"] = [f"{name}_bytes"]
    all_slots = [s for names in slots.values() for s in names]
    b.create_slots(all_slots)
    start_lsn = b.one("SELECT pg_current_wal_lsn()::text")
    log(f"{name}: {len(all_slots)} slots at {start_lsn}; generating {changes:,} "
        f"changes in {transactions:,} transactions")
    t0 = time.perf_counter()
    generate(b)
    generate_s = time.perf_counter() - t0
    end_lsn = b.one("SELECT pg_current_wal_lsn()::text")
    wal_bytes = lsn_int(end_lsn) - lsn_int(start_lsn)
    log(f"{name}: generated in {generate_s:.1f}s, {wal_bytes:,} WAL bytes, end {end_lsn}")
    b.checkpoint_and_settle()

    runs = {"pg_recvlogical": [], "floe_decode": [], "floe_run": [],
            "pg_recvlogical_binary": [], "floe_decode_binary": []}
    proto = None
    target = None
    for r in range(RUNS):
        if proto is None:
            # The decode-only consumer goes first once, to learn the protocol version
            # floe negotiates (pg_recvlogical is given the same) and the last commit
            # LSN (floe run's finish line).
            d = b.floe_decode(slots["decode"][r], pub, transactions, changes)
            proto = d["proto_version"]
            target = lsn_int(d["last_commit_lsn"])
            rl = b.pg_recvlogical(slots["recv"][r], pub, proto, end_lsn)
        else:
            rl = b.pg_recvlogical(slots["recv"][r], pub, proto, end_lsn)
            d = b.floe_decode(slots["decode"][r], pub, transactions, changes)
        if lsn_int(d["last_commit_lsn"]) != target:
            raise RuntimeError(f"decode run {r} ended at {d['last_commit_lsn']}")
        # pgoutput's binary mode: the limit and floe, back to back.
        rlb = b.pg_recvlogical(slots["recvb"][r], pub, proto, end_lsn, binary=True)
        db = b.floe_decode(slots["decodeb"][r], pub, transactions, changes, binary=True)
        runs["pg_recvlogical_binary"].append(rlb)
        runs["floe_decode_binary"].append(db)
        base = b.work / f"{name}_floe_{r}"
        f = b.floe_run(base, slots["floe"][r], pub, table, target, changes)
        runs["pg_recvlogical"].append(rl)
        runs["floe_decode"].append(d)
        runs["floe_run"].append(f)
        log(f"{name} run {r + 1}/{RUNS}: pg_recvlogical {rl['seconds']:.2f}s, "
            f"floe decode {d['seconds']:.2f}s, binary: pg_recvlogical "
            f"{rlb['seconds']:.2f}s, floe decode {db['seconds']:.2f}s, "
            f"floe run {f['seconds']:.2f}s "
            f"(cpu {f['cpu_s']:.1f}s, peak {f['peak_rss_kb'] / 1024:.0f} MB)")
        if r < RUNS - 1:
            shutil.rmtree(base, ignore_errors=True)

    # Bytes of the pgoutput stream: one more drain, untimed, into a file. pg_recvlogical
    # writes each message's payload followed by a newline.
    out = b.work / f"{name}.pgoutput"
    b.pg_recvlogical(slots["bytes"][0], pub, proto, end_lsn, str(out))
    pgoutput_bytes = out.stat().st_size
    out.unlink()
    b.drop_slots(all_slots)

    def summarize(kind: str) -> dict:
        rs = runs[kind]
        secs = statistics.median(x["seconds"] for x in rs)
        return {"seconds_runs": [round(x["seconds"], 3) for x in rs],
                "seconds": secs,
                "rows_per_s": changes / secs,
                "cpu_s": statistics.median(x["cpu_s"] for x in rs),
                "peak_rss_mb": max(x["peak_rss_kb"] for x in rs) / 1024}

    result = {"name": name, "title": title, "table": table, "publication": pub,
              "load_start": load_start,
              "changes": changes, "transactions": transactions,
              "wal_bytes": wal_bytes, "generate_s": generate_s,
              "proto_version": proto, "end_lsn": end_lsn,
              "last_commit_lsn": lsn_text(target),
              "pgoutput_bytes": pgoutput_bytes,
              "pgoutput_bytes_per_change": pgoutput_bytes / changes}
    limit = summarize("pg_recvlogical")
    result["pg_recvlogical"] = limit
    for kind in ("floe_decode", "floe_run"):
        s = summarize(kind)
        s["ratio"] = s["rows_per_s"] / limit["rows_per_s"]
        result[kind] = s
    limit_b = summarize("pg_recvlogical_binary")
    result["pg_recvlogical_binary"] = limit_b
    s = summarize("floe_decode_binary")
    s["ratio"] = s["rows_per_s"] / limit_b["rows_per_s"]
    s["ratio_to_text_limit"] = s["rows_per_s"] / limit["rows_per_s"]
    result["floe_decode_binary"] = s
    result["load_end"] = list(os.getloadavg())
    last = runs["floe_run"][-1]
    result["floe_run"]["parquet_bytes"] = last["parquet_bytes"]
    result["floe_run"]["data_files"] = last["data_files"]
    result["floe_run"]["parquet_bytes_per_change"] = last["parquet_bytes"] / changes
    result["floe_run"]["cpu_s_runs"] = [round(x["cpu_s"], 2) for x in runs["floe_run"]]
    shutil.rmtree(b.work / f"{name}_floe_{RUNS - 1}", ignore_errors=True)
    b.sql(f"DROP TABLE {table}")
    b.sql("CHECKPOINT")
    return result


# -- snapshot -------------------------------------------------------------------------


def snapshot_bench(b: Bench) -> dict:
    log(f"snapshot: loading {SNAP_ROWS:,} rows")
    load_start = list(os.getloadavg())
    b.sql(f"CREATE TABLE snap_orders {ORDERS_COLUMNS}")
    b.sql(f"INSERT INTO snap_orders SELECT {ORDERS_ROW} "
          f"FROM generate_series(1, {int(SNAP_ROWS)}) g")
    # Hint bits and the visibility map are set once here, not by whichever reader
    # comes first.
    b.sql("VACUUM (FREEZE, ANALYZE) snap_orders")
    b.sql("CHECKPOINT")
    table_bytes = b.one("SELECT pg_table_size('snap_orders')")
    copy_sql = "COPY (SELECT * FROM snap_orders) TO STDOUT"
    psql = [str(client_tool("psql")), "-X", "-q", "-h", "127.0.0.1", "-p", str(b.pg.port),
            "-U", "postgres", "-d", "postgres", "-c", copy_sql]
    # Warm-up (untimed): the table into the page cache.
    with open(os.devnull, "wb") as devnull:
        run_timed(psql, stdout=devnull)

    def copy_once():
        with open(os.devnull, "wb") as devnull:
            seconds, usage, _ = run_timed(psql, stdout=devnull)
        return {"seconds": seconds}

    binary_psql = psql[:-1] + [copy_sql + " (FORMAT binary)"]

    def copy_binary_once():
        with open(os.devnull, "wb") as devnull:
            seconds, usage, _ = run_timed(binary_psql, stdout=devnull)
        return {"seconds": seconds}

    def floe_once(mode: str, workers: int, run: int):
        slot = f"snap_{mode.replace('-', '_')}_w{workers}_{run}"
        args = [str(SNAPSHOT_TOOL), "--dsn", b.pg.dsn(), "--slot", slot,
                "--tables-json", '[["public", "snap_orders"]]',
                "--workers", str(workers), "--no-checksum", *SNAP_MODE_ARGS[mode]]
        try:
            seconds, usage, text = run_timed(args, stdout=subprocess.PIPE)
        finally:
            b.drop_slots([slot])
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        done = lines[-1]
        if not done.get("complete") or done["rows"] != SNAP_ROWS:
            raise RuntimeError(f"snapshot_tool: {done}")
        return {"seconds": seconds, "reader_seconds": done["seconds"],
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_kb": usage.ru_maxrss}

    copies, binary_copies = [], []
    floe = {(m, w): [] for m in SNAP_MODES for w in SNAP_WORKERS}
    for r in range(SNAP_RUNS):
        copies.append(copy_once())
        binary_copies.append(copy_binary_once())
        for m in SNAP_MODES:
            for w in SNAP_WORKERS:
                floe[(m, w)].append(floe_once(m, w, r))
        log(f"snapshot run {r + 1}/{SNAP_RUNS}: COPY {copies[-1]['seconds']:.2f}s, "
            f"binary {binary_copies[-1]['seconds']:.2f}s, "
            + ", ".join(f"{m} {w}w {floe[(m, w)][-1]['seconds']:.2f}s"
                        for m in SNAP_MODES for w in SNAP_WORKERS))
    copy_s = statistics.median(x["seconds"] for x in copies)
    binary_s = statistics.median(x["seconds"] for x in binary_copies)
    result = {"rows": SNAP_ROWS, "runs": SNAP_RUNS, "table_bytes": table_bytes,
              "copy_command": " ".join(["psql", "-X", "-q", "-c", f'"{copy_sql}"',
                                        ">/dev/null"]),
              "copy": {"seconds_runs": [round(x["seconds"], 3) for x in copies],
                       "seconds": copy_s, "rows_per_s": SNAP_ROWS / copy_s},
              "copy_binary": {
                  "seconds_runs": [round(x["seconds"], 3) for x in binary_copies],
                  "seconds": binary_s, "rows_per_s": SNAP_ROWS / binary_s},
              "modes": SNAP_MODES,
              "load_start": load_start, "load_end": list(os.getloadavg()),
              "mode_args": {m: " ".join(SNAP_MODE_ARGS[m]) for m in SNAP_MODES},
              "floe": []}
    for m in SNAP_MODES:
        for w in SNAP_WORKERS:
            xs = floe[(m, w)]
            secs = statistics.median(x["seconds"] for x in xs)
            result["floe"].append({
                "mode": m,
                "workers": w,
                "seconds_runs": [round(x["seconds"], 3) for x in xs],
                "seconds": secs,
                "reader_seconds": statistics.median(x["reader_seconds"] for x in xs),
                "rows_per_s": SNAP_ROWS / secs,
                "ratio": copy_s / secs,
                "cpu_s": statistics.median(x["cpu_s"] for x in xs),
                "peak_rss_mb": max(x["peak_rss_kb"] for x in xs) / 1024})
    b.sql("DROP TABLE snap_orders")
    return result


SUSTAINED_RATE = int(os.environ.get("BENCH_SUSTAINED_RATE", "10000"))
SUSTAINED_SECONDS = int(os.environ.get("BENCH_SUSTAINED_SECONDS", "60"))
CHECKPOINT_RE = re.compile(
    r"checkpoint: \d+ table\(s\), (\d+) row\(s\) committed up to commit LSN \S+ in "
    r"(\d+) ms")


def sustained_bench(b: Bench) -> dict:
    """floe run with the default 10 s checkpoint interval while the source commits
    SUSTAINED_RATE changes/s (100-row transactions every 10 ms, paced by the
    server's clock) for SUSTAINED_SECONDS: the latency of each Bronze checkpoint
    (every touched table committed, then confirmed), from floe's log."""
    b.sql(f"CREATE TABLE sust_orders {ORDERS_COLUMNS}")
    b.sql("CREATE PUBLICATION pub_sust FOR TABLE sust_orders")
    b.sql("""CREATE PROCEDURE gen_sustained(rate int, seconds int) LANGUAGE plpgsql AS $$
      DECLARE
        per_tx int := greatest(1, rate / 100);
        t0 timestamptz := clock_timestamp();
        i bigint := 0;
        g0 bigint;
      BEGIN
        WHILE clock_timestamp() < t0 + seconds * interval '1 second' LOOP
          g0 := i * per_tx;
          INSERT INTO sust_orders SELECT g, (g * 7919) % 100000,
            (ARRAY['new','paid','shipped','delivered','cancelled'])[1 + (g % 5)::int],
            ((g * 37) % 1000000) / 100.0, clock_timestamp(),
            CASE WHEN g % 10 = 0 THEN 'note ' || md5(g::text) END
          FROM generate_series(g0 + 1, g0 + per_tx) g;
          COMMIT;
          i := i + 1;
          PERFORM pg_sleep(greatest(0, extract(epoch FROM
            (t0 + i * interval '10 milliseconds') - clock_timestamp())));
        END LOOP;
      END $$""")
    b.create_slots(["sust"])
    base = b.work / "sustained"
    base.mkdir()
    config = b.floe_config(base, "sust", "pub_sust", interval="10s")
    log_path = base / "floe.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen([str(FLOE), "run", str(config)], stdin=subprocess.DEVNULL,
                                stdout=log_file, stderr=subprocess.STDOUT, cwd=base)
        try:
            time.sleep(2)
            t0 = time.perf_counter()
            b.sql("CALL gen_sustained(%s, %s)", (SUSTAINED_RATE, SUSTAINED_SECONDS))
            gen_s = time.perf_counter() - t0
            changes = b.one("SELECT count(*) FROM sust_orders")
            target = lsn_int(b.one("SELECT pg_current_wal_lsn()::text"))
            warehouse = base / "warehouse"
            deadline = time.perf_counter() + 120
            while (b.committed_lsn(warehouse, "sust_orders") or 0) < target - (1 << 20):
                if proc.poll() is not None or time.perf_counter() > deadline:
                    break
                time.sleep(0.2)
            time.sleep(11)  # one more checkpoint
            cpu = proc_cpu_seconds(proc.pid)
            hwm = proc_hwm_kb(proc.pid)
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    b.drop_slots(["sust"])
    lat = [(int(rows), int(ms)) for rows, ms in CHECKPOINT_RE.findall(log_path.read_text())]
    busy = sorted(ms for rows, ms in lat if rows > 0)
    if not busy:
        raise RuntimeError("no checkpoint lines in floe's log:\n" +
                           log_path.read_text()[-3000:])

    def pct(p):
        return busy[min(len(busy) - 1, int(round(p / 100 * (len(busy) - 1))))]

    return {"rate_target": SUSTAINED_RATE, "seconds": SUSTAINED_SECONDS,
            "changes": changes, "rate_achieved": changes / gen_s,
            "checkpoints": len(busy), "rows_per_checkpoint": statistics.median(
                rows for rows, ms in lat if rows > 0),
            "p50_ms": pct(50), "p99_ms": pct(99), "max_ms": busy[-1],
            "cpu_s": cpu, "cpu_s_per_million": cpu / changes * 1e6 if changes else 0,
            "peak_rss_mb": hwm / 1024}


def main() -> int:
    for tool in (FLOE, STREAM_TOOL, SNAPSHOT_TOOL):
        if not tool.exists():
            print(f"stream_bench: {tool} is missing (build floe, stream_tool and "
                  f"snapshot_tool in {BUILD})", file=sys.stderr)
            return 1
    work = Path(tempfile.mkdtemp(prefix="floe-stream-bench-"))
    try:
        with PgCluster(extra_conf=SERVER_CONF) as pg:
            b = Bench(pg, work)
            server = b.one("SHOW server_version")
            recv_version = subprocess.run(
                [str(client_tool("pg_recvlogical")), "--version"], capture_output=True,
                text=True, check=True).stdout.strip()
            mixed_changes = MIXED_TX
            workloads = []
            if "bulk" in PARTS:
                workloads.append(stream_workload(
                    b, "bulk",
                    f"{ROWS:,} inserts in {TX_ROWS:,}-row transactions",
                    "bulk_orders", "pub_bulk", ROWS, -(-ROWS // TX_ROWS),
                    setup_bulk, generate_bulk))
            if "mixed" in PARTS:
                workloads.append(stream_workload(
                    b, "mixed",
                    f"{MIXED_TX:,} single-row transactions, 50% insert / 35% update "
                    "/ 15% delete",
                    "mixed_orders", "pub_mixed", mixed_changes, MIXED_TX,
                    setup_mixed, generate_mixed))
            snapshot = snapshot_bench(b) if "snapshot" in PARTS else None
            sustained = sustained_bench(b) if "sustained" in PARTS else None
            b.conn.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {
        "postgres": server, "pg_recvlogical": recv_version,
        "settings": {"BENCH_STREAM_ROWS": ROWS, "BENCH_STREAM_TX_ROWS": TX_ROWS,
                     "BENCH_STREAM_MIXED_TX": MIXED_TX, "BENCH_STREAM_RUNS": RUNS,
                     "BENCH_SNAPSHOT_ROWS": SNAP_ROWS, "BENCH_SNAPSHOT_RUNS": SNAP_RUNS,
                     "BENCH_SNAPSHOT_WORKERS": ",".join(map(str, SNAP_WORKERS)),
                     "BENCH_SNAPSHOT_MODES": ",".join(SNAP_MODES),
                     "BENCH_PARTS": ",".join(PARTS)},
        "runs": RUNS, "server_conf": {"shared_buffers": "128MB", "fsync": "off",
                                      "full_page_writes": "off", **SERVER_CONF},
        "commands": {
            "pg_recvlogical": "pg_recvlogical --slot SLOT --start --no-loop "
                              "-o proto_version=P -o publication_names=PUB "
                              "-o messages=true -o streaming=on --endpos END "
                              "-f /dev/null",
            "floe_decode": "stream_tool --slot SLOT --publication PUB --summary --ack "
                           "--quiet --max-transactions T",
            "binary": "pg_recvlogical ... -o binary=true; stream_tool ... --binary",
            "floe_run": "floe run pipeline.yaml  (snapshot: never, "
                        "checkpoint.interval: 1s; stopped with SIGTERM once Bronze's "
                        "floe.commit-lsn reaches the last commit LSN)",
            "snapshot": "snapshot_tool --tables-json '[[\"public\", \"snap_orders\"]]' "
                        "--workers N --no-checksum MODE_ARGS",
            "sustained": "floe run pipeline.yaml (snapshot: never, checkpoint.interval: "
                         "10s) while CALL gen_sustained(RATE, SECONDS) commits",
        },
        "stream": workloads,
        "snapshot": snapshot,
        "sustained": sustained,
    }
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
