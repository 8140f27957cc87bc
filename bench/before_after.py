#!/usr/bin/env python3
"""floe against an earlier floe on the same workload, in the same run: did a change
(a refactor, say) cost speed? Prints one JSON document on stdout, progress on stderr.

One throwaway PostgreSQL 15 cluster (tests/integration/pgcluster.py) and an
orders-like table (bench/stream_bench.py's). Every consumer has a logical slot of its
own, created before anything is written, so each drains the very same WAL:

1. BENCH_BA_ROWS inserts in BENCH_BA_TX_ROWS-row transactions. Each binary's
   `floe run` (snapshot: never) streams them into a Bronze of its own, timed until
   Bronze's `floe.commit-lsn` reaches the last commit (bench/stream_bench.py's
   measure); `pg_recvlogical` drains the same WAL for the physical limit.
2. Each binary's `floe silver` builds a Silver table from that Bronze (a backfill),
   timed, with its CPU and peak RSS.
3. BENCH_BA_CHANGES changes (70% updates, 20% deletes, 10% inserts, in
   BENCH_BA_TX_ROWS-row transactions); each `floe run` streams them, then each
   `floe silver` merges them into its Silver (timed).

BENCH_BA_RUNS rounds; the order of the two binaries alternates between rounds and
each figure is the median. Silver is checked against the source (row count and key
sum) after every merge.

The JSON also goes to <FLOE_BUILD_DIR>/bench/results/before_after.json, which
bench/run renders into BENCHMARKS.md (bench/before_after_render.py).

Environment: FLOE_BUILD_DIR (the floe under test; default build/release),
FLOE_BEFORE_BUILD_DIR (the earlier one; required), BENCH_BA_BEFORE / BENCH_BA_AFTER
(how BENCHMARKS.md names the two, e.g. their commits), BENCH_BA_ROWS (1000000),
BENCH_BA_CHANGES (500000), BENCH_BA_TX_ROWS (2000), BENCH_BA_RUNS (3).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import stream_bench as sb  # noqa: E402
from pgcluster import PgCluster  # noqa: E402

ROWS = int(os.environ.get("BENCH_BA_ROWS", "1000000"))
CHANGES = int(os.environ.get("BENCH_BA_CHANGES", "500000"))
TX_ROWS = int(os.environ.get("BENCH_BA_TX_ROWS", "2000"))
RUNS = int(os.environ.get("BENCH_BA_RUNS", "3"))
# The orders row, for statements with parameters (its `%` operators doubled).
ORDERS_ROW = sb.ORDERS_ROW.replace("%", "%%")


def binary(build_dir: str) -> Path:
    path = Path(build_dir).resolve() / "src" / "floe" / "cli" / "floe"
    if not path.exists():
        raise SystemExit(f"no floe binary at {path}")
    return path


def log(msg: str) -> None:
    print(f"[before_after] {msg}", file=sys.stderr, flush=True)


def run_child(args: list[str], cwd: Path, log_path: Path, timeout: float = 3600) -> dict:
    """Runs `args` to the end: its seconds, CPU seconds and peak RSS (its own, through
    wait4)."""
    with open(log_path, "ab") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{args[:2]} exited {proc.returncode}:\n"
                           + log_path.read_text()[-4000:])
    return {"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_kb": usage.ru_maxrss}


class Consumer:
    """One binary's Bronze and Silver for one round."""

    def __init__(self, b: sb.Bench, name: str, floe: Path, base: Path, slot: str):
        self.b, self.name, self.floe, self.base = b, name, floe, base
        self.base.mkdir(parents=True)
        self.config = b.floe_config(base, slot, "ba_pub")
        self.warehouse = base / "warehouse"
        self.log = base / "floe.log"

    def committed_records(self) -> int | None:
        """total-records of Bronze orders' current snapshot (None: none yet)."""
        summary = sb.Bench.current_summary(self.warehouse, "orders")
        return int(summary.get("total-records", 0)) if summary is not None else None

    def stream(self, records: int) -> dict:
        """floe run until Bronze holds `records` rows, then SIGTERM."""
        with open(self.log, "ab") as out:
            t0 = time.perf_counter()
            proc = subprocess.Popen([str(self.floe), "run", str(self.config)],
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.base)
            try:
                while (self.committed_records() or 0) < records:
                    if proc.poll() is not None:
                        raise RuntimeError(f"{self.name}: floe run exited "
                                           f"{proc.returncode}:\n"
                                           + self.log.read_text()[-4000:])
                    if time.perf_counter() - t0 > 3600:
                        raise RuntimeError("floe run did not catch up within an hour")
                    time.sleep(0.05)
                seconds = time.perf_counter() - t0
                cpu = sb.proc_cpu_seconds(proc.pid)
                hwm = sb.proc_hwm_kb(proc.pid)
                proc.send_signal(signal.SIGTERM)
                rc = proc.wait(120)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if rc != 0:
            raise RuntimeError(f"{self.name}: floe run exited {rc} on SIGTERM")
        held = self.committed_records()
        if held != records:
            raise RuntimeError(f"{self.name}: Bronze holds {held} rows, expected {records}")
        return {"seconds": seconds, "cpu_s": cpu, "peak_rss_kb": hwm}

    def silver(self) -> dict:
        return run_child([str(self.floe), "silver", str(self.config)], self.base, self.log)

    def silver_rows(self) -> tuple[int, int]:
        import duckdb
        from pyiceberg.catalog.sql import SqlCatalog

        cat = SqlCatalog("floe", uri=f"sqlite:///{self.warehouse / 'catalog.db'}",
                         warehouse=f"file://{self.warehouse}")
        table = cat.load_table(("silver", "bench", "public", "orders"))
        arrow = table.scan(selected_fields=("order_id",)).to_arrow()
        con = duckdb.connect()
        con.register("t", arrow)
        count, total = con.execute("SELECT count(*), coalesce(sum(order_id), 0) FROM t"
                                   ).fetchone()
        return int(count), int(total)


