#!/usr/bin/env python3
"""Silver within its memory budget (issue 16): time, CPU and peak RSS of `floe silver`
merges and backfills as they grow, against `silver.memory_limit`.

Run alone (from the repository root; floe must be built in FLOE_BUILD_DIR):

    FLOE_BUILD_DIR=build/release .venv/bin/python bench/silver_memory_bench.py

It prints one JSON document on stdout (progress on stderr) and writes the same to
<build>/bench/results/silver_memory.json; bench/silver_memory_render.py turns it into
the Markdown section of BENCHMARKS.md (bench/run does both).

What it does, on one throwaway PostgreSQL 15 cluster (tests/integration/pgcluster.py,
the server settings of bench/stream_bench.py):

1. Source tables of an orders-like shape (order_id bigint primary key, customer_id,
   status, amount numeric(12,2), created_at timestamptz, note: about 100 bytes a row):
   `orders` of BENCH_MEM_ROWS rows, the table the merges go into, and one table per
   backfill size of BENCH_MEM_BACKFILLS other than BENCH_MEM_ROWS (the first Silver
   pass over `orders` is itself the backfill of a BENCH_MEM_ROWS-row table). Each
   table has a publication, a slot, a pipeline file (service) and a warehouse of its
   own, so every `floe silver` measured merges exactly one table with the whole
   memory limit (a pass shares it among the tables it merges at once).
2. `floe run` (snapshot: initial, checkpoint.interval 1s) copies every table into
   Bronze; a table is in once Bronze holds all its rows and the slot's
   confirmed_flush_lsn has passed pg_current_wal_lsn() taken after the load. The
   Bronze table of `orders` then stands at B0.
3. One stream of changes to `orders` is generated server-side (a PL/pgSQL procedure,
   BENCH_MEM_TX_CHANGES changes a transaction, 60% updates, 20% deletes, 20% inserts,
   so the table keeps its size): the oldest keys are deleted, new keys inserted above
   the largest, updates hit random live keys, a quarter of them the newest 1% of the
   keys (recent orders change more), so some keys change several times. The stream
   is cut at each merge size of BENCH_MEM_MERGES (cumulative: the 10M increment is
   the first 10M changes); at each cut the source's row count and checksum are taken,
   `floe run` is waited for (confirmed_flush_lsn past pg_current_wal_lsn()), and
   Bronze's metadata location B_k is kept. Then `floe run` stops; nothing writes
   from here on.
4. Measurements, one `floe silver` process each, nothing else of the benchmark
   running: the backfill of `orders` from B0 (this is the starting Silver table S0),
   the backfill of each other table, and for each merge size k the merge of S0 with
   the increment (B0, B_k]: the SQLite catalog's entries (iceberg_tables.
   metadata_location) are pointed back at S0 and B_k before each run, so every merge
   starts from the very same Silver table. Each merge runs at BENCH_MEM_LIMIT (the
   budget), again at BENCH_MEM_UNSLICED_LIMIT (so large that nothing is spilled: the
   time the slicing costs), and the largest also at each of BENCH_MEM_SMALL_LIMITS.
   An unsliced run is skipped when its predicted peak RSS (the increment's Arrow
   bytes times the peak-RSS-per-byte of the previous unsliced run, or times 8) would
   not fit in 80% of MemAvailable.

Each `floe silver` is started by a small fresh Python interpreter that forks and execs
it and reports wait4's rusage: wall time (fork to exit), CPU (user + system) and peak
RSS (ru_maxrss: the kernel's high-water mark of the process, every thread, page by
page). A child forked straight from this process would count this process's pages in
its peak until it execs. The log line of each run gives the slices ("N bytes of
changes spilled and merged in K slices"; 1 when it says nothing) and the merge's
counters, and the Silver commit's snapshot summary its floe.merge.* counters. The
spill directory's size on disk is sampled every 2 s. Every result is checked with
DuckDB (iceberg_scan of the Silver metadata file, position deletes applied): row count,
distinct keys and a checksum (the sum over rows of the first 60 bits of the md5 of the
row's values as text) against the same checksum computed by PostgreSQL on the source
at that cut.

Environment: FLOE_BUILD_DIR (default build/release), BENCH_MEM_SCALE (1: multiplies
every row and change count below), BENCH_MEM_ROWS (10000000), BENCH_MEM_MERGES
(1000000,10000000,30000000), BENCH_MEM_BACKFILLS (10000000,50000000), BENCH_MEM_LIMIT
(512MiB, floe's default), BENCH_MEM_UNSLICED_LIMIT (64GiB; empty: no unsliced runs),
BENCH_MEM_SMALL_LIMITS (64MiB; comma-separated, for the largest merge; empty: none),
BENCH_MEM_TX_CHANGES (1000), BENCH_MEM_RUNS (1: runs of each measurement; median time
and CPU, largest peak RSS), BENCH_MEM_SEED (16), BENCH_MEM_TIMEOUT (14400 s per floe
silver run), BENCH_MEM_VERIFY (1: after the backfills, `floe verify` of each table
backfilled other than `orders`, at BENCH_MEM_LIMIT: it folds the table's whole Bronze
history, reads Silver and reads the source, and must find them consistent; 0: none).
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
sys.path.insert(0, str(ROOT / "bench"))
from pgcluster import PgCluster  # noqa: E402

import peers_bench as pb  # noqa: E402  (read-only helpers)
import stream_bench as sb  # noqa: E402
from silver_layout_bench import current_summary, metadata, summary_fields  # noqa: E402

BUILD = Path(os.environ.get("FLOE_BUILD_DIR", ROOT / "build" / "release")).resolve()
FLOE = BUILD / "src" / "floe" / "cli" / "floe"


def _sizes(name: str, default: str) -> list[int]:
    text = os.environ.get(name, default).strip()
    return [int(x) for x in text.split(",") if x.strip()] if text else []


SCALE = float(os.environ.get("BENCH_MEM_SCALE", "1"))
ROWS_BASE = int(os.environ.get("BENCH_MEM_ROWS", "10000000"))
MERGES_BASE = _sizes("BENCH_MEM_MERGES", "1000000,10000000,30000000")
BACKFILLS_BASE = _sizes("BENCH_MEM_BACKFILLS", "10000000,50000000")
LIMIT = os.environ.get("BENCH_MEM_LIMIT", "512MiB").strip()
UNSLICED_LIMIT = os.environ.get("BENCH_MEM_UNSLICED_LIMIT", "64GiB").strip()
SMALL_LIMITS = [x.strip() for x in os.environ.get("BENCH_MEM_SMALL_LIMITS", "64MiB").split(",")
                if x.strip()]
TX_CHANGES = int(os.environ.get("BENCH_MEM_TX_CHANGES", "1000"))
RUNS = int(os.environ.get("BENCH_MEM_RUNS", "1"))
SEED = int(os.environ.get("BENCH_MEM_SEED", "16"))
TIMEOUT = float(os.environ.get("BENCH_MEM_TIMEOUT", "14400"))
VERIFY = os.environ.get("BENCH_MEM_VERIFY", "1").strip() not in ("", "0")


def scaled(n: int) -> int:
    return max(1, int(round(n * SCALE)))


ROWS = scaled(ROWS_BASE)
MERGES = sorted({scaled(n) for n in MERGES_BASE})
BACKFILLS = sorted({scaled(n) for n in BACKFILLS_BASE})

TABLE = "orders"
SCHEMA_NS = "public"
# The floe.merge.* counters and the other fields of a Silver commit's snapshot summary
# worth keeping.
SUMMARY_KEYS = [
    "operation", "floe.merge.silver-bytes-read", "floe.merge.bronze-bytes-read",
    "floe.merge.bytes-written", "floe.merge.files-read", "floe.merge.row-groups-read",
    "floe.merge.row-groups-skipped-stats", "floe.merge.row-groups-skipped-bloom",
    "added-data-files", "deleted-data-files", "added-delete-files",
    "added-position-delete-files", "added-position-deletes", "added-files-size",
    "removed-files-size", "added-records", "deleted-records", "total-records",
    "total-files-size", "total-data-files", "total-delete-files", "total-position-deletes"]

# Row g of the source tables: about 100 bytes in PostgreSQL (77 of values).
ROW_SQL = """g, (g * 7919) % 100000,
  (ARRAY['new','paid','shipped','delivered','cancelled'])[1 + (g % 5)::int],
  ((g * 37) % 1000000) / 100.0, timestamptz '2026-01-01' + g * interval '1 second',
  'order ' || md5(g::text)"""
COLUMNS_SQL = """(order_id bigint PRIMARY KEY, customer_id bigint NOT NULL,
  status text NOT NULL, amount numeric(12,2) NOT NULL, created_at timestamptz NOT NULL,
  note text)"""

# The checksum of a table: the sum over its rows of the first 60 bits of the md5 of
# the row's values as text (integers in decimal, the amount in cents, the timestamp in
# microseconds since the epoch, a null note as '~'). PostgreSQL's and DuckDB's
# spellings of the same text.
PG_CHECKSUM = """SELECT count(*), coalesce(sum(('x' || substr(md5(concat_ws('|', order_id,
  customer_id, status, (amount * 100)::bigint,
  (extract(epoch FROM created_at) * 1000000)::bigint, coalesce(note, '~'))), 1, 15)
  )::bit(60)::bigint), 0) FROM {table}"""
DUCK_CHECKSUM = """SELECT count(*), count(DISTINCT order_id),
  coalesce(sum(('0x' || substr(md5(concat_ws('|', order_id, customer_id, status,
  CAST(amount * 100 AS BIGINT), epoch_us(created_at), coalesce(note, '~'))), 1, 15)
  )::BIGINT), 0) FROM iceberg_scan(?)"""

# Forks and execs the command from this small interpreter and writes wait4's figures
# for it to argv[1] (JSON): a child forked from the benchmark process itself would
# count the benchmark's pages in its peak RSS until it execs.
LAUNCHER = r"""
import json, os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
seconds = time.perf_counter() - t0
with open(sys.argv[1], "w") as f:
    json.dump({"seconds": seconds, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
               "maxrss_kb": ru.ru_maxrss, "exit": os.waitstatus_to_exitcode(status)}, f)
