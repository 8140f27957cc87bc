#!/usr/bin/env python3
"""Merge cost against history (issue 16, item 2): what a small `floe silver` merge costs
after 1, 10 and 50 merges since the last compaction, merge-on-read and copy-on-write.

Run alone (from the repository root; floe must be built in FLOE_BUILD_DIR):

    FLOE_BUILD_DIR=build/release .venv/bin/python bench/silver_history_bench.py

At the defaults it takes about 20 minutes on 2 cores (2026-12: 18 min, of which the
226 `floe silver` passes took 14; loading, the initial copies and streaming the
2 x 50 increments about 4).

It prints one JSON document on stdout (progress on stderr) and writes the same to
<build>/bench/results/silver_history.json; bench/silver_history_render.py turns it into
a Markdown section.

The goal (issue 16): "Merge cost after 1, 10 and 50 merges without compaction, same
run: within 1.5x of each other."

What it does, on one throwaway PostgreSQL 15 cluster (tests/integration/pgcluster.py,
the server settings of bench/stream_bench.py), for each workload of BENCH_HIST_WORKLOAD:

1. A source table of bench/silver_memory_bench.py's orders shape (order_id bigint
   primary key, about 100 bytes a row) of BENCH_HIST_ROWS rows, with a publication, a
   slot, a pipeline file and a warehouse of its own (silver_memory_bench.Service).
2. `floe run` (snapshot: initial, checkpoint.interval 1s) copies it into Bronze (B0),
   then BENCH_HIST_MERGES increments of BENCH_HIST_CHANGES changes each are generated
   server-side (the PL/pgSQL procedure hist_changes, transactions of
   BENCH_HIST_TX_CHANGES changes: 60% updates, 15% deletes, 25% inserts of new keys
   above the largest, so the table grows by a tenth of the changes); after each, once
   the slot's confirmed_flush_lsn has passed pg_current_wal_lsn(), Bronze's metadata
   location B_k is kept. Updates and deletes hit distinct live keys of one transaction
   (random keys drawn with replacement, three times as many as needed, joined with
   the table, the first live ones kept):
   * `random`: keys drawn uniformly from the whole key range;
   * `recent` (an orders table: the newest orders change): 90% of them among the
     newest 5% of BENCH_HIST_ROWS keys below the current largest key, 10% anywhere.
   Then `floe run` stops: only one floe process ever runs at a time.
3. The backfill: one `floe silver` pass over Bronze at B0 builds the starting Silver
   table S0 with `silver.target_file_size: BENCH_HIST_TARGET` (default 1MiB, the
   smallest floe accepts: N, the bucket count, is the smallest power of two with the
   estimated table bytes / N <= the target: 64 at 2M rows, each backfilled file
   about 1.2 MiB; 64-256 buckets is the range the issue's figures are about).
4. For each mode of BENCH_HIST_MODES the catalog's Silver entry is pointed back at S0,
   and for k = 1 .. BENCH_HIST_MERGES the Bronze entry is pointed at B_k and one `floe
   silver` pass merges increment k (no compaction in between). Each pass is measured
   by silver_memory_bench.run_measured (a fresh small interpreter forks and execs floe
   and reports wait4's wall time, CPU user + system and peak RSS). The merges listed in
   BENCH_HIST_POINTS (1, 10, 50) are run BENCH_HIST_RUNS times (the Silver entry is
   pointed back at the table before merge k each time; median wall and CPU) since
   they are the figures of the goal. Every merge keeps its log line figures, its
   commit's snapshot summary (floe.merge.* counters, added / deleted files) and the
   Silver table's live data-file and delete-file counts after it.
5. After the merges in BENCH_HIST_CHECK_AFTER (default: the points and the last) the
   Silver table is checked with DuckDB (iceberg_scan, position deletes applied) against
   the source as of that increment: row count, distinct keys, and silver_memory_bench's
   checksum of every column (computed alike by PostgreSQL and DuckDB).

With BENCH_HIST_KEEP=1 the working directory (warehouses, logs) is kept and its path
logged: every merge's Silver metadata before and after and its Bronze location are in
the JSON, so a merge can be re-run by hand (point iceberg_tables.metadata_location of
the Silver and Bronze tables back, as this script does) under perf.

Environment: FLOE_BUILD_DIR (default build/release), BENCH_HIST_ROWS (2000000),
BENCH_HIST_MERGES (50), BENCH_HIST_CHANGES (20000), BENCH_HIST_TX_CHANGES (1000),
BENCH_HIST_WORKLOAD (random,recent), BENCH_HIST_MODES (merge-on-read,copy-on-write),
BENCH_HIST_TARGET (1MiB), BENCH_HIST_POINTS (1,10,50), BENCH_HIST_RUNS (3),
BENCH_HIST_CHECK_AFTER (the points and the last merge), BENCH_HIST_SEED (16),
BENCH_HIST_TIMEOUT (3600 s per floe silver run), BENCH_HIST_KEEP (0).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "bench"))
from pgcluster import PgCluster  # noqa: E402

import peers_bench as pb  # noqa: E402  (read-only helpers)
import silver_memory_bench as smb  # noqa: E402
import stream_bench as sb  # noqa: E402
from silver_layout_bench import current_summary, table_state  # noqa: E402

BUILD, FLOE = smb.BUILD, smb.FLOE


def _ints(name: str, default: str) -> list[int]:
    text = os.environ.get(name, default).strip()
    return sorted({int(x) for x in text.split(",") if x.strip()}) if text else []


ROWS = int(os.environ.get("BENCH_HIST_ROWS", "2000000"))
MERGES = int(os.environ.get("BENCH_HIST_MERGES", "50"))
CHANGES = int(os.environ.get("BENCH_HIST_CHANGES", "20000"))
TX_CHANGES = int(os.environ.get("BENCH_HIST_TX_CHANGES", "1000"))
WORKLOADS = [w.strip() for w in os.environ.get("BENCH_HIST_WORKLOAD", "random,recent")
             .split(",") if w.strip()]
MODES = [m.strip() for m in os.environ.get("BENCH_HIST_MODES", "merge-on-read,copy-on-write")
         .split(",") if m.strip()]
TARGET = os.environ.get("BENCH_HIST_TARGET", "1MiB").strip()
POINTS = [k for k in _ints("BENCH_HIST_POINTS", "1,10,50") if 1 <= k <= MERGES] or [1, MERGES]
RUNS = max(1, int(os.environ.get("BENCH_HIST_RUNS", "3")))
CHECK_AFTER = [k for k in _ints("BENCH_HIST_CHECK_AFTER",
                                ",".join(map(str, POINTS + [MERGES]))) if 1 <= k <= MERGES]
SEED = int(os.environ.get("BENCH_HIST_SEED", "16"))
TIMEOUT = float(os.environ.get("BENCH_HIST_TIMEOUT", "3600"))
KEEP = os.environ.get("BENCH_HIST_KEEP", "0") == "1"
TABLE = "orders"  # the source tables are orders_<workload>


def log(msg: str) -> None:
    print(f"silver_history_bench: {msg}", file=sys.stderr, flush=True)


class Service(smb.Service):
    """silver_memory_bench's service, with one pipeline file per write mode (the
    memory limit left at floe's default)."""

    def config(self, mode: str | None) -> Path:
        if mode is None or mode in self.configs:
            return super().config(None) if mode is None else self.configs[mode]
        path = self.base / f"pipeline-{mode}.yaml"
        path.write_text(super().config(None).read_text() + "silver:\n"
                        f"  target_file_size: {TARGET}\n  write_mode: {mode}\n")
        p = smb.subprocess.run([str(FLOE), "validate", str(path)], capture_output=True,
                               text=True)
        if p.returncode != 0:
            raise RuntimeError(f"floe validate {path} failed:\n{p.stdout}{p.stderr}")
        self.configs[mode] = path
        return path


