#!/usr/bin/env python3
"""Silver layout (issue 6): bucket pruning, merge-on-read vs copy-on-write.

Run alone (from the repository root; floe must be built in FLOE_BUILD_DIR):

    FLOE_BUILD_DIR=build/release .venv/bin/python bench/silver_layout_bench.py

It prints one JSON document on stdout (progress on stderr) and writes the same to
<build>/bench/results/silver_layout.json; bench/silver_layout_render.py turns it into
the Markdown section of BENCHMARKS.md (bench/run does both).

What it does, on a throwaway PostgreSQL 15 cluster (tests/integration/pgcluster.py,
the server settings of bench/stream_bench.py):

1. An orders table of BENCH_LAYOUT_ROWS rows (bench/stream_bench.py's row shape), a
   `floe run` with `snapshot: initial` (kept running all through step 2,
   `checkpoint.interval: 1s`) and a first `floe silver` pass build Bronze and the
   starting Silver table S0, with `silver.target_file_size: BENCH_LAYOUT_TARGET` so
   that the bucket count N is large (>= 128 at 10M rows with the default 1 MiB).
2. Increments, generated in Postgres and streamed into Bronze one after the other;
   after each, the Bronze table's metadata location (its snapshot holding exactly the
   increments so far) is kept:
   * three large increments of BENCH_LAYOUT_CHANGES changes each, whose keys hash
     (Iceberg bucket(N, order_id), computed with PyIceberg's BucketTransform) only
     into 1%, 10% and 100% of the N buckets: 60%+ updates of existing keys of those
     buckets (distinct within a transaction, several per key over the increment),
     25% inserts of new keys hashing there, up to 15% deletes of existing keys there
     (at most a third of the deletable keys of those buckets);
   * BENCH_LAYOUT_SMALL_MERGES small increments of BENCH_LAYOUT_SMALL_CHANGES changes
     each over random keys of the whole table (same mix).
   Each increment is a key list COPYed into an unpublished table, then applied by a
   procedure in transactions of 1000 changes (UPDATE ... FROM, DELETE ... USING,
   INSERT ... SELECT; COMMIT).
3. Bucket pruning: for each write mode (merge-on-read, copy-on-write), the catalog is
   pointed back at S0 and, in turn, at Bronze after the 1%, 10% and 100% increment;
   one `floe silver` pass each (so the three merges are cumulative: 1%, then 10%,
   then 100%). Each pass: wall, CPU (user+sys), peak RSS, the process's /proc io
   rchar / wchar, and the merge commit's snapshot summary (bytes read / written,
   files and row groups read, when floe writes them). Each result is checked with
   DuckDB (row count, sum of keys, sum of amounts) against the source after that
   increment. The full rewrite baseline: `floe compact --silver-only` on the
   merge-on-read table after the 100% merge, where every bucket holds deletes, so
   every bucket is read and rewritten.
4. Read cost: both modes start from that compacted table and apply the small
   increments one `floe silver` pass each; after the merges listed in
   BENCH_LAYOUT_SCAN_AFTER (1, 10, 50) a DuckDB full scan (`iceberg_scan`, position
   deletes applied: count(*) and the sum of hash() of every column), median of
   BENCH_LAYOUT_SCAN_RUNS; the merge-on-read table is then compacted and scanned
   again: the reference. Copy-on-write rewrites every file a change touches, and
   random changes touch every bucket, so each of its small merges rewrites about the
   whole table; BENCH_LAYOUT_COW_SMALL_MERGES (default: BENCH_LAYOUT_SMALL_MERGES, 10
   at 10M rows and more) caps how many it runs.

Environment: FLOE_BUILD_DIR (default build/release), BENCH_LAYOUT_ROWS (10000000),
BENCH_LAYOUT_CHANGES (1000000), BENCH_LAYOUT_TARGET (silver.target_file_size, 1MiB),
BENCH_LAYOUT_FRACTIONS (0.01,0.1,1), BENCH_LAYOUT_SMALL_CHANGES (20000),
BENCH_LAYOUT_SMALL_MERGES (50), BENCH_LAYOUT_COW_SMALL_MERGES, BENCH_LAYOUT_SCAN_AFTER
(1,10,50), BENCH_LAYOUT_SCAN_RUNS (3), BENCH_LAYOUT_MODES (merge-on-read,copy-on-write),
BENCH_LAYOUT_SEED (6).
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
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

BUILD = Path(os.environ.get("FLOE_BUILD_DIR", ROOT / "build" / "release")).resolve()
FLOE = BUILD / "src" / "floe" / "cli" / "floe"

ROWS = int(os.environ.get("BENCH_LAYOUT_ROWS", "10000000"))
CHANGES = int(os.environ.get("BENCH_LAYOUT_CHANGES", "1000000"))
TARGET = os.environ.get("BENCH_LAYOUT_TARGET", "1MiB")
FRACTIONS = [float(x) for x in os.environ.get("BENCH_LAYOUT_FRACTIONS", "0.01,0.1,1").split(",")]
SMALL_CHANGES = int(os.environ.get("BENCH_LAYOUT_SMALL_CHANGES", "20000"))
SMALL_MERGES = int(os.environ.get("BENCH_LAYOUT_SMALL_MERGES", "50"))
COW_SMALL_MERGES = int(os.environ.get("BENCH_LAYOUT_COW_SMALL_MERGES",
                                      str(min(SMALL_MERGES, 10) if ROWS >= 10_000_000
                                          else SMALL_MERGES)))
SCAN_AFTER = sorted({int(x) for x in
                     os.environ.get("BENCH_LAYOUT_SCAN_AFTER", "1,10,50").split(",")})
SCAN_RUNS = int(os.environ.get("BENCH_LAYOUT_SCAN_RUNS", "3"))
MODES = os.environ.get("BENCH_LAYOUT_MODES", "merge-on-read,copy-on-write").split(",")
SEED = int(os.environ.get("BENCH_LAYOUT_SEED", "6"))
PER_TX = 1000
TABLE = "layout_orders"
SILVER_NS = "silver.bench.public"
BRONZE_NS = "bronze.bench.public"
SLOT, PUB = "playout", "pub_layout"

# The floe.merge.* counters of a Silver merge commit's snapshot summary.
MERGE_COUNTERS = ["floe.merge.silver-bytes-read", "floe.merge.bronze-bytes-read",
                  "floe.merge.bytes-written", "floe.merge.files-read",
                  "floe.merge.row-groups-read", "floe.merge.row-groups-skipped-stats",
                  "floe.merge.row-groups-skipped-bloom"]
SUMMARY_KEYS = MERGE_COUNTERS + [
    "operation", "added-data-files", "deleted-data-files", "added-delete-files",
    "removed-delete-files", "added-position-delete-files", "added-position-deletes",
    "added-files-size", "removed-files-size", "added-records", "deleted-records",
    "total-records", "total-files-size", "total-data-files", "total-delete-files",
    "total-position-deletes"]


def log(msg: str) -> None:
    print(f"silver_layout_bench: {msg}", file=sys.stderr, flush=True)


loadavg = pb.loadavg


# -- the catalog ------------------------------------------------------------------------


class Catalog:
    """The pipeline's SQLite catalog (Iceberg SQL catalog layout): reads a table's
    metadata location, and points a table back at an earlier metadata file of its own
    to reset it to that state (the files it reaches are all still there)."""

    def __init__(self, warehouse: Path):
        self.db = warehouse / "catalog.db"

    def location(self, ns: str) -> str:
        con = sqlite3.connect(self.db, timeout=10)
        try:
            row = con.execute("SELECT metadata_location FROM iceberg_tables WHERE "
                              "table_namespace = ? AND table_name = ?",
                              (ns, TABLE)).fetchone()
        finally:
            con.close()
        if not row or not row[0]:
            raise RuntimeError(f"no table {ns}.{TABLE} in {self.db}")
        return row[0]

    def point(self, ns: str, location: str) -> None:
        con = sqlite3.connect(self.db, timeout=10)
        try:
            con.execute("UPDATE iceberg_tables SET metadata_location = ?, "
                        "previous_metadata_location = NULL WHERE table_namespace = ? "
                        "AND table_name = ?", (location, ns, TABLE))
            con.commit()
        finally:
            con.close()


def metadata(location: str) -> dict:
    return json.loads(Path(location.removeprefix("file://")).read_text())


def current_summary(location: str) -> dict:
    meta = metadata(location)
    cur = meta.get("current-snapshot-id")
    for snap in meta.get("snapshots", []):
        if snap["snapshot-id"] == cur:
            return snap.get("summary", {})
    return {}


def bucket_count(location: str) -> int:
    meta = metadata(location)
    spec_id = meta.get("default-spec-id", 0)
    spec = next(s for s in meta["partition-specs"] if s["spec-id"] == spec_id)
    for field in spec["fields"]:
        m = re.fullmatch(r"bucket\[(\d+)\]", field["transform"])
        if m:
            return int(m.group(1))
    return 1


def table_state(location: str) -> dict:
    s = current_summary(location)

    def num(k):
        return int(s[k]) if k in s else None
    return {"bytes": num("total-files-size"), "records": num("total-records"),
            "data_files": num("total-data-files"), "delete_files": num("total-delete-files"),
            "position_deletes": num("total-position-deletes")}


# -- running floe -------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def run_floe(args: list[str], log_path: Path, timeout: float = 7200) -> dict:
    """`floe ARGS` under `sh -c`, which prints its own /proc io after floe exits: a
    reaped child's I/O counts are added to its parent's, so they are floe's (plus a
    shell's few bytes). CPU (user+sys) from wait4 on the shell, which includes floe's;
    peak RSS is floe's VmHWM, sampled while it runs."""
    script = 'log=$1; shift; "$@" >>"$log" 2>&1; rc=$?; cat /proc/$$/io; exit $rc'
    load0 = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.Popen(["sh", "-c", script, "sh", str(log_path), str(FLOE), *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    hwm = 0
    while True:
        for c in children(proc.pid):
            try:
                hwm = max(hwm, sb.proc_hwm_kb(c))
            except (OSError, ValueError):
                pass
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"floe {' '.join(args)} did not finish within {timeout}s")
        time.sleep(0.01)
    seconds = time.perf_counter() - t0
    out = proc.stdout.read().decode(errors="replace")
    proc.stdout.close()
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        raise RuntimeError(f"floe {' '.join(args)} exited {rc}:\n"
                           + log_path.read_text(errors="replace")[-4000:])
    io = {}
    for line in out.splitlines():
        k, _, v = line.partition(":")
        if v.strip().isdigit():
            io[k.strip()] = int(v)
    return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": hwm / 1024, "rchar": io.get("rchar"), "wchar": io.get("wchar"),
            "read_bytes": io.get("read_bytes"), "write_bytes": io.get("write_bytes"),
            "load_before": load0, "load_after": loadavg()}