def generate_changes(b: sb.Bench, rows: int, changes: int) -> int:
    """About `changes` changes over orders 1..rows in TX_ROWS-row transactions: 70%
    updates, 20% deletes, 10% inserts of new keys. Returns how many rows they
    changed (each is one Bronze row: no update changes the key)."""
    done, made, next_key, lo = 0, 0, rows + 1, 1
    while done < changes:
        n = min(TX_ROWS, changes - done)
        upd, dele = n * 7 // 10, n * 2 // 10
        ins = n - upd - dele
        if lo + upd + dele > rows:
            lo = 1
        with b.conn.transaction():
            made += b.conn.execute(
                "UPDATE orders SET status = 'changed', amount = amount + 1 "
                "WHERE order_id BETWEEN %s AND %s", (lo, lo + upd - 1)).rowcount
            made += b.conn.execute("DELETE FROM orders WHERE order_id BETWEEN %s AND %s",
                                   (lo + upd, lo + upd + dele - 1)).rowcount
            made += b.conn.execute(
                f"INSERT INTO orders SELECT {ORDERS_ROW} FROM generate_series("
                "%s::bigint, %s::bigint) g", (next_key, next_key + ins - 1)).rowcount
        next_key += ins
        lo += upd + dele
        done += n
    return made


def median_of(results: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in results)