sys.exit(0)
"""


def log(msg: str) -> None:
    print(f"silver_memory_bench: {msg}", file=sys.stderr, flush=True)


loadavg = pb.loadavg


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)?\s*", text)
    if not m:
        raise ValueError(f"not a size: {text!r}")
    unit = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
            "TiB": 1 << 40, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    return int(m.group(1)) * unit[m.group(2)]


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def dir_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


# -- the catalog and table metadata --------------------------------------------------------


class Catalog:
    """A pipeline's SQLite catalog (Iceberg SQL catalog layout): reads a table's
    metadata location, and points a table back at an earlier metadata file of its own
    to reset it to that state (the files it reaches are all still there)."""

    def __init__(self, warehouse: Path):
        self.db = warehouse / "catalog.db"

    def location(self, ns: str, table: str) -> str | None:
        if not self.db.exists():
            return None
        con = sqlite3.connect(self.db, timeout=10)
        try:
            row = con.execute("SELECT metadata_location FROM iceberg_tables WHERE "
                              "table_namespace = ? AND table_name = ?",
                              (ns, table)).fetchone()
        except sqlite3.Error:
            return None
        finally:
            con.close()
        return row[0] if row and row[0] else None

    def point(self, ns: str, table: str, location: str) -> None:
        con = sqlite3.connect(self.db, timeout=10)
        try:
            cur = con.execute("UPDATE iceberg_tables SET metadata_location = ?, "
                              "previous_metadata_location = NULL WHERE table_namespace = ? "
                              "AND table_name = ?", (location, ns, table))
            con.commit()
            if cur.rowcount != 1:
                raise RuntimeError(f"no table {ns}.{table} in {self.db}")
        finally:
            con.close()


def bucket_count(location: str) -> int | None:
    meta = metadata(location)
    spec_id = meta.get("default-spec-id", 0)
    spec = next((s for s in meta.get("partition-specs", []) if s["spec-id"] == spec_id), None)
    for field in (spec or {}).get("fields", []):
        m = re.fullmatch(r"bucket\[(\d+)\]", field["transform"])
        if m:
            return int(m.group(1))
    return None


def table_state(location: str) -> dict:
    s = current_summary(location)

    def num(k):
        return int(s[k]) if k in s else None
    return {"records": num("total-records"), "bytes": num("total-files-size"),
            "data_files": num("total-data-files"), "delete_files": num("total-delete-files"),
            "commit_lsn": s.get("floe.commit-lsn"),
            "bronze_commit_lsn": s.get("floe.bronze-commit-lsn")}


# -- floe silver's log line -----------------------------------------------------------------

_LOG_FIELDS = {
    "log_ms": r"(?:merged|backfilled from \S+) in (\d+) ms",
    "buckets": r"bucket\((\d+)\)",
    "changes": r", (\d+) changes: ",
    "rows_written": r"(\d+) rows written",
    "keys_deleted": r"(\d+) keys deleted",
    "position_deletes": r"(\d+) position deletes in",
    "delete_files": r"position deletes in (\d+) files",
    "files_scanned": r"(\d+) Silver files scanned",
    "row_groups_read": r"(\d+) row groups read",
    "row_groups_skipped_stats": r"(\d+) skipped by key statistics",
    "row_groups_skipped_bloom": r"(\d+) by bloom filter",
    "data_files": r"(\d+) data files;",
    "silver_bytes_read": r"(\d+) bytes read from Silver",
    "bronze_bytes_read": r"(\d+) from Bronze",
    "bytes_written": r"(\d+) written",
    "spilled_bytes": r"(\d+) bytes of changes spilled",
    "slices": r"merged in (\d+) slices",
}


def parse_log(text: str, silver_id: str) -> dict:
    """The last `merged` / `backfilled` line of `silver_id` in floe silver's output."""
    lines = [ln for ln in text.splitlines()
             if silver_id in ln and (" merged in " in ln or " backfilled from " in ln)]
    if not lines:
        return {}
    line = lines[-1]
    out = {"line": line[line.find("silver:"):] if "silver:" in line else line,
           "outcome": "backfilled" if " backfilled from " in line else "merged"}
    for k, rx in _LOG_FIELDS.items():
        m = re.search(rx, line)
        if m:
            out[k] = int(m.group(1))
    out.setdefault("slices", 1)
    return out