def summary_fields(location: str) -> dict:
    s = current_summary(location)
    out = {}
    for k in SUMMARY_KEYS:
        if k in s:
            v = s[k]
            out[k] = int(v) if isinstance(v, str) and v.lstrip("-").isdigit() else v
    return out


# -- DuckDB ---------------------------------------------------------------------------------


class Duck:
    """DuckDB with its iceberg extension (the pip-installed duckdb-ext packages, no
    download), reading Silver straight from a metadata file."""

    def __init__(self):
        import duckdb
        import duckdb_ext
        self.con = duckdb.connect(config={
            "extension_directory": str(Path(list(duckdb_ext.__path__)[0]) / "extensions"),
            "autoinstall_known_extensions": False, "autoload_known_extensions": True})
        self.con.execute("LOAD iceberg")
        self.con.execute("SET TimeZone = 'UTC'")

    def check(self, location: str) -> dict:
        r = self.con.execute(
            "SELECT count(*), count(DISTINCT order_id), sum(order_id)::HUGEINT, "
            "sum(amount)::DECIMAL(38,2) FROM iceberg_scan(?)",
            [location.removeprefix("file://")]).fetchone()
        return {"rows": r[0], "keys": r[1], "key_sum": int(r[2] or 0),
                "amount_sum": str(r[3] or 0)}

    def scan(self, location: str, runs: int) -> dict:
        """A full scan: every column of every live row (position deletes applied)."""
        q = ("SELECT count(*), sum(hash(order_id, customer_id, status, amount, created_at, "
             "note, cdc_commit_lsn))::HUGEINT FROM iceberg_scan(?)")
        secs, cpus, res = [], [], None
        for _ in range(runs):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            res = self.con.execute(q, [location.removeprefix("file://")]).fetchone()
            secs.append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        return {"seconds": statistics.median(secs), "seconds_runs": [round(x, 3) for x in secs],
                "cpu_s": statistics.median(cpus), "rows": res[0], "checksum": str(res[1])}


