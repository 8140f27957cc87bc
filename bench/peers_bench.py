#!/usr/bin/env python3
"""floe against its peers (issue 8): Debezium, pg_recvlogical, COPY and Spark.

Run alone (from the repository root; floe must be built in FLOE_BUILD_DIR):

    FLOE_BUILD_DIR=build/helper-bench .venv/bin/python bench/peers_bench.py

It prints one JSON document on stdout (progress on stderr) and writes the same to
<build>/bench/results/peers.json; bench/peers_render.py turns it into Markdown.
What it installs or builds on first use (all kept under build/bench-cache/):

* the Debezium peer, bench/peers/debezium (our own Java program on Debezium's
  embedded engine, Debezium 3.6.1.Final from Maven Central), built with
  `mvn -q -B package` into build/bench-cache/debezium (Maven repository
  build/bench-cache/m2);
* PySpark (PEERS_PYSPARK_VERSION, default 3.5.7) into .venv with pip, and the Iceberg
  Spark runtime (org.apache.iceberg:iceberg-spark-runtime-3.5_2.12, PEERS_ICEBERG_VERSION,
  default 1.10.0) copied from Maven Central with `mvn dependency:copy`.

Everything runs on throwaway PostgreSQL 15 clusters (tests/integration/pgcluster.py),
the same server settings as bench/stream_bench.py.

Comparisons (each section can be skipped with BENCH_PEER_PARTS):

* stream: the same backlog drained by `floe run` (into committed Bronze),
  `pg_recvlogical` (to /dev/null) and Debezium (JSON lines to a file), each from its
  own pgoutput slot created before the backlog, runs interleaved, medians.
  Two backlogs: BENCH_PEER_STREAM_ROWS inserts in BENCH_PEER_STREAM_TX_ROWS-row
  transactions, and BENCH_PEER_MIXED_TX single-row transactions (50% insert, 35%
  update, 15% delete). CPU of the consumer process and of the walsender serving it
  (/proc/<pid>/stat, the walsender found through pg_replication_slots.active_pid),
  and of the whole server (postmaster plus all its children, reaped ones included).
* snapshot: a BENCH_PEER_SNAPSHOT_ROWS-row table: `COPY ... TO STDOUT` through psql
  to /dev/null; floe's snapshot reader alone (tests/tools/snapshot_tool, 1 and 2
  workers, if built); `floe run` with `snapshot: initial` until Bronze holds every
  row, with `source.snapshot_workers` 1 and 2; Debezium with `snapshot.mode=initial` until it wrote
  every row.
* silver: a BENCH_PEER_SILVER_ROWS-row Silver table (built by floe run + floe silver),
  then BENCH_PEER_SILVER_CHANGES changes in Postgres (updates, some keys three times,
  deletes, inserts) streamed into Bronze; `floe silver` applies that increment, and
  Spark (local[2]) runs MERGE INTO (merge-on-read) with the same increment, read
  from the same Bronze table, on an identical Iceberg table (Hadoop catalog) loaded
  from the same rows. Results are compared (row count, key set, checksum) with DuckDB.

Environment: FLOE_BUILD_DIR (default build/release), BENCH_PEER_RUNS (3),
BENCH_PEER_PARTS (stream,snapshot,silver), BENCH_PEER_STREAM_ROWS (2000000),
BENCH_PEER_STREAM_TX_ROWS (2000), BENCH_PEER_MIXED_TX (200000),
BENCH_PEER_SNAPSHOT_ROWS (10000000), BENCH_PEER_SNAPSHOT_RUNS (BENCH_PEER_RUNS),
BENCH_PEER_SILVER_ROWS (10000000), BENCH_PEER_SILVER_CHANGES (1000000),
BENCH_PEER_SILVER_RUNS (BENCH_PEER_RUNS), BENCH_PEER_MERGE (1: keep the parts of an
earlier peers.json that this invocation does not measure), PEERS_JVM_HEAP (Debezium -Xmx, 2g),
PEERS_SPARK_DRIVER_MEMORY (8g), PEERS_PYSPARK_VERSION, PEERS_ICEBERG_VERSION.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "bench"))
from pgcluster import PgCluster, pg_bindir  # noqa: E402

import stream_bench as sb  # noqa: E402  (read-only helpers)

BUILD = Path(os.environ.get("FLOE_BUILD_DIR", ROOT / "build" / "release")).resolve()
FLOE = BUILD / "src" / "floe" / "cli" / "floe"
SNAPSHOT_TOOL = BUILD / "tests" / "tools" / "snapshot_tool"
CACHE = ROOT / "build" / "bench-cache"
M2 = CACHE / "m2"
DBZ_SRC = ROOT / "bench" / "peers" / "debezium"
DBZ_BUILD = CACHE / "debezium"
SPARK_SCRIPT = ROOT / "bench" / "peers" / "spark_merge.py"
VENV_PY = ROOT / ".venv" / "bin" / "python"

RUNS = int(os.environ.get("BENCH_PEER_RUNS", "3"))
PARTS = os.environ.get("BENCH_PEER_PARTS", "stream,snapshot,silver").split(",")
STREAM_ROWS = int(os.environ.get("BENCH_PEER_STREAM_ROWS", "2000000"))
STREAM_TX_ROWS = int(os.environ.get("BENCH_PEER_STREAM_TX_ROWS", "2000"))
MIXED_TX = int(os.environ.get("BENCH_PEER_MIXED_TX", "200000"))
SNAP_ROWS = int(os.environ.get("BENCH_PEER_SNAPSHOT_ROWS", "10000000"))
SNAP_RUNS = int(os.environ.get("BENCH_PEER_SNAPSHOT_RUNS", str(RUNS)))
SILVER_ROWS = int(os.environ.get("BENCH_PEER_SILVER_ROWS", "10000000"))
SILVER_CHANGES = int(os.environ.get("BENCH_PEER_SILVER_CHANGES", "1000000"))
SILVER_RUNS = int(os.environ.get("BENCH_PEER_SILVER_RUNS", str(RUNS)))
JVM_HEAP = os.environ.get("PEERS_JVM_HEAP", "2g")
SPARK_DRIVER_MEMORY = os.environ.get("PEERS_SPARK_DRIVER_MEMORY", "8g")
PYSPARK_VERSION = os.environ.get("PEERS_PYSPARK_VERSION", "3.5.7")
ICEBERG_VERSION = os.environ.get("PEERS_ICEBERG_VERSION", "1.10.0")
ICEBERG_RUNTIME = f"iceberg-spark-runtime-3.5_2.12-{ICEBERG_VERSION}.jar"
DEBEZIUM_VERSION = "3.6.1.Final"

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"peers_bench: {msg}", file=sys.stderr, flush=True)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def median(xs):
    return statistics.median(xs) if xs else None


# -- preparing the peers --------------------------------------------------------------


def build_debezium() -> Path:
    """Builds bench/peers/debezium into build/bench-cache/debezium (a copy of the
    sources, so the source tree stays clean); returns the classpath."""
    if DBZ_BUILD.exists():
        shutil.rmtree(DBZ_BUILD / "src", ignore_errors=True)
    DBZ_BUILD.mkdir(parents=True, exist_ok=True)
    shutil.copy(DBZ_SRC / "pom.xml", DBZ_BUILD / "pom.xml")
    shutil.copytree(DBZ_SRC / "src", DBZ_BUILD / "src")
    log("building the Debezium peer (mvn -q -B package)")
    subprocess.run(["mvn", "-q", "-B", f"-Dmaven.repo.local={M2}", "package"],
                   cwd=DBZ_BUILD, check=True, stdout=sys.stderr)
    jar = DBZ_BUILD / "target" / "debezium-peer-1.jar"
    return Path(f"{jar}:{DBZ_BUILD / 'target' / 'lib'}/*")


def prepare_spark() -> Path:
    try:
        out = subprocess.run([str(VENV_PY), "-c", "import pyspark; print(pyspark.__version__)"],
                             capture_output=True, text=True)
        have = out.stdout.strip() if out.returncode == 0 else None
    except OSError:
        have = None
    if have != PYSPARK_VERSION:
        log(f"installing pyspark=={PYSPARK_VERSION} into .venv")
        subprocess.run([str(ROOT / ".venv" / "bin" / "pip"), "install", "-q",
                        f"pyspark=={PYSPARK_VERSION}"], check=True, stdout=sys.stderr)
    jars = CACHE / "jars"
    jar = jars / ICEBERG_RUNTIME
    if not jar.exists():
        log(f"fetching org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:{ICEBERG_VERSION}")
        jars.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mvn", "-q", "-B", f"-Dmaven.repo.local={M2}", "dependency:copy",
                        "-Dartifact=org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:"
                        f"{ICEBERG_VERSION}", f"-DoutputDirectory={jars}"],
                       check=True, stdout=sys.stderr, cwd=CACHE)
    return jar


# -- /proc ------------------------------------------------------------------------------


def cpu_of(pid: int) -> float:
    return sb.proc_cpu_seconds(pid)


def server_cpu(postmaster: int) -> float:
    """CPU seconds of the whole server so far: the postmaster's own and its reaped
    children's (cutime + cstime), plus every live child's."""
    fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(fields[i]) for i in (11, 12, 13, 14))
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[1]) == postmaster:
            total += int(f[11]) + int(f[12])
    return total / CLOCK_TICKS


class WalsenderWatch:
    """Follows the walsender serving a slot (pg_replication_slots.active_pid, polled
    until it appears, then only /proc read every 20 ms) and keeps its last CPU
    reading, so a walsender that exits with its client is still accounted for (up to
    its last 20 ms)."""

    def __init__(self, dsn: str, slot: str):
        import psycopg
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.slot = slot
        self.pid = None
        self.cpu = 0.0
        self.pids = []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        base = 0.0  # CPU of walsenders that already ended (a client that reconnects)
        while not self.stop_flag.is_set():
            if self.pid is None:
                try:
                    row = self.conn.execute(
                        "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s",
                        (self.slot,)).fetchone()
                except Exception:
                    row = None
                if row and row[0]:
                    self.pid = int(row[0])
                    self.pids.append(self.pid)
                else:
                    time.sleep(0.02)
                    continue
            try:
                c = cpu_of(self.pid)
                self.cpu = base + c
                self._last = c
            except (OSError, ValueError, IndexError):
                base = self.cpu
                self.pid = None
            time.sleep(0.02)

    def reading(self) -> float:
        if self.pid is not None:
            try:
                return self.cpu - getattr(self, "_last", 0) + cpu_of(self.pid)
            except (OSError, ValueError, IndexError):
                pass
        return self.cpu

    def close(self) -> float:
        value = self.reading()
        self.stop_flag.set()
        self.thread.join(2)
        self.conn.close()
        return value


# -- the cluster and the consumers ------------------------------------------------------


class Peers(sb.Bench):
    def __init__(self, pg: PgCluster, work: Path, dbz_classpath: Path | None):
        super().__init__(pg, work)
        self.dbz_classpath = dbz_classpath
        self.postmaster = int((pg.data_dir / "postmaster.pid").read_text().split()[0])

    # floe run, until Bronze's table holds `rows` rows in total (snapshot summary)
    @staticmethod
    def bronze_total(warehouse: Path, table: str, service: str = "bench") -> int:
        db = warehouse / "catalog.db"
        if not db.exists():
            return 0
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
            try:
                row = con.execute(
                    "SELECT metadata_location FROM iceberg_tables WHERE "
                    "table_namespace = ? AND table_name = ?",
                    (f"bronze.{service}.public", table)).fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            return 0
        if not row or not row[0]:
            return 0
        try:
            meta = json.loads(Path(row[0].removeprefix("file://")).read_text())
        except (OSError, ValueError):
            return 0
        current = meta.get("current-snapshot-id")
        for snap in meta.get("snapshots", []):
            if snap["snapshot-id"] == current:
                return int(snap.get("summary", {}).get("total-records", 0))
        return 0

    def floe_config_full(self, base: Path, slot: str, pub: str, snapshot: str,
                         interval: str = "1s", snapshot_workers: int = 2) -> Path:
        warehouse = base / "warehouse"
        warehouse.mkdir(parents=True, exist_ok=True)
        config = base / "pipeline.yaml"
        config.write_text(
            "service: bench\n"
            "source:\n"
            f"  conninfo: \"{self.pg.dsn()}\"\n"
            f"  slot: {slot}\n"
            f"  publication: {pub}\n"
            f"  snapshot: {snapshot}\n"
            f"  snapshot_workers: {snapshot_workers}\n"
            f"warehouse: {warehouse}\n"
            "checkpoint:\n"
            f"  interval: {interval}\n"
            "metrics:\n"
            "  listen: 127.0.0.1:0\n")
        return config

    def floe_run_until(self, base: Path, slot: str, pub: str, table: str, total: int,
                       snapshot: str = "never", watch_slot: str | None = None,
                       snapshot_workers: int = 2) -> dict:
        """`floe run` until Bronze's `table` holds `total` rows (committed), then
        SIGTERM. Time from process start; CPU and VmHWM read at that moment; the
        walsender's and the whole server's CPU over the same span."""
        config = base / "pipeline.yaml"
        if not config.exists():
            config = self.floe_config_full(base, slot, pub, snapshot,
                                           snapshot_workers=snapshot_workers)
        warehouse = base / "warehouse"
        log_path = base / "floe.log"
        watch = WalsenderWatch(self.pg.dsn(), watch_slot or slot)
        srv0 = server_cpu(self.postmaster)
        load0 = loadavg()
        with open(log_path, "ab") as log_file:
            t0 = time.perf_counter()
            proc = subprocess.Popen([str(FLOE), "run", str(config)],
                                    stdin=subprocess.DEVNULL, stdout=log_file,
                                    stderr=subprocess.STDOUT, cwd=base)
            try:
                while True:
                    if proc.poll() is not None:
                        raise RuntimeError(f"floe run exited {proc.returncode}:\n"
                                           + log_path.read_text()[-4000:])
                    if self.bronze_total(warehouse, table) >= total:
                        break
                    if time.perf_counter() - t0 > 7200:
                        raise RuntimeError("floe run did not catch up within two hours")
                    time.sleep(0.05)
                seconds = time.perf_counter() - t0
                cpu = cpu_of(proc.pid)
                hwm = sb.proc_hwm_kb(proc.pid)
                wal = watch.close()
                srv = server_cpu(self.postmaster) - srv0
                proc.send_signal(signal.SIGTERM)
                rc = proc.wait(300)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                if watch.thread.is_alive():
                    watch.close()
        if rc != 0:
            raise RuntimeError(f"floe run exited {rc} on SIGTERM:\n"
                               + log_path.read_text()[-4000:])
        have = self.bronze_total(warehouse, table)
        if have != total:
            raise RuntimeError(f"Bronze {table} holds {have} rows, expected {total}")
        data = [p for p in warehouse.rglob("*.parquet")
                if f"/{table}/" in str(p) and "/data/" in str(p) and "bronze" in str(p)]
        return {"seconds": seconds, "cpu_s": cpu, "walsender_cpu_s": wal,
                "server_cpu_s": srv, "peak_rss_kb": hwm,
                "bronze_bytes": sum(p.stat().st_size for p in data),
                "bronze_files": len(data), "load_before": load0, "load_after": loadavg()}

    def recvlogical(self, slot: str, pub: str, end: str) -> dict:
        watch = WalsenderWatch(self.pg.dsn(), slot)
        srv0 = server_cpu(self.postmaster)
        load0 = loadavg()
        seconds, usage, _ = sb.run_timed(self.recvlogical_args(slot, pub, 3, end, "/dev/null"))
        time.sleep(0.05)
        wal = watch.close()
        return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
                "walsender_cpu_s": wal, "server_cpu_s": server_cpu(self.postmaster) - srv0,
                "peak_rss_kb": usage.ru_maxrss, "load_before": load0,
                "load_after": loadavg()}

    def debezium_args(self, out: Path, events: int, props: dict) -> list[str]:
        args = ["java", f"-Xms512m", f"-Xmx{JVM_HEAP}", "-cp", str(self.dbz_classpath),
                "floe.bench.DebeziumPeer", f"--out={out}", f"--events={events}",
                "database.hostname=127.0.0.1", f"database.port={self.pg.port}"]
        args += [f"{k}={v}" for k, v in props.items()]
        return args

    def debezium(self, base: Path, events: int, props: dict, slot: str) -> dict:
        """The Debezium peer until it has written `events` events: time, CPU and
        VmHWM of the JVM at its {"done": N} line; then it shuts down by itself."""
        base.mkdir(parents=True, exist_ok=True)
        out = base / "events.jsonl"
        props = {"offset.storage.file.filename": str(base / "offsets.dat"), **props}
        args = self.debezium_args(out, events, props)
        watch = WalsenderWatch(self.pg.dsn(), slot)
        srv0 = server_cpu(self.postmaster)
        load0 = loadavg()
        err_path = base / "debezium.log"
        with open(err_path, "wb") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=err, cwd=base, text=True)
            hwm = 0
            seconds = cpu = wal = srv = None
            final = None
            try:
                for line in proc.stdout:
                    line = line.strip()
                    if line.startswith('{"done"'):
                        seconds = time.perf_counter() - t0
                        cpu = cpu_of(proc.pid)
                        hwm = sb.proc_hwm_kb(proc.pid)
                        wal = watch.close()
                        srv = server_cpu(self.postmaster) - srv0
                    elif line.startswith('{"events"'):
                        final = json.loads(line)
                    if time.perf_counter() - t0 > 7200:
                        raise RuntimeError("Debezium did not finish within two hours")
                rc = proc.wait(120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                if watch.thread.is_alive():
                    watch.close()
        if rc != 0 or seconds is None or not final or final["events"] != events:
            raise RuntimeError(f"Debezium peer exited {rc} ({final}):\n"
                               + err_path.read_text(errors="replace")[-4000:])
        file_bytes = out.stat().st_size
        out.unlink()
        return {"seconds": seconds, "cpu_s": cpu, "walsender_cpu_s": wal,
                "server_cpu_s": srv, "peak_rss_kb": hwm, "json_bytes": file_bytes,
                "seconds_to_exit": final["seconds_total"], "load_before": load0,
                "load_after": loadavg()}

    def floe_silver_pass(self, config: Path, base: Path) -> dict:
        load0 = loadavg()
        seconds, usage, _ = sb.run_timed([str(FLOE), "silver", str(config)])
        return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
                "peak_rss_kb": usage.ru_maxrss, "load_before": load0,
                "load_after": loadavg()}


def summarize(rs: list[dict], changes: int) -> dict:
    secs = median([x["seconds"] for x in rs])
    out = {"seconds_runs": [round(x["seconds"], 3) for x in rs], "seconds": secs,
           "rows_per_s": changes / secs,
           "loads": [[x["load_before"], x["load_after"]] for x in rs]}
    for k in ("cpu_s", "walsender_cpu_s", "server_cpu_s"):
        if all(k in x and x[k] is not None for x in rs):
            v = median([x[k] for x in rs])
            out[k] = v
            out[k + "_runs"] = [round(x[k], 2) for x in rs]
            out[k.replace("_s", "_s_per_million")] = v / changes * 1e6
    if "cpu_s" in out and out["cpu_s"]:
        out["rows_per_cpu_s"] = changes / out["cpu_s"]
    if all("peak_rss_kb" in x for x in rs):
        out["peak_rss_mb"] = max(x["peak_rss_kb"] for x in rs) / 1024
    return out


# -- streaming ----------------------------------------------------------------------------


def stream_workload(b: Peers, name: str, title: str, table: str, pub: str, changes: int,
                    transactions: int, setup, generate) -> dict:
    log(f"{name}: setting up")
    setup(b)
    slots = {kind: [f"p{name}_{kind}_{r}" for r in range(RUNS)]
             for kind in ("recv", "floe", "dbz")}
    all_slots = [s for names in slots.values() for s in names]
    b.create_slots(all_slots)
    start_lsn = b.one("SELECT pg_current_wal_lsn()::text")
    log(f"{name}: generating {changes:,} changes in {transactions:,} transactions")
    t0 = time.perf_counter()
    generate(b)
    generate_s = time.perf_counter() - t0
    end_lsn = b.one("SELECT pg_current_wal_lsn()::text")
    wal_bytes = sb.lsn_int(end_lsn) - sb.lsn_int(start_lsn)
    b.checkpoint_and_settle()
    runs = {"pg_recvlogical": [], "floe_run": [], "debezium": []}
    last_floe = None
    for r in range(RUNS):
        rl = b.recvlogical(slots["recv"][r], pub, end_lsn)
        base = b.work / f"{name}_floe_{r}"
        f = b.floe_run_until(base, slots["floe"][r], pub, table, changes)
        dbz_props = {"slot.name": slots["dbz"][r], "publication.name": pub,
                     "publication.autocreate.mode": "disabled",
                     "snapshot.mode": "no_data",
                     "table.include.list": f"public.{table}"}
        d = b.debezium(b.work / f"{name}_dbz_{r}", changes, dbz_props, slots["dbz"][r])
        runs["pg_recvlogical"].append(rl)
        runs["floe_run"].append(f)
        runs["debezium"].append(d)
        log(f"{name} run {r + 1}/{RUNS}: pg_recvlogical {rl['seconds']:.2f}s "
            f"(walsender {rl['walsender_cpu_s']:.1f} cpu s), floe run {f['seconds']:.2f}s "
            f"(cpu {f['cpu_s']:.1f}s, walsender {f['walsender_cpu_s']:.1f}s), Debezium "
            f"{d['seconds']:.2f}s (cpu {d['cpu_s']:.1f}s, walsender "
            f"{d['walsender_cpu_s']:.1f}s)")
        if last_floe is not None:
            shutil.rmtree(last_floe, ignore_errors=True)
        last_floe = base
        shutil.rmtree(b.work / f"{name}_dbz_{r}", ignore_errors=True)
    b.drop_slots(all_slots)

    # Silver after one pass over the last floe run's Bronze.
    silver = b.floe_silver_pass(last_floe / "pipeline.yaml", last_floe)
    silver_rows = b.one(f"SELECT count(*) FROM {table}")
    sdata = [p for p in (last_floe / "warehouse").rglob("*.parquet")
             if "/silver" in str(p)]
    silver_bytes = sum(p.stat().st_size for p in sdata)
    last = runs["floe_run"][-1]
    result = {"name": name, "title": title, "table": table, "changes": changes,
              "transactions": transactions, "wal_bytes": wal_bytes,
              "generate_s": generate_s, "end_lsn": end_lsn}
    limit = summarize(runs["pg_recvlogical"], changes)
    result["pg_recvlogical"] = limit
    for kind in ("floe_run", "debezium"):
        s = summarize(runs[kind], changes)
        s["ratio_to_pg_recvlogical"] = s["rows_per_s"] / limit["rows_per_s"]
        result[kind] = s
    fr, dz = result["floe_run"], result["debezium"]
    fr["bronze_bytes"] = last["bronze_bytes"]
    fr["bronze_files"] = last["bronze_files"]
    fr["bronze_bytes_per_change"] = last["bronze_bytes"] / changes
    fr["silver_pass"] = {"seconds": silver["seconds"], "cpu_s": silver["cpu_s"],
                         "peak_rss_mb": silver["peak_rss_kb"] / 1024,
                         "silver_rows": silver_rows, "silver_bytes": silver_bytes,
                         "silver_files": len(sdata),
                         "silver_bytes_per_change": silver_bytes / changes,
                         "silver_bytes_per_row": silver_bytes / silver_rows
                         if silver_rows else None}
    dz["json_bytes_per_change"] = median([x["json_bytes"] for x in runs["debezium"]]) / changes
    dz["seconds_to_exit_runs"] = [round(x["seconds_to_exit"], 2) for x in runs["debezium"]]
    # rows per CPU-second: the consumer's own CPU, and consumer + its walsender
    for s in (limit, fr, dz):
        s["rows_per_cpu_s_with_walsender"] = changes / (s["cpu_s"] + s["walsender_cpu_s"])
    result["floe_vs_debezium_rows_per_cpu_s"] = fr["rows_per_cpu_s"] / dz["rows_per_cpu_s"]
    result["floe_vs_debezium_rows_per_cpu_s_with_walsender"] = (
        fr["rows_per_cpu_s_with_walsender"] / dz["rows_per_cpu_s_with_walsender"])
    shutil.rmtree(last_floe, ignore_errors=True)
    b.sql(f"DROP TABLE {table}")
    b.sql("CHECKPOINT")
    return result


def stream_part(b: Peers) -> list[dict]:
    sb.ROWS, sb.TX_ROWS, sb.MIXED_TX = STREAM_ROWS, STREAM_TX_ROWS, MIXED_TX
    return [
        stream_workload(b, "bulk", f"{STREAM_ROWS:,} inserts in {STREAM_TX_ROWS:,}-row "
                        "transactions", "bulk_orders", "pub_bulk", STREAM_ROWS,
                        -(-STREAM_ROWS // STREAM_TX_ROWS), sb.setup_bulk, sb.generate_bulk),
        stream_workload(b, "mixed", f"{MIXED_TX:,} single-row transactions, 50% insert / "
                        "35% update / 15% delete", "mixed_orders", "pub_mixed", MIXED_TX,
                        MIXED_TX, sb.setup_mixed, sb.generate_mixed),
    ]


# -- snapshot -----------------------------------------------------------------------------


def load_orders(b: Peers, table: str, rows: int) -> None:
    b.sql(f"CREATE TABLE {table} {sb.ORDERS_COLUMNS}")
    step = 1_000_000
    for lo in range(1, rows + 1, step):
        hi = min(rows, lo + step - 1)
        b.sql(f"INSERT INTO {table} SELECT {sb.ORDERS_ROW} FROM generate_series({lo}, {hi}) g")
    b.sql(f"VACUUM (FREEZE, ANALYZE) {table}")
    b.sql("CHECKPOINT")


def snapshot_part(b: Peers) -> dict:
    table = "snap_orders"
    log(f"snapshot: loading {SNAP_ROWS:,} rows")
    load_orders(b, table, SNAP_ROWS)
    b.sql(f"CREATE PUBLICATION pub_snap FOR TABLE {table}")
    table_bytes = b.one(f"SELECT pg_table_size('{table}')")
    copy_sql = f"COPY (SELECT * FROM {table}) TO STDOUT"
    psql = [str(b.bindir / "psql"), "-X", "-q", "-h", "127.0.0.1", "-p", str(b.pg.port),
            "-U", "postgres", "-d", "postgres", "-c", copy_sql]
    with open(os.devnull, "wb") as devnull:
        sb.run_timed(psql, stdout=devnull)  # warm-up, untimed

    def copy_once():
        srv0 = server_cpu(b.postmaster)
        load0 = loadavg()
        with open(os.devnull, "wb") as devnull:
            seconds, usage, _ = sb.run_timed(psql, stdout=devnull)
        return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
                "server_cpu_s": server_cpu(b.postmaster) - srv0,
                "peak_rss_kb": usage.ru_maxrss, "load_before": load0,
                "load_after": loadavg()}

    def tool_once(workers, r):
        slot = f"psnap_tool_w{workers}_{r}"
        args = [str(SNAPSHOT_TOOL), "--dsn", b.pg.dsn(), "--slot", slot,
                "--tables-json", f'[["public", "{table}"]]', "--workers", str(workers),
                "--output", "arrow", "--copy-format", "binary"]
        srv0 = server_cpu(b.postmaster)
        load0 = loadavg()
        try:
            seconds, usage, text = sb.run_timed(args, stdout=subprocess.PIPE)
        finally:
            b.drop_slots([slot])
        done = [json.loads(x) for x in text.splitlines() if x.strip()][-1]
        if not done.get("complete") or done["rows"] != SNAP_ROWS:
            raise RuntimeError(f"snapshot_tool: {done}")
        return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
                "server_cpu_s": server_cpu(b.postmaster) - srv0,
                "peak_rss_kb": usage.ru_maxrss, "load_before": load0,
                "load_after": loadavg()}

    def floe_once(r, workers=2):
        slot = f"psnap_floe_w{workers}_{r}"
        base = b.work / f"snap_floe_w{workers}_{r}"
        try:
            res = b.floe_run_until(base, slot, "pub_snap", table, SNAP_ROWS,
                                   snapshot="initial", snapshot_workers=workers)
        finally:
            b.drop_slots([slot])
        shutil.rmtree(base, ignore_errors=True)
        return res

    def dbz_once(r):
        slot = f"psnap_dbz_{r}"
        base = b.work / f"snap_dbz_{r}"
        try:
            res = b.debezium(base, SNAP_ROWS, {
                "slot.name": slot, "publication.name": "pub_snap",
                "publication.autocreate.mode": "disabled", "snapshot.mode": "initial",
                "table.include.list": f"public.{table}"}, slot)
        finally:
            # The connector's slot may still be held for a moment after it exits.
            for _ in range(50):
                try:
                    b.drop_slots([slot])
                    break
                except Exception:
                    time.sleep(0.2)
        shutil.rmtree(base, ignore_errors=True)
        return res

    tool_workers = [1, 2] if SNAPSHOT_TOOL.exists() else []
    copies, floe, floe_1, dbz = [], [], [], []
    tools = {w: [] for w in tool_workers}
    for r in range(SNAP_RUNS):
        copies.append(copy_once())
        for w in tool_workers:
            tools[w].append(tool_once(w, r))
        floe_1.append(floe_once(r, workers=1))
        floe.append(floe_once(r))
        dbz.append(dbz_once(r))
        log(f"snapshot run {r + 1}/{SNAP_RUNS}: COPY {copies[-1]['seconds']:.2f}s, "
            + "".join(f"reader {w}w {tools[w][-1]['seconds']:.2f}s, " for w in tool_workers)
            + f"floe run 1w {floe_1[-1]['seconds']:.2f}s, 2w {floe[-1]['seconds']:.2f}s, "
            f"Debezium {dbz[-1]['seconds']:.2f}s")
    copy_s = summarize(copies, SNAP_ROWS)
    result = {"rows": SNAP_ROWS, "runs": SNAP_RUNS, "table_bytes": table_bytes,
              "copy_command": f'psql -X -q -c "{copy_sql}" >/dev/null',
              "copy": copy_s, "floe_reader": [], "debezium": None}
    for w in tool_workers:
        s = summarize(tools[w], SNAP_ROWS)
        s["workers"] = w
        s["ratio_to_copy"] = s["rows_per_s"] / copy_s["rows_per_s"]
        result["floe_reader"].append(s)
    fr = summarize(floe, SNAP_ROWS)
    fr["workers"] = 2
    fr["ratio_to_copy"] = fr["rows_per_s"] / copy_s["rows_per_s"]
    fr["bronze_bytes"] = floe[-1]["bronze_bytes"]
    fr["bronze_bytes_per_row"] = floe[-1]["bronze_bytes"] / SNAP_ROWS
    result["floe_run"] = fr
    f1 = summarize(floe_1, SNAP_ROWS)
    f1["workers"] = 1
    f1["ratio_to_copy"] = f1["rows_per_s"] / copy_s["rows_per_s"]
    result["floe_run_1"] = f1
    dz = summarize(dbz, SNAP_ROWS)
    dz["ratio_to_copy"] = dz["rows_per_s"] / copy_s["rows_per_s"]
    dz["json_bytes_per_row"] = median([x["json_bytes"] for x in dbz]) / SNAP_ROWS
    result["debezium"] = dz
    b.sql("DROP PUBLICATION pub_snap")
    b.sql(f"DROP TABLE {table}")
    b.sql("CHECKPOINT")
    return result


# -- Silver vs Spark ----------------------------------------------------------------------


def silver_changes_proc(b: Peers, table: str, rows: int, changes: int, per_tx: int) -> None:
    """Per transaction of `per_tx` changes: 60% updates (200,000 distinct keys at most,
    each updated up to three times over the increment), 15% deletes of distinct keys
    (never updated), 25% inserts of new keys. Keys to update are 7x+1+(x mod 6) with
    x = (g mod U) * P mod M, a permutation of [0, M), M = rows / 7; deleted keys are
    multiples of 7."""
    b.sql(f"""CREATE PROCEDURE gen_silver(n_tx int, per_tx int, m bigint, u bigint)
      LANGUAGE plpgsql AS $$
      DECLARE
        nu int := per_tx * 60 / 100;
        nd int := per_tx * 15 / 100;
        ni int := per_tx - nu - nd;
      BEGIN
        FOR i IN 0..n_tx - 1 LOOP
          UPDATE {table} SET status = 'paid', amount = amount + 1,
              note = 'updated ' || i
            WHERE order_id IN (
              SELECT 7 * x + 1 + x % 6 FROM (
                SELECT ((g % u) * 1000003) % m AS x
                FROM generate_series(i::bigint * nu, i::bigint * nu + nu - 1) g) s);
          DELETE FROM {table} WHERE order_id IN (
              SELECT 7 * (g + 1) FROM generate_series(i::bigint * nd,
                                                      i::bigint * nd + nd - 1) g);
          INSERT INTO {table} SELECT {sb.ORDERS_ROW.replace('g,', 'g,', 1)}
            FROM generate_series({rows} + 1 + i::bigint * ni,
                                 {rows} + i::bigint * ni + ni) g;
          COMMIT;
        END LOOP;
      END $$""")


def silver_part(b: Peers, spark_jar: Path) -> dict:
    table = "silver_orders"
    per_tx = 1000
    n_tx = max(1, SILVER_CHANGES // per_tx)
    m = SILVER_ROWS // 7
    u = min(200000, m)
    if n_tx * per_tx * 15 // 100 > m:
        raise RuntimeError("BENCH_PEER_SILVER_CHANGES too large for BENCH_PEER_SILVER_ROWS")
    log(f"silver: loading {SILVER_ROWS:,} rows")
    load_orders(b, table, SILVER_ROWS)
    b.sql(f"CREATE PUBLICATION pub_silver FOR TABLE {table}")
    base = b.work / "silver"
    config = b.floe_config_full(base, "psilver", "pub_silver", "initial", interval="10s")
    warehouse = base / "warehouse"
    log("silver: floe run (initial copy into Bronze)")
    initial = b.floe_run_until(base, "psilver", "pub_silver", table, SILVER_ROWS,
                               snapshot="initial")
    log(f"silver: initial copy took {initial['seconds']:.1f}s; floe silver (backfill)")
    backfill = b.floe_silver_pass(config, base)
    log(f"silver: backfill took {backfill['seconds']:.1f}s")
    cat = sqlite3.connect(warehouse / "catalog.db")
    ns = "silver.bench.public"
    m0 = cat.execute("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? "
                     "AND table_name = ?", (ns, table)).fetchone()[0]
    cat.close()
    meta0 = json.loads(Path(m0.removeprefix("file://")).read_text())
    spec = meta0["partition-specs"][-1]["fields"]
    buckets = int(spec[0]["transform"].removeprefix("bucket[").rstrip("]")) if spec else 1
    # The starting table's data files (a backfill writes data files only).
    start_files = sorted(str(p) for p in (Path(m0.removeprefix("file://")).parent.parent
                                          / "data").rglob("*.parquet"))
    start_bytes = sum(Path(p).stat().st_size for p in start_files)

    # The increment, streamed into Bronze by the same pipeline.
    silver_changes_proc(b, table, SILVER_ROWS, n_tx * per_tx, per_tx)
    log(f"silver: {n_tx * per_tx:,} changes in {n_tx} transactions")
    t0 = time.perf_counter()
    b.sql("CALL gen_silver(%s, %s, %s, %s)", (n_tx, per_tx, m, u))
    gen_s = time.perf_counter() - t0
    # Bronze must hold the initial rows plus every change row Postgres produced.
    expected_rows = b.one(f"SELECT count(*) FROM {table}")
    key_sum = int(b.one(f"SELECT sum(order_id) FROM {table}"))
    changes = n_tx * per_tx
    log(f"silver: generated in {gen_s:.1f}s; floe run catching up")
    catchup = b.floe_run_until(base, "psilver", "pub_silver", table, SILVER_ROWS + changes)
    cat = sqlite3.connect(warehouse / "catalog.db")
    bronze_meta = cat.execute(
        "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND "
        "table_name = ?", ("bronze.bench.public", table)).fetchone()[0]
    cat.close()
    watermark = None
    for snap in meta0["snapshots"]:
        if snap["snapshot-id"] == meta0["current-snapshot-id"]:
            watermark = int(snap["summary"]["floe.bronze-commit-lsn"])
    spark_wh = b.work / "spark_wh"
    spark_common = ["--jar", str(spark_jar), "--warehouse", str(spark_wh),
                    "--driver-memory", SPARK_DRIVER_MEMORY]
    log("silver: building Spark's copy of the starting table")
    files_list = b.work / "start_files.json"
    files_list.write_text(json.dumps(start_files))
    setup = run_spark(spark_common + ["setup", "--files", str(files_list),
                                      "--buckets", str(buckets)])
    log(f"silver: Spark table loaded ({setup})")

    floe_runs, spark_runs, checks = [], [], []
    for r in range(SILVER_RUNS):
        if r > 0:  # back to the starting table: the catalog points at it again
            cat = sqlite3.connect(warehouse / "catalog.db")
            cat.execute("UPDATE iceberg_tables SET metadata_location = ?, "
                        "previous_metadata_location = NULL WHERE table_namespace = ? "
                        "AND table_name = ?", (m0, ns, table))
            cat.commit()
            cat.close()
        f = b.floe_silver_pass(config, base)
        cat = sqlite3.connect(warehouse / "catalog.db")
        m1 = cat.execute("SELECT metadata_location FROM iceberg_tables WHERE "
                         "table_namespace = ? AND table_name = ?", (ns, table)).fetchone()[0]
        cat.close()
        meta1 = json.loads(Path(m1.removeprefix("file://")).read_text())
        cur = next(s for s in meta1["snapshots"]
                   if s["snapshot-id"] == meta1["current-snapshot-id"])
        f["summary"] = cur["summary"]
        s = run_spark(spark_common + ["merge", "--bronze", bronze_meta,
                                      "--watermark", str(watermark),
                                      "--snapshot", str(setup["snapshot_id"])])
        chk = compare_results(m1.removeprefix("file://"), s["metadata"], expected_rows,
                              key_sum)
        floe_runs.append(f)
        spark_runs.append(s)
        checks.append(chk)
        log(f"silver run {r + 1}/{SILVER_RUNS}: floe silver {f['seconds']:.2f}s, Spark MERGE "
            f"{s['merge_seconds']:.2f}s (process {s['seconds']:.2f}s); check {chk}")
    fs = summarize(floe_runs, changes)
    ss = summarize([{**x, "seconds": x["merge_seconds"], "cpu_s": x["merge_jvm_cpu_s"]}
                    for x in spark_runs], changes)
    ss["process_seconds_runs"] = [round(x["seconds"], 2) for x in spark_runs]
    ss["process_seconds"] = median([x["seconds"] for x in spark_runs])
    ss["session_start_seconds"] = median([x["session_seconds"] for x in spark_runs])
    ss["peak_rss_mb"] = max(x["jvm_peak_rss_kb"] for x in spark_runs) / 1024
    ss["summary"] = spark_runs[-1]["summary"]
    ss["statement"] = spark_runs[-1]["statement"]
    fs["summary"] = floe_runs[-1]["summary"]
    nu, nd = per_tx * 60 // 100, per_tx * 15 // 100
    result = {
        "rows": SILVER_ROWS, "changes": changes, "transactions": n_tx,
        "updates": n_tx * nu, "updated_keys": min(u, n_tx * nu), "deletes": n_tx * nd,
        "inserts": n_tx * (per_tx - nu - nd),
        "runs": SILVER_RUNS, "buckets": buckets, "start_files": len(start_files),
        "start_bytes": start_bytes, "rows_after": expected_rows,
        "bronze_increment_rows": changes, "watermark": watermark,
        "initial_copy": {k: initial[k] for k in ("seconds", "cpu_s", "peak_rss_kb")},
        "backfill": {k: backfill[k] for k in ("seconds", "cpu_s", "peak_rss_kb")},
        "catchup": {k: catchup[k] for k in ("seconds", "cpu_s", "peak_rss_kb")},
        "spark_setup": setup, "floe_silver": fs, "spark": ss,
        "checks": checks,
        "all_equal": all(c["equal"] for c in checks),
        "speedup": ss["seconds"] / fs["seconds"],
        "speedup_vs_spark_process": ss["process_seconds"] / fs["seconds"],
    }
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(spark_wh, ignore_errors=True)
    b.sql("DROP PUBLICATION pub_silver")
    b.sql(f"DROP TABLE {table}")
    return result


def run_spark(args: list[str]) -> dict:
    """bench/peers/spark_merge.py in its own process; returns its JSON line."""
    load0 = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.run([str(VENV_PY), str(SPARK_SCRIPT), *args], capture_output=True,
                          text=True, timeout=7200)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"spark_merge.py {args} exited {proc.returncode}:\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}")
    line = [x for x in proc.stdout.splitlines() if x.startswith("{")][-1]
    out = json.loads(line)
    out["seconds"] = seconds
    out["load_before"] = load0
    out["load_after"] = loadavg()
    return out


def compare_results(floe_meta: str, spark_meta: str, rows: int, key_sum: int) -> dict:
    """Both Silver results read by DuckDB (iceberg_scan, position deletes applied):
    row count, distinct keys, sum of keys (against the source's too), and a checksum
    of every row's values (hash of all columns, summed)."""
    import duckdb
    import duckdb_ext  # the pip-installed duckdb-ext-* packages: no download

    con = duckdb.connect(config={
        "extension_directory": str(Path(list(duckdb_ext.__path__)[0]) / "extensions"),
        "autoinstall_known_extensions": False, "autoload_known_extensions": True})
    con.execute("LOAD iceberg")
    con.execute("SET TimeZone = 'UTC'")
    q = ("SELECT count(*), count(DISTINCT order_id), sum(order_id)::HUGEINT, "
         "sum(hash(order_id, customer_id, status, amount, created_at, note, "
         "cdc_commit_lsn))::HUGEINT FROM iceberg_scan(?)")
    a = con.execute(q, [floe_meta]).fetchone()
    s = con.execute(q, [spark_meta]).fetchone()
    con.close()
    out = {"floe": {"rows": a[0], "keys": a[1], "key_sum": int(a[2]), "checksum": str(a[3])},
           "spark": {"rows": s[0], "keys": s[1], "key_sum": int(s[2]), "checksum": str(s[3])},
           "source": {"rows": rows, "key_sum": key_sum}}
    out["equal"] = (a[0] == s[0] == rows and a[1] == s[1] == rows
                    and int(a[2]) == int(s[2]) == key_sum and a[3] == s[3])
    return out


# -- main -----------------------------------------------------------------------------------


def versions(dbz: bool, spark_jar: Path | None) -> dict:
    def first_line(args):
        try:
            p = subprocess.run(args, capture_output=True, text=True)
            return (p.stdout + p.stderr).strip().splitlines()[0]
        except (OSError, IndexError):
            return None

    v = {"floe": first_line([str(FLOE), "--version"]),
         "java": first_line(["java", "-version"]),
         "maven": first_line(["mvn", "-v"]),
         "pg_recvlogical": first_line([str(pg_bindir() / "pg_recvlogical"), "--version"])}
    if dbz:
        v["debezium"] = DEBEZIUM_VERSION
    if spark_jar is not None:
        v["pyspark"] = PYSPARK_VERSION
        v["iceberg_spark_runtime"] = f"iceberg-spark-runtime-3.5_2.12 {ICEBERG_VERSION}"
    try:
        import duckdb
        v["duckdb"] = duckdb.__version__
    except ImportError:
        pass
    return v


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal"))
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem / 1048576),
            "kernel": platform.release(), "python": platform.python_version()}