def create_change_procedure(b: sb.Bench, table: str) -> None:
    """hist_changes(n_tx, per_tx, recent, hot): n_tx transactions of per_tx changes
    to `table` (60% updates, 15% deletes, 25% inserts above the largest key). The
    updated and deleted keys of a transaction are distinct live keys: random keys
    (with `recent`, 90% of them in the newest `hot` keys) joined with the table."""
    b.sql("CREATE UNLOGGED TABLE IF NOT EXISTS hist_pick (k bigint PRIMARY KEY, n int)")
    b.sql(f"""CREATE PROCEDURE hist_changes_{table}(n_tx int, per_tx int, recent bool,
                                                 hot bigint)
      LANGUAGE plpgsql AS $$
      DECLARE
        ni int := per_tx / 4;
        nd int := per_tx * 15 / 100;
        nu int := per_tx - per_tx / 4 - per_tx * 15 / 100;
        mx bigint;
      BEGIN
        FOR i IN 1 .. n_tx LOOP
          SELECT max(order_id) INTO mx FROM {table};
          DELETE FROM hist_pick;
          INSERT INTO hist_pick
            SELECT k, row_number() OVER () FROM (
              SELECT o.order_id AS k FROM (
                SELECT DISTINCT ON (k) k, r FROM (
                  SELECT CASE WHEN recent AND random() < 0.9
                              THEN mx - floor(random() * least(hot, mx))::bigint
                              ELSE 1 + floor(random() * mx)::bigint END AS k, random() AS r
                    FROM generate_series(1, 3 * (nu + nd))) s) c
                JOIN {table} o ON o.order_id = c.k
                ORDER BY c.r LIMIT nu + nd) live;
          UPDATE {table} o SET
              status = (ARRAY['paid','shipped','delivered','cancelled','returned'])
                       [1 + ((o.order_id + i) % 5)::int],
              amount = o.amount + 1,
              note = 'updated ' || md5(o.order_id::text || '/' || i::text || random()::text)
            FROM hist_pick p WHERE p.n <= nu AND o.order_id = p.k;
          DELETE FROM {table} o USING hist_pick p WHERE p.n > nu AND o.order_id = p.k;
          INSERT INTO {table} SELECT {smb.ROW_SQL} FROM generate_series(mx + 1, mx + ni) g;
          COMMIT;
        END LOOP;
      END $$""")