# -- the workload ---------------------------------------------------------------------------


class Keys:
    """Chooses the keys of each increment by their Iceberg bucket. Keys 1..ROWS exist
    at the start; keys with k % 4 != 0 are only ever updated, keys with k % 4 == 0 only
    ever deleted (once), so every update and delete hits a live row and every change
    is exactly one Bronze row. New keys are taken upwards from ROWS + 1, keeping those
    that hash into the chosen buckets."""

    def __init__(self, rows: int, n: int, seed: int):
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyiceberg.transforms import BucketTransform
        from pyiceberg.types import LongType
        self.pa, self.pc = pa, pc
        self.n = n
        self.bucket_fn = BucketTransform(n).pyarrow_transform(LongType())
        # Cross-check PyIceberg's vectorised transform with its per-value one.
        one = BucketTransform(n).transform(LongType())
        probe = [1, 2, 3, 1000, 123456789, rows]
        if self.bucket_fn(pa.array(probe, pa.int64())).to_pylist() != [one(k) for k in probe]:
            raise RuntimeError("PyIceberg's bucket transforms disagree")
        self.keys = pa.array(range(1, rows + 1), pa.int64())
        self.buckets = self.bucket_fn(self.keys)
        self.upd_mask = pc.not_equal(pc.bit_wise_and(self.keys, 3), 0)
        self.deleted: set[int] = set()
        self.next_new = rows + 1
        self.rng = random.Random(seed)

    def choose_buckets(self, fraction: float) -> list[int]:
        k = max(1, min(self.n, round(fraction * self.n)))
        return sorted(self.rng.sample(range(self.n), k))

    def _in(self, buckets: list[int]):
        if len(buckets) == self.n:
            return None
        return self.pc.is_in(self.buckets, value_set=self.pa.array(buckets, self.pa.int32()))

    def plan(self, buckets: list[int], changes: int) -> tuple[list[tuple], dict]:
        pa, pc = self.pa, self.pc
        n_tx = max(1, changes // PER_TX)
        changes = n_tx * PER_TX
        sel = self._in(buckets)
        upd_mask = self.upd_mask if sel is None else pc.and_(self.upd_mask, sel)
        upd_pool = pc.filter(self.keys, upd_mask)
        del_mask = pc.invert(self.upd_mask) if sel is None else pc.and_(
            pc.invert(self.upd_mask), sel)
        del_pool = pc.filter(self.keys, del_mask)
        if sel is None:
            live = len(del_pool) - len(self.deleted)
        else:
            live = len(del_pool) - len(self.deleted.intersection(del_pool.to_pylist()))
        inserts = changes * 25 // 100
        deletes = min(changes * 15 // 100, live // 3)
        updates = changes - inserts - deletes
        if -(-updates // n_tx) > len(upd_pool):
            raise RuntimeError(f"{len(upd_pool)} updatable keys in {len(buckets)} buckets "
                               f"cannot take {-(-updates // n_tx)} distinct updates per "
                               "transaction: raise BENCH_LAYOUT_ROWS or lower the changes")
        dels: list[int] = []
        chosen: set[int] = set()
        while len(dels) < deletes:  # at least two thirds of the pool is still live
            k = del_pool[self.rng.randrange(len(del_pool))].as_py()
            if k not in self.deleted and k not in chosen:
                chosen.add(k)
                dels.append(k)
        self.deleted.update(dels)
        news = self._new_keys(buckets, inserts)
        rows = []

        def share(total, i):
            return total // n_tx + (1 if i < total % n_tx else 0)
        di = ni = 0
        for i in range(n_tx):
            u = share(updates, i)
            idx = self.rng.sample(range(len(upd_pool)), u)
            rows.extend((i, "u", k) for k in upd_pool.take(pa.array(idx)).to_pylist())
            d = share(deletes, i)
            rows.extend((i, "d", k) for k in dels[di:di + d])
            di += d
            c = share(inserts, i)
            rows.extend((i, "i", k) for k in news[ni:ni + c])
            ni += c
        touched = set(pc.unique(self.bucket_fn(pa.array([r[2] for r in rows],
                                                        pa.int64()))).to_pylist())
        if not touched <= set(buckets):
            raise RuntimeError("a planned key hashes outside the chosen buckets")
        return rows, {"transactions": n_tx, "changes": changes, "updates": updates,
                      "updated_keys": len({r[2] for r in rows if r[1] == "u"}),
                      "deletes": deletes, "inserts": inserts, "buckets": len(buckets),
                      "buckets_touched": len(touched)}

    def _new_keys(self, buckets: list[int], count: int) -> list[int]:
        pa, pc = self.pa, self.pc
        out: list[int] = []
        want = pa.array(buckets, pa.int32())
        while len(out) < count:
            step = max(100_000, (count - len(out)) * self.n // len(buckets) * 11 // 10)
            cand = pa.array(range(self.next_new, self.next_new + step), pa.int64())
            if len(buckets) == self.n:
                got = cand.to_pylist()
            else:
                got = pc.filter(cand, pc.is_in(self.bucket_fn(cand), value_set=want)).to_pylist()
            need = count - len(out)
            out.extend(got[:need])
            self.next_new = (got[need - 1] + 1) if len(got) >= need and need > 0 \
                else self.next_new + step
        return out


class Source:
    def __init__(self, b: pb.Peers):
        self.b = b
        b.sql(f"CREATE UNLOGGED TABLE layout_plan (tx int NOT NULL, op char(1) NOT NULL, "
              "k bigint NOT NULL)")
        row = sb.ORDERS_ROW
        b.sql(f"""CREATE PROCEDURE apply_plan(n_tx int) LANGUAGE plpgsql AS $$
          BEGIN
            FOR i IN 0..n_tx - 1 LOOP
              UPDATE {TABLE} o SET status = 'paid', amount = o.amount + 1,
                  note = 'updated ' || i
                FROM layout_plan p WHERE p.tx = i AND p.op = 'u' AND o.order_id = p.k;
              DELETE FROM {TABLE} o USING layout_plan p
                WHERE p.tx = i AND p.op = 'd' AND o.order_id = p.k;
              INSERT INTO {TABLE} SELECT {row}
                FROM (SELECT k AS g FROM layout_plan WHERE tx = i AND op = 'i') s;
              COMMIT;
            END LOOP;
          END $$""")

    def apply(self, rows: list[tuple], n_tx: int) -> float:
        b = self.b
        b.sql("TRUNCATE layout_plan")
        b.sql("DROP INDEX IF EXISTS layout_plan_tx")
        with b.conn.cursor() as cur:
            with cur.copy("COPY layout_plan (tx, op, k) FROM STDIN") as cp:
                for i in range(0, len(rows), 100_000):
                    cp.write("".join(f"{t}\t{o}\t{k}\n" for t, o, k in rows[i:i + 100_000]))
        b.sql("CREATE INDEX layout_plan_tx ON layout_plan (tx, op)")
        b.sql("ANALYZE layout_plan")
        t0 = time.perf_counter()
        b.sql("CALL apply_plan(%s)", (n_tx,))
        return time.perf_counter() - t0

    def state(self) -> dict:
        r = self.b.sql(f"SELECT count(*), sum(order_id), sum(amount) FROM {TABLE}")[0]
        return {"rows": r[0], "key_sum": int(r[1]), "amount_sum": f"{r[2]:.2f}"}


def agrees(check: dict, state: dict) -> bool:
    return (check["rows"] == check["keys"] == state["rows"]
            and check["key_sum"] == state["key_sum"]
            and check["amount_sum"] == state["amount_sum"])


# -- floe run, kept running while the increments arrive --------------------------------------


class Runner:
    def __init__(self, base: Path, config: Path, cat: Catalog):
        self.base, self.cat = base, cat
        self.log_path = base / "floe-run.log"
        self.log_file = open(self.log_path, "ab")
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen([str(FLOE), "run", str(config)], stdin=subprocess.DEVNULL,
                                     stdout=self.log_file, stderr=subprocess.STDOUT, cwd=base)

    def wait_rows(self, total: int, timeout: float = 7200) -> float:
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"floe run exited {self.proc.returncode}:\n"
                                   + self.log_path.read_text(errors="replace")[-4000:])
            have = pb.Peers.bronze_total(self.base / "warehouse", TABLE)
            if have >= total:
                if have != total:
                    raise RuntimeError(f"Bronze holds {have} rows, expected {total}")
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"Bronze did not reach {total} rows in {timeout}s")
            time.sleep(0.05)

    def cpu_s(self) -> float:
        return sb.proc_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(300)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
            if rc != 0:
                raise RuntimeError(f"floe run exited {rc} on SIGTERM:\n"
                                   + self.log_path.read_text(errors="replace")[-4000:])
        self.log_file.close()


def write_config(base: Path, pg: PgCluster, mode: str | None, target: str | None) -> Path:
    warehouse = base / "warehouse"
    warehouse.mkdir(parents=True, exist_ok=True)
    silver = ""
    if target or mode:
        silver = "silver:\n"
        if target:
            silver += f"  target_file_size: {target}\n"
        if mode:
            silver += f"  write_mode: {mode}\n"
    name = f"pipeline-{mode}.yaml" if mode else "pipeline.yaml"
    config = base / name
    config.write_text(
        "service: bench\n"
        "source:\n"
        f"  conninfo: \"{pg.dsn()}\"\n"
        f"  slot: {SLOT}\n"
        f"  publication: {PUB}\n"
        "  snapshot: initial\n"
        f"warehouse: {warehouse}\n"
        "checkpoint:\n"
        "  interval: 1s\n"
        "metrics:\n"
        "  listen: 127.0.0.1:0\n" + silver)
    return config


def floe_accepts(config: Path) -> tuple[bool, str]:
    p = subprocess.run([str(FLOE), "validate", str(config)], capture_output=True, text=True)
    return p.returncode == 0, (p.stdout + p.stderr).strip()[-600:]


# -- the benchmark ----------------------------------------------------------------------------


def check_mode(mode: str, summary: dict, notes: list[str]) -> None:
    """A copy-on-write merge writes no delete files; one that does means this floe
    accepted the setting without applying it, and the figures say so."""
    if mode == "copy-on-write" and summary.get("added-delete-files", 0):
        note = ("copy-on-write was configured but its merges wrote position delete files "
                "(this floe does not apply silver.write_mode yet): its rows are "
                "merge-on-read figures")
        if note not in notes:
            notes.append(note)
            log(note)


def pruning_part(cat: Catalog, duck: Duck, configs: dict, s0: str, bronze: list[str],
                 states: list[dict], base: Path, notes: list[str]) -> tuple[dict, str]:
    """The large increments merged into S0 in turn, per mode; then the full rewrite
    baseline. Returns the results and the compacted table's metadata location."""
    out = {"modes": {}}
    compacted = None
    for mode, config in configs.items():
        cat.point(SILVER_NS, s0)
        merges = []
        for k, bloc in enumerate(bronze):
            before = cat.location(SILVER_NS)
            st = table_state(before)
            cat.point(BRONZE_NS, bloc)
            log(f"pruning, {mode}: floe silver, increment {k + 1}/{len(bronze)}")
            r = run_floe(["silver", str(config)], base / f"silver-{mode}.log")
            after = cat.location(SILVER_NS)
            if after == before:
                raise RuntimeError(f"floe silver committed nothing for increment {k + 1}")
            r["summary"] = summary_fields(after)
            r["table_before"] = st
            r["table_after"] = table_state(after)
            r["check"] = duck.check(after)
            r["equal_to_source"] = agrees(r["check"], states[k])
            check_mode(mode, r["summary"], notes)
            merges.append(r)
            log(f"  {r['seconds']:.1f}s, CPU {r['cpu_s']:.1f}s, rchar {r['rchar']:,}, "
                f"summary {r['summary']}, equal to source {r['equal_to_source']}")
        out["modes"][mode] = merges
        if mode == "merge-on-read":
            before = cat.location(SILVER_NS)
            st = table_state(before)
            log("pruning: full rewrite baseline (floe compact --silver-only)")
            r = run_floe(["compact", str(config), "--silver-only"], base / "compact.log")
            compacted = cat.location(SILVER_NS)
            r["summary"] = summary_fields(compacted)
            r["table_before"] = st
            r["table_after"] = table_state(compacted)
            r["check"] = duck.check(compacted)
            r["equal_to_source"] = agrees(r["check"], states[-1])
            out["full_rewrite"] = r
            log(f"  {r['seconds']:.1f}s, CPU {r['cpu_s']:.1f}s, summary {r['summary']}")
    if compacted is None:
        raise RuntimeError("the pruning part needs merge-on-read (the full rewrite baseline)")
    return out, compacted


def read_cost_part(cat: Catalog, duck: Duck, configs: dict, start: str, bronze: list[str],
                   states: dict, base: Path, notes: list[str]) -> dict:
    out = {"modes": {}}
    for mode, config in configs.items():
        merges_n = len(bronze) if mode == "merge-on-read" else min(len(bronze),
                                                                   COW_SMALL_MERGES)
        cat.point(SILVER_NS, start)
        scans = [{"after_merges": 0, **duck.scan(start, SCAN_RUNS),
                  "table": table_state(start)}]
        merges = []
        for j in range(merges_n):
            cat.point(BRONZE_NS, bronze[j])
            r = run_floe(["silver", str(config)], base / f"silver-{mode}.log")
            loc = cat.location(SILVER_NS)
            r["summary"] = summary_fields(loc)
            check_mode(mode, r["summary"], notes)
            merges.append({k: r[k] for k in ("seconds", "cpu_s", "peak_rss_mb", "rchar",
                                             "wchar", "summary")})
            if j + 1 in SCAN_AFTER or j + 1 == merges_n:
                sc = duck.scan(loc, SCAN_RUNS)
                sc["after_merges"] = j + 1
                sc["table"] = table_state(loc)
                if j + 1 in states:
                    chk = duck.check(loc)
                    sc["equal_to_source"] = agrees(chk, states[j + 1])
                scans.append(sc)
                log(f"read cost, {mode}: after {j + 1} merges scan {sc['seconds']:.2f}s "
                    f"({sc['table']}); last merge {r['seconds']:.1f}s CPU {r['cpu_s']:.1f}s")
        res = {"merges": merges, "scans": scans}
        if mode == "merge-on-read":
            log("read cost: floe compact, then the reference scan")
            c = run_floe(["compact", str(config), "--silver-only"], base / "compact.log")
            loc = cat.location(SILVER_NS)
            c["summary"] = summary_fields(loc)
            res["compact"] = c
            sc = duck.scan(loc, SCAN_RUNS)
            sc["table"] = table_state(loc)
            if merges_n in states:
                sc["equal_to_source"] = agrees(duck.check(loc), states[merges_n])
            res["compacted_scan"] = sc
            out["compacted_scan"] = sc
        out["modes"][mode] = res
    ref = out.get("compacted_scan", {}).get("seconds")
    if ref:
        for res in out["modes"].values():
            for sc in res["scans"]:
                sc["ratio_to_compacted"] = sc["seconds"] / ref
    return out


def save_partial(doc: dict) -> None:
    """The figures so far, in silver_layout.partial.json beside the results (a run
    stopped part way keeps them; bench/run renders only silver_layout.json)."""
    results = BUILD / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "silver_layout.partial.json").write_text(
        json.dumps(doc, indent=1, default=str) + "\n")


def main() -> int:
    if not FLOE.exists():
        log(f"{FLOE} is missing (build floe in {BUILD})")
        return 1
    t_start = time.time()
    doc = {**pb.run_header(BUILD, FLOE),
           "settings": {"BENCH_LAYOUT_ROWS": ROWS, "BENCH_LAYOUT_CHANGES": CHANGES,
                        "BENCH_LAYOUT_TARGET": TARGET,
                        "BENCH_LAYOUT_FRACTIONS": ",".join(map(str, FRACTIONS)),
                        "BENCH_LAYOUT_SMALL_CHANGES": SMALL_CHANGES,
                        "BENCH_LAYOUT_SMALL_MERGES": SMALL_MERGES,
                        "BENCH_LAYOUT_COW_SMALL_MERGES": COW_SMALL_MERGES,
                        "BENCH_LAYOUT_SCAN_AFTER": ",".join(map(str, SCAN_AFTER)),
                        "BENCH_LAYOUT_SCAN_RUNS": SCAN_RUNS,
                        "BENCH_LAYOUT_MODES": ",".join(MODES), "BENCH_LAYOUT_SEED": SEED},
           "server_conf": {"shared_buffers": "128MB", "fsync": "off",
                           "full_page_writes": "off", **sb.SERVER_CONF},
           "loadavg_start": loadavg(), "notes": []}
    try:
        import pyiceberg
        doc["versions"]["pyiceberg"] = pyiceberg.__version__
    except ImportError:
        pass
    (BUILD / "bench").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="floe-layout-bench-", dir=BUILD / "bench"))
    base = work / "p"
    failures = {}
    try:
        with PgCluster(extra_conf=sb.SERVER_CONF) as pg:
            b = pb.Peers(pg, work, None)
            doc["versions"]["postgres"] = b.one("SELECT version()")
            # Which of the settings this floe knows (older builds reject unknown keys).
            target = TARGET
            ok, msg = floe_accepts(write_config(base, pg, None, target))
            if not ok:
                doc["notes"].append(f"silver.target_file_size not accepted by this floe "
                                    f"({msg.splitlines()[-1] if msg else ''}): default target")
                log(doc["notes"][-1])
                target = None
            configs = {}
            for mode in MODES:
                c = write_config(base, pg, mode, target)
                ok, msg = floe_accepts(c)
                if ok:
                    configs[mode] = c
                elif mode == "merge-on-read":  # the default: run it without the key
                    configs[mode] = write_config(base, pg, None, target)
                    doc["notes"].append("silver.write_mode not accepted by this floe: "
                                        "merge-on-read is its only mode")
                else:
                    doc["notes"].append(f"{mode}: not accepted by this floe "
                                        f"({msg.splitlines()[-1] if msg else ''}); skipped")
                log(doc["notes"][-1] if not ok else f"mode {mode}: {c.name}")
            doc["target_file_size"] = target
            doc["modes"] = list(configs)
            run_config = write_config(base, pg, None, target)
            cat = Catalog(base / "warehouse")

            log(f"loading {ROWS:,} rows")
            t0 = time.perf_counter()
            pb.load_orders(b, TABLE, ROWS)
            b.sql(f"CREATE PUBLICATION {PUB} FOR TABLE {TABLE}")
            src = Source(b)
            doc["load_seconds"] = time.perf_counter() - t0

            log("floe run (initial copy into Bronze)")
            runner = Runner(base, run_config, cat)
            try:
                doc["initial_copy"] = {"seconds": runner.wait_rows(ROWS),
                                       "cpu_s": runner.cpu_s()}
                log(f"initial copy {doc['initial_copy']['seconds']:.1f}s; floe silver "
                    "(backfill)")
                doc["backfill"] = run_floe(["silver", str(configs['merge-on-read'])],
                                           base / "silver-backfill.log")
                s0 = cat.location(SILVER_NS)
                n = bucket_count(s0)
                doc["buckets"] = n
                doc["start"] = table_state(s0)
                log(f"backfill {doc['backfill']['seconds']:.1f}s: N = {n}, {doc['start']}")
                keys = Keys(ROWS, n, SEED)
                total = ROWS
                large, large_states, inc_info = [], [], []
                for frac in FRACTIONS:
                    bk = keys.choose_buckets(frac)
                    rows, info = keys.plan(bk, CHANGES)
                    info["fraction"] = frac
                    gen = src.apply(rows, info["transactions"])
                    total += info["changes"]
                    catch = runner.wait_rows(total)
                    large.append(cat.location(BRONZE_NS))
                    large_states.append(src.state())
                    info["generate_seconds"] = gen
                    info["bronze_catchup_seconds"] = catch
                    inc_info.append(info)
                    log(f"increment {frac:.0%} of buckets: {info}")
                doc["increments"] = inc_info
                small, small_states = [], {}
                all_buckets = list(range(n))
                small_info = {"changes": 0, "generate_seconds": 0.0}
                for j in range(SMALL_MERGES):
                    rows, info = keys.plan(all_buckets, SMALL_CHANGES)
                    small_info["generate_seconds"] += src.apply(rows, info["transactions"])
                    small_info["changes"] += info["changes"]
                    small_info.setdefault("per_increment", info)
                    total += info["changes"]
                    runner.wait_rows(total)
                    small.append(cat.location(BRONZE_NS))
                    if j + 1 in SCAN_AFTER or j + 1 in (SMALL_MERGES, COW_SMALL_MERGES):
                        small_states[j + 1] = src.state()
                    if (j + 1) % 10 == 0:
                        log(f"small increments: {j + 1}/{SMALL_MERGES} in Bronze")
                doc["small_increments"] = small_info
                doc["floe_run_cpu_s"] = runner.cpu_s()
            finally:
                runner.stop()
            doc["bronze_rows"] = total
            doc["setup_seconds"] = round(time.time() - t_start, 1)
            save_partial(doc)
            duck = Duck()
            t0 = time.time()
            try:
                doc["pruning"], compacted = pruning_part(cat, duck, configs, s0, large,
                                                         large_states, base, doc["notes"])
            except Exception as e:
                log(f"pruning failed: {e}")
                failures["pruning"] = str(e)[-3000:]
                compacted = None
            doc["pruning_seconds"] = round(time.time() - t0, 1)
            save_partial(doc)
            if compacted and SMALL_MERGES:
                t0 = time.time()
                try:
                    doc["read_cost"] = read_cost_part(cat, duck, configs, compacted, small,
                                                      small_states, base, doc["notes"])
                except Exception as e:
                    log(f"read cost failed: {e}")
                    failures["read_cost"] = str(e)[-3000:]
                doc["read_cost_seconds"] = round(time.time() - t0, 1)
            b.conn.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["failures"] = failures
    doc["loadavg_end"] = loadavg()
    doc["total_seconds"] = round(time.time() - t_start, 1)
    results = BUILD / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, default=str)
    (results / "silver_layout.json").write_text(text + "\n")
    (results / "silver_layout.partial.json").unlink(missing_ok=True)
    print(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