def git_state() -> dict:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"],
                           capture_output=True, text=True).stdout.strip()
    return {"commit": head,
            "note": "working tree had uncommitted changes by others" if dirty else "clean"}


def run_header(build: Path, floe: Path) -> dict:
    """What every Silver benchmark's JSON document starts with: when, where, which
    commit and build of floe, and the versions measured."""
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine(), "git": git_state(),
            "build_dir": str(build.relative_to(ROOT)) if build.is_relative_to(ROOT)
            else str(build),
            "floe_binary_built": time.strftime("%Y-%m-%d %H:%M UTC",
                                               time.gmtime(floe.stat().st_mtime)),
            "versions": versions(False, None)}


def main() -> int:
    if not FLOE.exists():
        log(f"{FLOE} is missing (build floe in {BUILD})")
        return 1
    t_start = time.time()
    dbz_cp = build_debezium() if ("stream" in PARTS or "snapshot" in PARTS) else None
    spark_jar = prepare_spark() if "silver" in PARTS else None
    doc = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "machine": machine(), "git": git_state(),
           "build_dir": str(BUILD.relative_to(ROOT)) if BUILD.is_relative_to(ROOT)
           else str(BUILD),
           "floe_binary_built": time.strftime("%Y-%m-%d %H:%M UTC",
                                              time.gmtime(FLOE.stat().st_mtime)),
           "floe_binary": str(FLOE.relative_to(ROOT)) if FLOE.is_relative_to(ROOT)
           else str(FLOE),
           "versions": versions(dbz_cp is not None, spark_jar),
           "settings": {"BENCH_PEER_RUNS": RUNS, "BENCH_PEER_PARTS": ",".join(PARTS),
                        "BENCH_PEER_STREAM_ROWS": STREAM_ROWS,
                        "BENCH_PEER_STREAM_TX_ROWS": STREAM_TX_ROWS,
                        "BENCH_PEER_MIXED_TX": MIXED_TX,
                        "BENCH_PEER_SNAPSHOT_ROWS": SNAP_ROWS,
                        "BENCH_PEER_SNAPSHOT_RUNS": SNAP_RUNS,
                        "BENCH_PEER_SILVER_ROWS": SILVER_ROWS,
                        "BENCH_PEER_SILVER_CHANGES": SILVER_CHANGES,
                        "BENCH_PEER_SILVER_RUNS": SILVER_RUNS},
           "server_conf": {"shared_buffers": "128MB", "fsync": "off",
                           "full_page_writes": "off", **sb.SERVER_CONF},
           "peer_settings": {
               "debezium": f"embedded engine (async), JVM -Xms512m -Xmx{JVM_HEAP}, default "
                           "G1 GC; plugin.name=pgoutput, own slot and publication, file "
                           "offset store (offset.flush.interval.ms=10000), JSON converter "
                           "with converter.schemas.enable=false, tombstones.on.delete=false, "
                           "other connector settings at their defaults (max.batch.size "
                           "2048, max.queue.size 8192, decimal.handling.mode precise); each "
                           "event's value written as one line to a file",
               "spark": f"PySpark {PYSPARK_VERSION}, master local[2], "
                        f"spark.driver.memory={SPARK_DRIVER_MEMORY}, "
                        "spark.sql.shuffle.partitions=2 (local[2]), Iceberg Hadoop catalog "
                        "on the local disk, format-version 2, write.merge.mode/"
                        "write.update.mode/write.delete.mode = merge-on-read, same "
                        "bucket partitioning and key sort order as floe's Silver table",
               "floe": "floe run: checkpoint.interval 1s (streaming), "
                       "source.snapshot_workers 1 and 2 (snapshot); floe silver: defaults",
           },
           "commands": {
               "run_alone": "FLOE_BUILD_DIR=build/release .venv/bin/python "
                            "bench/peers_bench.py",
               "pg_recvlogical": "pg_recvlogical --slot SLOT --start --no-loop "
                                 "-o proto_version=3 -o publication_names=PUB "
                                 "-o messages=true -o streaming=on --endpos END "
                                 "-f /dev/null",
               "floe_run": "floe run pipeline.yaml (snapshot: never, checkpoint.interval: "
                           "1s), timed until Bronze's committed total-records covers the "
                           "backlog, then SIGTERM",
               "debezium": f"java -Xms512m -Xmx{JVM_HEAP} -cp build/bench-cache/debezium/"
                           "target/debezium-peer-1.jar:build/bench-cache/debezium/target/"
                           "lib/* floe.bench.DebeziumPeer --out=events.jsonl --events=N "
                           "slot.name=SLOT publication.name=PUB "
                           "publication.autocreate.mode=disabled snapshot.mode=no_data "
                           "table.include.list=public.TABLE",
               "snapshot_floe_run": "floe run pipeline.yaml (snapshot: initial), timed "
                                    "until Bronze holds every row",
               "snapshot_reader": "snapshot_tool --tables-json '[[\"public\", "
                                  "\"snap_orders\"]]' --workers N --output arrow --copy-format binary",
               "snapshot_debezium": "DebeziumPeer ... snapshot.mode=initial --events=ROWS",
               "floe_silver": "floe silver pipeline.yaml",
               "spark_merge": ".venv/bin/python bench/peers/spark_merge.py merge ... "
                              "(MERGE INTO ... USING (latest Bronze change per key above "
                              "the watermark) ... WHEN MATCHED AND op = 'd' THEN DELETE WHEN "
                              "MATCHED THEN UPDATE SET * WHEN NOT MATCHED AND op <> 'd' "
                              "THEN INSERT *)",
           },
           "loadavg_start": loadavg()}
    (BUILD / "bench").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="floe-peers-bench-", dir=BUILD / "bench"))
    failures = {}
    try:
        with PgCluster(extra_conf=sb.SERVER_CONF) as pg:
            b = Peers(pg, work, dbz_cp)
            doc["versions"]["postgres"] = b.one("SELECT version()")
            for part in PARTS:
                t0 = time.time()
                load0 = loadavg()
                try:
                    if part == "stream":
                        doc["stream"] = stream_part(b)
                    elif part == "snapshot":
                        doc["snapshot"] = snapshot_part(b)
                    elif part == "silver":
                        doc["silver"] = silver_part(b, spark_jar)
                    else:
                        raise RuntimeError(f"unknown part {part}")
                except Exception as e:  # keep the other parts' figures
                    log(f"{part} failed: {e}")
                    failures[part] = str(e)[-3000:]
                doc.setdefault("part_info", {})[part] = {
                    "seconds": round(time.time() - t0, 1), "loadavg_before": load0,
                    "loadavg_after": loadavg()}
            b.conn.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["failures"] = failures
    doc["loadavg_end"] = loadavg()
    doc["total_seconds"] = round(time.time() - t_start, 1)
    results = BUILD / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    if os.environ.get("BENCH_PEER_MERGE") == "1" and (results / "peers.json").exists():
        # Parts measured by separate invocations, kept together in one document: the
        # earlier document's other parts stay, with their own settings and times.
        old = json.loads((results / "peers.json").read_text())
        if "invocations" not in old:
            old["invocations"] = [
                {k: old.get(k) for k in ("date", "settings", "total_seconds",
                                         "loadavg_start", "loadavg_end", "git", "failures")}]
        replaced = old.get("replaced", {})
        for part in PARTS:
            if part in old:  # measured again now: the earlier figures are kept aside
                replaced.setdefault(part, []).append(old[part])
            old.pop(part, None)
            old.get("failures", {}).pop(part, None)
        for part in ("stream", "snapshot", "silver"):
            if part in old and part not in doc:
                doc[part] = old[part]
                doc.setdefault("part_info", {})[part] = old.get("part_info", {}).get(part)
                doc["failures"].update({k: v for k, v in old.get("failures", {}).items()
                                        if k == part})
        if replaced:
            doc["replaced"] = replaced
        doc["invocations"] = old["invocations"] + [
            {k: doc.get(k) for k in ("date", "settings", "total_seconds", "loadavg_start",
                                     "loadavg_end", "git", "failures")}]
        doc["total_seconds"] = sum(i.get("total_seconds") or 0 for i in doc["invocations"])
        for k in ("debezium", "pyspark", "iceberg_spark_runtime"):
            if k in old.get("versions", {}) and k not in doc["versions"]:
                doc["versions"][k] = old["versions"][k]
    text = json.dumps(doc, indent=1, default=str)
    (results / "peers.json").write_text(text + "\n")
    print(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