def summary_counters(location: str) -> dict:
    """The floe.merge.* counters and the file counts of the current snapshot."""
    s = current_summary(location)
    out = {}
    for k, v in s.items():
        if k.startswith("floe.merge.") or k in smb.SUMMARY_KEYS:
            out[k] = int(v) if isinstance(v, str) and v.lstrip("-").isdigit() else v
    return out


def save(doc: dict, name: str) -> None:
    results = BUILD / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / name).write_text(json.dumps(doc, indent=1, default=str) + "\n")


def setup_workload(b: sb.Bench, svc: Service, workload: str) -> dict:
    """The initial copy and the increments of one workload into Bronze (only this
    workload's `floe run` runs). Returns B0, the B_k and the source states."""
    out = {"bronze_at": {}, "expected": {}, "increments": []}
    svc.start_run()
    try:
        t0 = time.perf_counter()
        svc.wait_caught_up(b, ROWS)
        out["initial_copy_seconds"] = round(time.perf_counter() - t0, 1)
        out["bronze_at"][0] = svc.bronze_location()
        base = svc.bronze_records()
        if base != ROWS:
            raise RuntimeError(f"Bronze holds {base} rows after the initial copy, "
                               f"expected {ROWS}")
        log(f"{workload}: initial copy {out['initial_copy_seconds']} s")
        n_tx = max(1, round(CHANGES / TX_CHANGES))
        hot = max(1, ROWS // 20)
        prev = base
        b.sql("SELECT setseed(%s)", (((SEED * 7919 + len(workload)) % 10000) / 10000.0,))
        for k in range(1, MERGES + 1):
            t0 = time.perf_counter()
            b.sql(f"CALL hist_changes_{svc.table}(%s, %s, %s, %s)",
                  (n_tx, TX_CHANGES, workload == "recent", hot))
            gen = time.perf_counter() - t0
            if k in CHECK_AFTER:
                out["expected"][k] = smb.source_state(b, svc.table)
            catch = svc.wait_caught_up(b, 0)
            out["bronze_at"][k] = svc.bronze_location()
            rec = svc.bronze_records()
            out["increments"].append({"k": k, "changes": rec - prev,
                                      "generate_seconds": round(gen, 2),
                                      "catchup_seconds": round(catch, 2)})
            prev = rec
            if k % 10 == 0 or k == MERGES:
                log(f"{workload}: {k}/{MERGES} increments in Bronze (last: "
                    f"{out['increments'][-1]['changes']} changes, generated in {gen:.1f} s)")
        out["floe_run_cpu_s"] = round(sb.proc_cpu_seconds(svc.proc.pid), 1)
    finally:
        svc.stop_run()
    out["source_rows_final"] = b.one(f"SELECT count(*) FROM {svc.table}")
    return out


def run_once(svc: Service, mode: str, work: Path) -> dict:
    r = smb.run_measured(["silver", str(svc.config(mode))], svc.silver_log,
                         work / "launcher.json", work / "spill", TIMEOUT)
    out = r.pop("output")
    r["log"] = smb.parse_log(out, svc.silver_id)
    if not r["log"]:
        raise RuntimeError(f"floe silver wrote no merge line for {svc.silver_id}:\n"
                           + out[-3000:])
    r["log"].pop("line", None)
    return r


def merge_series(svc: Service, mode: str, setup: dict, s0: str, duck: smb.Duck,
                 work: Path, doc: dict) -> dict:
    cat, ns, table = svc.cat, svc.silver_ns, svc.table
    cat.point(ns, table, s0)
    merges = []
    for k in range(1, MERGES + 1):
        cat.point(svc.bronze_ns, table, setup["bronze_at"][k])
        before = cat.location(ns, table)
        runs = []
        for i in range(RUNS if k in POINTS else 1):
            if i:
                cat.point(ns, table, before)
            runs.append(run_once(svc, mode, work))
        after = cat.location(ns, table)
        if after == before:
            raise RuntimeError(f"{mode}: merge {k} committed nothing")
        m = {"k": k, "seconds": statistics.median(r["seconds"] for r in runs),
             "cpu_s": statistics.median(r["cpu_s"] for r in runs),
             "peak_rss_bytes": max(r["peak_rss_bytes"] for r in runs),
             "runs": [{x: round(r[x], 3) for x in ("seconds", "cpu_s", "user_s", "sys_s")}
                      for r in runs],
             "log": runs[-1]["log"], "summary": summary_counters(after),
             "table": table_state(after), "silver_before": before, "silver_after": after,
             "bronze": setup["bronze_at"][k]}
        if k in setup["expected"]:
            m["check"] = duck.check(after)
            m["equal_to_source"] = smb.agrees(m["check"], setup["expected"][k])
            if not m["equal_to_source"]:
                note = (f"{svc.name} {mode}: Silver after merge {k} differs from the source: "
                        f"{m['check']} vs {setup['expected'][k]}")
                doc["notes"].append(note)
                log("MISMATCH " + note)
        merges.append(m)
        if k in POINTS or k % 10 == 0:
            log(f"{svc.name} {mode} merge {k}: {m['seconds']:.2f} s, CPU {m['cpu_s']:.2f} s, "
                f"{m['table']['data_files']} data / {m['table']['delete_files']} delete files"
                + (f", equal to source {m['equal_to_source']}" if "check" in m else ""))
    first = merges[0]
    points = {}
    for k in POINTS:
        m = merges[k - 1]
        points[k] = {"seconds": m["seconds"], "cpu_s": m["cpu_s"],
                     "peak_rss_bytes": m["peak_rss_bytes"],
                     "cpu_ratio": m["cpu_s"] / first["cpu_s"],
                     "wall_ratio": m["seconds"] / first["seconds"],
                     "data_files": m["table"]["data_files"],
                     "delete_files": m["table"]["delete_files"],
                     "files_read": m["summary"].get("floe.merge.files-read"),
                     "equal_to_source": m.get("equal_to_source")}
    cpus = [points[k]["cpu_s"] for k in POINTS]
    walls = [points[k]["seconds"] for k in POINTS]
    return {"merges": merges, "points": points,
            "cpu_spread": max(cpus) / min(cpus), "wall_spread": max(walls) / min(walls),
            "goal_met": max(cpus) / min(cpus) <= 1.5}


def main() -> int:
    if not FLOE.exists():
        log(f"{FLOE} is missing (build floe in {BUILD})")
        return 1
    bad = [w for w in WORKLOADS if w not in ("random", "recent")]
    if bad or not WORKLOADS or not MODES or MERGES < 1:
        log(f"BENCH_HIST_WORKLOAD must list random and/or recent (not {bad}); "
            "BENCH_HIST_MODES and BENCH_HIST_MERGES must not be empty")
        return 1
    t_start = time.time()
    doc = {**pb.run_header(BUILD, FLOE),
           "settings": {"BENCH_HIST_ROWS": ROWS, "BENCH_HIST_MERGES": MERGES,
                        "BENCH_HIST_CHANGES": CHANGES, "BENCH_HIST_TX_CHANGES": TX_CHANGES,
                        "BENCH_HIST_WORKLOAD": ",".join(WORKLOADS),
                        "BENCH_HIST_MODES": ",".join(MODES), "BENCH_HIST_TARGET": TARGET,
                        "BENCH_HIST_POINTS": ",".join(map(str, POINTS)),
                        "BENCH_HIST_RUNS": RUNS,
                        "BENCH_HIST_CHECK_AFTER": ",".join(map(str, CHECK_AFTER)),
                        "BENCH_HIST_SEED": SEED},
           "explicit_env": {k: os.environ[k] for k in sorted(os.environ)
                            if k.startswith("BENCH_HIST_")},
           "server_conf": {"shared_buffers": "128MB", "fsync": "off",
                           "full_page_writes": "off", **sb.SERVER_CONF},
           "loadavg_start": pb.loadavg(), "notes": [], "failures": {}, "workloads": {}}
    (BUILD / "bench").mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="floe-history-bench-", dir=BUILD / "bench"))
    (work / "spill").mkdir()
    services: list[Service] = []
    try:
        with PgCluster(extra_conf=sb.SERVER_CONF) as pg:
            b = sb.Bench(pg, work)
            doc["versions"]["postgres"] = b.one("SELECT version()")
            for w in WORKLOADS:  # source table orders_<workload>, a service each
                services.append(Service(w, f"{TABLE}_{w}", ROWS, work, pg, work / "spill"))
            for svc in services:
                log(f"loading {ROWS:,} rows into {svc.table}")
                secs = smb.load_table(b, svc.table, ROWS)
                b.sql(f"CREATE PUBLICATION {svc.pub} FOR TABLE {svc.table}")
                create_change_procedure(b, svc.table)
                for mode in MODES:
                    svc.config(mode)
                doc["workloads"][svc.name] = {"table": svc.table, "load_seconds": round(secs, 1)}
            b.sql("CHECKPOINT")
            duck = smb.Duck()
            for svc in services:
                wd = doc["workloads"][svc.name]
                st = setup_workload(b, svc, svc.name)
                b.sql("CHECKPOINT")
                wd["increments"] = st["increments"]
                wd["initial_copy_seconds"] = st["initial_copy_seconds"]
                wd["floe_run_cpu_s"] = st.get("floe_run_cpu_s")
                wd["source_rows_final"] = st["source_rows_final"]
                wd["expected"] = st["expected"]
                save(doc, "silver_history.partial.json")
                svc.cat.point(svc.bronze_ns, svc.table, st["bronze_at"][0])
                log(f"{svc.name}: backfill")
                r = run_once(svc, MODES[0], work)
                s0 = svc.cat.location(svc.silver_ns, svc.table)
                r["table"] = table_state(s0)
                r["buckets"] = smb.bucket_count(s0)
                r["silver_metadata"] = s0
                wd["backfill"] = r
                log(f"{svc.name}: backfill {r['seconds']:.1f} s, bucket({r['buckets']}), "
                    f"{r['table']}")
                wd["modes"] = {}
                for mode in MODES:
                    try:
                        wd["modes"][mode] = merge_series(svc, mode, st, s0, duck, work, doc)
                    except Exception as e:  # the other modes still run
                        log(f"{svc.name} {mode} failed: {e}")
                        doc["failures"][f"{svc.name} {mode}"] = str(e)[-3000:]
                    save(doc, "silver_history.partial.json")
            b.conn.close()
    finally:
        for svc in services:
            svc.kill_run()
        if KEEP:
            log(f"working directory kept: {work}")
            doc["work_dir"] = str(work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    doc["loadavg_end"] = pb.loadavg()
    doc["total_seconds"] = round(time.time() - t_start, 1)
    text = json.dumps(doc, indent=1, default=str)
    save(doc, "silver_history.json")
    (BUILD / "bench" / "results" / "silver_history.partial.json").unlink(missing_ok=True)
    print(text)
    mismatch = any(m.get("equal_to_source") is False
                   for wd in doc["workloads"].values()
                   for md in wd.get("modes", {}).values() for m in md["merges"])
    return 1 if doc["failures"] or mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