def main() -> int:
    before_dir = os.environ.get("FLOE_BEFORE_BUILD_DIR")
    if not before_dir:
        raise SystemExit("set FLOE_BEFORE_BUILD_DIR to the earlier floe's build dir")
    after_dir = os.environ.get("FLOE_BUILD_DIR", str(sb.ROOT / "build" / "release"))
    floes = {"before": binary(before_dir), "after": binary(after_dir)}
    work = Path(tempfile.mkdtemp(prefix="floe-before-after-"))
    load_start = Path("/proc/loadavg").read_text().split()[:3]
    with PgCluster(extra_conf=sb.SERVER_CONF) as pg:
        b = sb.Bench(pg, work)
        b.sql(f"CREATE TABLE orders {sb.ORDERS_COLUMNS}")
        b.sql("CREATE PUBLICATION ba_pub FOR TABLE orders")
        consumers: list[dict[str, Consumer]] = []
        for r in range(RUNS):
            b.create_slots([f"ba_before_{r}", f"ba_after_{r}", f"ba_recv_{r}"])
            consumers.append({name: Consumer(b, name, floe, work / f"{name}_{r}",
                                             f"ba_{name}_{r}")
                              for name, floe in floes.items()})
        log(f"phase 1: {ROWS} inserts in {TX_ROWS}-row transactions")
        for lo in range(1, ROWS + 1, TX_ROWS):
            b.sql(f"INSERT INTO orders SELECT {ORDERS_ROW} FROM generate_series("
                  "%s::bigint, %s::bigint) g", (lo, min(ROWS, lo + TX_ROWS - 1)))
        end1 = b.one("SELECT pg_current_wal_lsn()::text")
        b.checkpoint_and_settle()
        results = {name: {"stream": [], "backfill": [], "stream_changes": [], "merge": []}
                   for name in floes}
        recv = []
        for r in range(RUNS):
            order = list(floes) if r % 2 == 0 else list(reversed(floes))
            recv.append(b.pg_recvlogical(f"ba_recv_{r}", "ba_pub", 3, end1))
            for name in order:
                res = consumers[r][name].stream(ROWS)
                results[name]["stream"].append(res)
                log(f"round {r + 1}: {name} floe run {res['seconds']:.2f}s "
                    f"(pg_recvlogical {recv[-1]['seconds']:.2f}s)")
            for name in order:
                res = consumers[r][name].silver()
                results[name]["backfill"].append(res)
                log(f"round {r + 1}: {name} floe silver (backfill) {res['seconds']:.2f}s")
        log(f"phase 2: {CHANGES} changes")
        made = generate_changes(b, ROWS, CHANGES)
        expected = b.sql("SELECT count(*), coalesce(sum(order_id), 0) FROM orders")[0]
        b.checkpoint_and_settle()
        total_changes = ROWS + made
        for r in range(RUNS):
            order = list(floes) if r % 2 == 0 else list(reversed(floes))
            for name in order:
                res = consumers[r][name].stream(total_changes)
                results[name]["stream_changes"].append(res)
            for name in order:
                res = consumers[r][name].silver()
                got = consumers[r][name].silver_rows()
                if got != (int(expected[0]), int(expected[1])):
                    raise RuntimeError(f"{name} round {r + 1}: Silver holds {got} "
                                       f"(rows, key sum); the source {tuple(expected)}")
                results[name]["merge"].append(res)
                log(f"round {r + 1}: {name} floe silver (merge) {res['seconds']:.2f}s")
        summary = {}
        for step in ("stream", "backfill", "stream_changes", "merge"):
            row = {}
            for name in floes:
                row[name] = {"seconds": median_of(results[name][step], "seconds"),
                             "cpu_s": median_of(results[name][step], "cpu_s"),
                             "peak_rss_kb": median_of(results[name][step], "peak_rss_kb")}
            row["after_over_before"] = row["after"]["seconds"] / row["before"]["seconds"]
            summary[step] = row
        summary["pg_recvlogical_seconds"] = median_of(recv, "seconds")
        for name in floes:
            summary["stream"][name]["ratio_to_pg_recvlogical"] = (
                summary["pg_recvlogical_seconds"] / summary["stream"][name]["seconds"])
        out = {"command": " ".join(
                   [f"{k}={os.environ[k]}" for k in sorted(os.environ)
                    if k.startswith("BENCH_BA_") or k.endswith("BUILD_DIR")]
                   + [".venv/bin/python bench/before_after.py"]),
               "date": time.strftime("%Y-%m-%d", time.gmtime()),
               "before": os.environ.get("BENCH_BA_BEFORE", str(floes["before"])),
               "after": os.environ.get("BENCH_BA_AFTER", str(floes["after"])),
               "settings": {"BENCH_BA_ROWS": ROWS, "BENCH_BA_CHANGES": CHANGES,
                            "BENCH_BA_TX_ROWS": TX_ROWS, "BENCH_BA_RUNS": RUNS},
               "binaries": {k: str(v) for k, v in floes.items()},
               "load_start": load_start,
               "load_end": Path("/proc/loadavg").read_text().split()[:3],
               "summary": summary, "runs": results, "pg_recvlogical": recv}
        text = json.dumps(out, indent=2)
        results = Path(after_dir) / "bench" / "results"
        results.mkdir(parents=True, exist_ok=True)
        (results / "before_after.json").write_text(text + "\n")
        print(text)
        return 0


if __name__ == "__main__":
    sys.exit(main())