# -- running floe silver ----------------------------------------------------------------------


def run_measured(args: list[str], log_path: Path, result_path: Path, spill_dir: Path,
                 timeout: float) -> dict:
    """`floe ARGS` forked and exec'ed by a fresh small interpreter (LAUNCHER); its
    output appended to log_path. Returns wall seconds, CPU, peak RSS, the largest spill
    directory size seen, and the run's output."""
    result_path.unlink(missing_ok=True)
    start = log_path.stat().st_size if log_path.exists() else 0
    load0 = loadavg()
    with open(log_path, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", LAUNCHER, str(result_path),
                                 str(FLOE), *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=log_path.parent)
        deadline = time.monotonic() + timeout
        spill_peak = 0
        next_sample = 0.0
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"floe {' '.join(args)} did not finish in {timeout} s")
                if time.monotonic() >= next_sample:
                    spill_peak = max(spill_peak, dir_bytes(spill_dir))
                    next_sample = time.monotonic() + 2.0
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                # The launcher's child (floe) first, then the launcher: ours only.
                try:
                    kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text()
                except OSError:
                    kids = ""
                for c in kids.split():
                    try:
                        os.kill(int(c), signal.SIGKILL)
                    except OSError:
                        pass
                proc.kill()
                proc.wait()
    with open(log_path, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    if proc.returncode != 0 or not result_path.exists():
        raise RuntimeError(f"the launcher of floe {' '.join(args)} exited {proc.returncode}:"
                           f"\n{text[-4000:]}")
    r = json.loads(result_path.read_text())
    if r["exit"] != 0:
        raise RuntimeError(f"floe {' '.join(args)} exited {r['exit']}:\n{text[-4000:]}")
    return {"seconds": r["seconds"], "cpu_s": r["user_s"] + r["sys_s"], "user_s": r["user_s"],
            "sys_s": r["sys_s"], "peak_rss_bytes": r["maxrss_kb"] * 1024,
            "spill_disk_peak_bytes": spill_peak, "load_before": load0,
            "load_after": loadavg(), "output": text}


# -- DuckDB ------------------------------------------------------------------------------------


class Duck:
    """DuckDB with its iceberg extension (the pip-installed duckdb-ext packages, no
    download), reading Silver straight from a metadata file."""

    def __init__(self):
        import duckdb
        import duckdb_ext
        self.con = duckdb.connect(config={
            "extension_directory": str(Path(list(duckdb_ext.__path__)[0]) / "extensions"),
            "autoinstall_known_extensions": False, "autoload_known_extensions": True,
            "threads": 2, "memory_limit": "4GB"})
        self.con.execute("LOAD iceberg")
        self.con.execute("SET TimeZone = 'UTC'")

    def check(self, location: str) -> dict:
        t0 = time.perf_counter()
        r = self.con.execute(DUCK_CHECKSUM, [location.removeprefix("file://")]).fetchone()
        return {"rows": int(r[0]), "keys": int(r[1]), "checksum": str(int(r[2])),
                "seconds": round(time.perf_counter() - t0, 2)}


def agrees(check: dict, state: dict) -> bool:
    return (check["rows"] == check["keys"] == state["rows"]
            and check["checksum"] == state["checksum"])


# -- the source ----------------------------------------------------------------------------------


def load_table(b: sb.Bench, table: str, rows: int) -> float:
    t0 = time.perf_counter()
    b.sql(f"CREATE TABLE {table} {COLUMNS_SQL}")
    step = 1_000_000
    for lo in range(1, rows + 1, step):
        hi = min(rows, lo + step - 1)
        b.sql(f"INSERT INTO {table} SELECT {ROW_SQL} FROM generate_series({lo}::bigint, "
              f"{hi}::bigint) g")
    b.sql(f"VACUUM (FREEZE, ANALYZE) {table}")
    return time.perf_counter() - t0


def source_state(b: sb.Bench, table: str) -> dict:
    t0 = time.perf_counter()
    r = b.sql(PG_CHECKSUM.format(table=table))[0]
    return {"rows": int(r[0]), "checksum": str(int(r[1])),
            "seconds": round(time.perf_counter() - t0, 2)}


def create_change_procedure(b: sb.Bench) -> None:
    """mem_changes(first_tx, n_tx, per_tx, base_rows, seed): transactions first_tx ..
    first_tx + n_tx - 1 of the change stream of `orders`. Before transaction i the
    live keys are (i * nd, base_rows + i * ni] with nd = ni: it deletes the nd oldest,
    updates nu random live keys that it does not delete (a quarter of them among the
    newest 1% of the keys; a key drawn twice in one transaction is updated once) and
    inserts ni new keys above the largest."""
    b.sql(f"""CREATE PROCEDURE mem_changes(first_tx int, n_tx int, per_tx int,
                                          base_rows bigint, seed float8)
      LANGUAGE plpgsql AS $$
      DECLARE
        nd int := per_tx / 5;
        ni int := per_tx / 5;
        nu int := per_tx - 2 * (per_tx / 5);
        nh int := (per_tx - 2 * (per_tx / 5)) / 4;
        hot bigint := greatest(base_rows / 100, 1);
        lo bigint;
        hi bigint;
      BEGIN
        PERFORM setseed(seed);
        FOR i IN first_tx .. first_tx + n_tx - 1 LOOP
          lo := i::bigint * nd;
          hi := base_rows + i::bigint * ni;
          UPDATE {TABLE} o SET
              status = (ARRAY['paid','shipped','delivered','cancelled','returned'])
                       [1 + ((o.order_id + i) % 5)::int],
              amount = o.amount + 1,
              note = 'updated ' || md5(o.order_id::text || '/' || i::text)
            WHERE o.order_id IN (
              SELECT lo + nd + 1 + floor(random() * (hi - lo - nd))::bigint
                FROM generate_series(1, nu - nh)
              UNION ALL
              SELECT hi - floor(random() * hot)::bigint FROM generate_series(1, nh));
          DELETE FROM {TABLE} WHERE order_id BETWEEN lo + 1 AND lo + nd;
          INSERT INTO {TABLE} SELECT {ROW_SQL}
            FROM generate_series(hi + 1, hi + ni) g;
          COMMIT;
        END LOOP;
      END $$""")


# -- services: a table, its publication, slot, pipeline files and warehouse -------------------


class Service:
    def __init__(self, name: str, table: str, rows: int, base: Path, pg: PgCluster,
                 spill_dir: Path):
        self.name, self.table, self.rows = name, table, rows
        self.base = base / name
        self.warehouse = self.base / "warehouse"
        self.warehouse.mkdir(parents=True, exist_ok=True)
        self.slot, self.pub = f"mem_{name}", f"pub_mem_{name}"
        self.pg, self.spill_dir = pg, spill_dir
        self.cat = Catalog(self.warehouse)
        self.bronze_ns = f"bronze.{name}.{SCHEMA_NS}"
        self.silver_ns = f"silver.{name}.{SCHEMA_NS}"
        self.silver_id = f"{self.silver_ns}.{table}"
        self.configs: dict[str, Path] = {}
        self.proc: subprocess.Popen | None = None
        self.run_log = self.base / "floe-run.log"
        self.silver_log = self.base / "floe-silver.log"

    def config(self, limit: str | None) -> Path:
        key = limit or "run"
        if key in self.configs:
            return self.configs[key]
        silver = ""
        if limit:
            silver = f"silver:\n  memory_limit: {limit}\n  spill_dir: {self.spill_dir}\n"
        path = self.base / f"pipeline-{key}.yaml"
        path.write_text(
            f"service: {self.name}\n"
            "source:\n"
            f"  conninfo: \"{self.pg.dsn()}\"\n"
            f"  slot: {self.slot}\n"
            f"  publication: {self.pub}\n"
            "  snapshot: initial\n"
            f"warehouse: {self.warehouse}\n"
            "checkpoint:\n"
            "  interval: 1s\n"
            "metrics:\n"
            "  listen: 127.0.0.1:0\n" + silver)
        p = subprocess.run([str(FLOE), "validate", str(path)], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"floe validate {path} failed:\n{p.stdout}{p.stderr}")
        self.configs[key] = path
        return path

    def start_run(self) -> None:
        self.run_log_file = open(self.run_log, "ab")
        self.proc = subprocess.Popen([str(FLOE), "run", str(self.config(None))],
                                     stdin=subprocess.DEVNULL, stdout=self.run_log_file,
                                     stderr=subprocess.STDOUT, cwd=self.base)

    def bronze_location(self) -> str | None:
        return self.cat.location(self.bronze_ns, self.table)

    def bronze_records(self) -> int:
        loc = self.bronze_location()
        if not loc:
            return 0
        try:
            return int(current_summary(loc).get("total-records", 0))
        except (OSError, ValueError):
            return 0

    def wait_caught_up(self, b: sb.Bench, min_records: int, timeout: float = 14400) -> float:
        """Until Bronze holds at least min_records rows and the slot's
        confirmed_flush_lsn passed pg_current_wal_lsn() taken now."""
        target = b.one("SELECT pg_current_wal_lsn()::text")
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"floe run ({self.name}) exited {self.proc.returncode}:\n"
                                   + self.run_log.read_text(errors="replace")[-4000:])
            ok = b.sql("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots "
                       "WHERE slot_name = %s", (target, self.slot))
            if ok and ok[0][0] and self.bronze_records() >= min_records:
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"floe run ({self.name}) did not catch up in {timeout} s")
            time.sleep(0.2)

    def stop_run(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(600)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
            if rc != 0:
                raise RuntimeError(f"floe run ({self.name}) exited {rc} on SIGTERM:\n"
                                   + self.run_log.read_text(errors="replace")[-4000:])
        self.run_log_file.close()
        self.proc = None

    def kill_run(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def drop_silver(self) -> None:
        """Removes the Silver table from the catalog and moves its directory aside, so
        that the next pass backfills it again (a repeated backfill measurement)."""
        loc = self.cat.location(self.silver_ns, self.table)
        if loc is None:
            return
        table_dir = Path(metadata(loc)["location"].removeprefix("file://"))
        con = sqlite3.connect(self.cat.db, timeout=10)
        try:
            con.execute("DELETE FROM iceberg_tables WHERE table_namespace = ? AND "
                        "table_name = ?", (self.silver_ns, self.table))
            con.commit()
        finally:
            con.close()
        if table_dir.exists():
            table_dir.rename(table_dir.with_name(f"{table_dir.name}.dropped-{time.time_ns()}"))

    def bronze_bytes(self, location: str) -> int:
        s = current_summary(location)
        return int(s.get("total-files-size", 0))


# -- measurements ------------------------------------------------------------------------------


def measure(svc: Service, limit: str, work: Path, duck: Duck, expected: dict,
            reset=None) -> dict:
    """RUNS `floe silver` runs of `svc` at `limit` (each after reset()); the median
    time and CPU, the largest peak RSS; each result checked against `expected`."""
    runs = []
    for i in range(RUNS):
        if reset is not None:
            reset()
        elif i > 0:  # a backfill again: the table it made goes first
            svc.drop_silver()
        r = run_measured(["silver", str(svc.config(limit))], svc.silver_log,
                         work / "launcher.json", svc.spill_dir, TIMEOUT)
        out = r.pop("output")
        r["log"] = parse_log(out, svc.silver_id)
        if not r["log"]:
            raise RuntimeError(f"floe silver wrote no merge line for {svc.silver_id}:\n"
                               + out[-3000:])
        loc = svc.cat.location(svc.silver_ns, svc.table)
        r["silver_metadata"] = loc
        r["summary"] = summary_fields(loc)
        r["check"] = duck.check(loc)
        r["equal_to_source"] = agrees(r["check"], expected)
        runs.append(r)
    limit_bytes = parse_size(limit)
    res = {"limit": limit, "limit_bytes": limit_bytes,
           "seconds": statistics.median(x["seconds"] for x in runs),
           "cpu_s": statistics.median(x["cpu_s"] for x in runs),
           "user_s": statistics.median(x["user_s"] for x in runs),
           "sys_s": statistics.median(x["sys_s"] for x in runs),
           "peak_rss_bytes": max(x["peak_rss_bytes"] for x in runs),
           "spill_disk_peak_bytes": max(x["spill_disk_peak_bytes"] for x in runs),
           "slices": max(x["log"].get("slices", 1) for x in runs),
           "spilled_bytes": max((x["log"].get("spilled_bytes") or 0) for x in runs) or None,
           "equal_to_source": all(x["equal_to_source"] for x in runs),
           "runs": runs}
    res["rss_over_limit"] = res["peak_rss_bytes"] / limit_bytes
    last = runs[-1]
    res["log"], res["summary"], res["check"] = last["log"], last["summary"], last["check"]
    res["silver_metadata"] = last["silver_metadata"]
    res["load_before"], res["load_after"] = runs[0]["load_before"], runs[-1]["load_after"]
    return res


def describe(kind: str, size: int, r: dict) -> str:
    return (f"{kind} {size:,}: limit {r['limit']}, {r['seconds']:.1f} s, CPU {r['cpu_s']:.1f} s, "
            f"peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB "
            f"({r['rss_over_limit']:.2f} of the limit), {r['slices']} slices, "
            f"equal to source {r['equal_to_source']}")


def save(doc: dict, name: str) -> None:
    results = BUILD / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / name).write_text(json.dumps(doc, indent=1, default=str) + "\n")


def main() -> int:
    if not FLOE.exists():
        log(f"{FLOE} is missing (build floe in {BUILD})")
        return 1
    if not MERGES:
        log("BENCH_MEM_MERGES is empty")
        return 1
    t_start = time.time()
    limit_bytes = parse_size(LIMIT)
    for lim in [UNSLICED_LIMIT] + SMALL_LIMITS:
        if lim:
            parse_size(lim)
    doc = {**pb.run_header(BUILD, FLOE),
           "settings": {"BENCH_MEM_SCALE": os.environ.get("BENCH_MEM_SCALE", "1"),
                        "BENCH_MEM_ROWS": ROWS_BASE,
                        "BENCH_MEM_MERGES": ",".join(map(str, MERGES_BASE)),
                        "BENCH_MEM_BACKFILLS": ",".join(map(str, BACKFILLS_BASE)),
                        "BENCH_MEM_LIMIT": LIMIT, "BENCH_MEM_UNSLICED_LIMIT": UNSLICED_LIMIT,
                        "BENCH_MEM_SMALL_LIMITS": ",".join(SMALL_LIMITS),
                        "BENCH_MEM_TX_CHANGES": TX_CHANGES, "BENCH_MEM_RUNS": RUNS,
                        "BENCH_MEM_SEED": SEED, "BENCH_MEM_VERIFY": int(VERIFY)},
           "explicit_env": {k: os.environ[k] for k in sorted(os.environ)
                            if k.startswith("BENCH_MEM_")},
           "sizes": {"rows": ROWS, "merges": MERGES, "backfills": BACKFILLS},
           "limit": LIMIT, "limit_bytes": limit_bytes, "unsliced_limit": UNSLICED_LIMIT,
           "small_limits": SMALL_LIMITS,
           "server_conf": {"shared_buffers": "128MB", "fsync": "off",
                           "full_page_writes": "off", **sb.SERVER_CONF},
           "loadavg_start": loadavg(), "notes": [], "failures": {},
           "backfills": [], "merges": [], "increments": [], "verifies": []}
    try:
        import pyiceberg
        doc["versions"]["pyiceberg"] = pyiceberg.__version__
    except ImportError:
        pass
    (BUILD / "bench").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="floe-memory-bench-", dir=BUILD / "bench"))
    spill_dir = work / "spill"
    spill_dir.mkdir()
    services: list[Service] = []
    try:
        with PgCluster(extra_conf=sb.SERVER_CONF) as pg:
            b = sb.Bench(pg, work)
            doc["versions"]["postgres"] = b.one("SELECT version()")

            # 1. The source tables and their services.
            mem = Service("mem", TABLE, ROWS, work, pg, spill_dir)
            services.append(mem)
            others = []
            for n in BACKFILLS:
                if n != ROWS:
                    others.append(Service(f"bf{n}", f"{TABLE}_bf{n}", n, work, pg, spill_dir))
            services.extend(others)
            for svc in services:
                log(f"loading {svc.rows:,} rows into {svc.table}")
                secs = load_table(b, svc.table, svc.rows)
                b.sql(f"CREATE PUBLICATION {svc.pub} FOR TABLE {svc.table}")
                doc.setdefault("load_seconds", {})[svc.table] = round(secs, 1)
            b.sql("CHECKPOINT")
            states = {svc.table: source_state(b, svc.table) for svc in services}
            doc["source_bytes"] = {svc.table: b.one(
                f"SELECT pg_table_size('{svc.table}')") for svc in services}
            for svc in services:
                svc.config(LIMIT)  # every pipeline file is checked before anything runs
            if UNSLICED_LIMIT:
                mem.config(UNSLICED_LIMIT)
            for lim in SMALL_LIMITS:
                mem.config(lim)

            # 2. The initial copies into Bronze.
            t0 = time.perf_counter()
            for svc in services:
                svc.start_run()
            copy = {}
            for svc in services:
                svc.wait_caught_up(b, svc.rows)
                copy[svc.table] = round(time.perf_counter() - t0, 1)
                if svc is not mem:
                    svc.stop_run()
                log(f"{svc.table}: Bronze holds its {svc.rows:,} rows "
                    f"({copy[svc.table]:.0f} s since floe run started)")
            doc["initial_copy_seconds"] = copy
            b0 = mem.bronze_location()
            base_records = mem.bronze_records()
            if base_records != ROWS:
                raise RuntimeError(f"Bronze of {TABLE} holds {base_records} rows after the "
                                   f"initial copy, expected {ROWS}")
            bronze_at = {0: b0}
            bronze_records = {0: base_records}
            expected = {0: states[TABLE]}

            # 3. The change stream, cut at every merge size.
            create_change_procedure(b)
            tx_done = 0
            for k, size in enumerate(MERGES, start=1):
                n_tx = max(1, round(size / TX_CHANGES)) - tx_done
                log(f"increment to {size:,} changes: transactions {tx_done} .. "
                    f"{tx_done + n_tx - 1}")
                t0 = time.perf_counter()
                if n_tx > 0:
                    b.sql("CALL mem_changes(%s, %s, %s, %s, %s)",
                          (tx_done, n_tx, TX_CHANGES, ROWS,
                           ((SEED * 7919 + k) % 10000) / 10000.0))
                gen = time.perf_counter() - t0
                tx_done += max(n_tx, 0)
                expected[k] = source_state(b, TABLE)
                catch = mem.wait_caught_up(b, 0)
                bronze_at[k] = mem.bronze_location()
                bronze_records[k] = mem.bronze_records()
                inc = {"target_changes": size, "transactions": tx_done,
                       "changes": bronze_records[k] - base_records,
                       "generate_seconds": round(gen, 1),
                       "catchup_seconds_after_generate": round(catch, 1),
                       "bronze_bytes": mem.bronze_bytes(bronze_at[k]),
                       "source_rows": expected[k]["rows"]}
                doc["increments"].append(inc)
                log(f"increment {k}: {inc}")
                save(doc, "silver_memory.partial.json")
            doc["floe_run_cpu_s"] = round(sb.proc_cpu_seconds(mem.proc.pid), 1)
            mem.stop_run()
            b.sql("CHECKPOINT")
            doc["setup_seconds"] = round(time.time() - t_start, 1)
            log(f"setup done in {doc['setup_seconds'] / 60:.1f} min; measuring")

            # 4. The measurements: nothing else of the benchmark runs from here on.
            duck = Duck()
            mem.cat.point(mem.bronze_ns, TABLE, b0)
            try:
                r = measure(mem, LIMIT, work, duck, expected[0])
                r.update(kind="backfill", rows=ROWS, table=TABLE)
                doc["backfills"].append(r)
                log(describe("backfill", ROWS, r))
            except Exception as e:  # no S0: no merges either
                doc["failures"][f"backfill {ROWS}"] = str(e)[-3000:]
                raise
            s0 = mem.cat.location(mem.silver_ns, TABLE)
            doc["start"] = {"silver_metadata": s0, "buckets": bucket_count(s0),
                            **table_state(s0)}
            save(doc, "silver_memory.partial.json")
            for svc in others:
                try:
                    r = measure(svc, LIMIT, work, duck, states[svc.table])
                    r.update(kind="backfill", rows=svc.rows, table=svc.table)
                    r["buckets"] = bucket_count(r["silver_metadata"])
                    doc["backfills"].append(r)
                    log(describe("backfill", svc.rows, r))
                except Exception as e:
                    log(f"backfill {svc.rows:,} failed: {e}")
                    doc["failures"][f"backfill {svc.rows}"] = str(e)[-3000:]
                save(doc, "silver_memory.partial.json")
            doc["backfills"][0]["buckets"] = doc["start"]["buckets"]
            for svc in others if VERIFY else []:
                # Nothing changed these tables since their copy: verify must agree.
                try:
                    r = run_measured(["verify", str(svc.config(LIMIT))], svc.silver_log,
                                     work / "launcher.json", svc.spill_dir, TIMEOUT)
                    r.pop("output")
                    r.update(rows=svc.rows, table=svc.table, limit=LIMIT,
                             limit_bytes=limit_bytes, consistent=True,
                             rss_over_limit=r["peak_rss_bytes"] / limit_bytes)
                    doc["verifies"].append(r)
                    log(f"verify {svc.rows:,}: {r['seconds']:.1f} s, CPU {r['cpu_s']:.1f} s, "
                        f"peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB "
                        f"({r['rss_over_limit']:.2f} of the limit), consistent")
                except Exception as e:
                    log(f"verify {svc.rows:,} failed: {e}")
                    doc["failures"][f"verify {svc.rows}"] = str(e)[-3000:]
                    doc["verifies"].append({"rows": svc.rows, "table": svc.table,
                                            "limit": LIMIT, "consistent": False})
                save(doc, "silver_memory.partial.json")

            rss_per_byte = None  # of the last unsliced run: predicts the next one
            for k, size in enumerate(MERGES, start=1):
                changes = bronze_records[k] - base_records

                def reset(k=k):
                    mem.cat.point(mem.silver_ns, TABLE, s0)
                    mem.cat.point(mem.bronze_ns, TABLE, bronze_at[k])
                plan = [("budget", LIMIT)]
                if UNSLICED_LIMIT:
                    plan.append(("unsliced", UNSLICED_LIMIT))
                if k == len(MERGES):
                    plan += [("small", lim) for lim in SMALL_LIMITS]
                inc_bytes = None
                for role, lim in plan:
                    if role == "unsliced" and inc_bytes:
                        need = inc_bytes * (rss_per_byte or 8)
                        avail = mem_available()
                        if need > 0.8 * avail:
                            note = (f"the unsliced merge of {changes:,} changes was skipped: "
                                    f"its predicted peak RSS ({need / 2**30:.1f} GiB) is over "
                                    f"80% of the memory available ({avail / 2**30:.1f} GiB)")
                            doc["notes"].append(note)
                            log(note)
                            continue
                    try:
                        r = measure(mem, lim, work, duck, expected[k], reset)
                    except Exception as e:
                        log(f"merge {size:,} at {lim} failed: {e}")
                        doc["failures"][f"merge {size} {role} {lim}"] = str(e)[-3000:]
                        continue
                    r.update(kind="merge", role=role, target_changes=size, changes=changes,
                             rows_before=doc["start"]["records"])
                    if r["log"].get("spilled_bytes"):
                        inc_bytes = r["log"]["spilled_bytes"]
                    if role == "unsliced" and inc_bytes and r["slices"] == 1:
                        rss_per_byte = r["peak_rss_bytes"] / inc_bytes
                    doc["merges"].append(r)
                    log(describe(f"merge ({role})", changes, r))
                    save(doc, "silver_memory.partial.json")
            b.conn.close()
    finally:
        for svc in services:
            svc.kill_run()
        shutil.rmtree(work, ignore_errors=True)
    doc["loadavg_end"] = loadavg()
    doc["total_seconds"] = round(time.time() - t_start, 1)
    text = json.dumps(doc, indent=1, default=str)
    save(doc, "silver_memory.json")
    (BUILD / "bench" / "results" / "silver_memory.partial.json").unlink(missing_ok=True)
    print(text)
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
