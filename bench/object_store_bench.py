#!/usr/bin/env python3
"""Bronze on object storage behind a REST catalog against Bronze on local disk behind
the SQLite catalog (issue 17): the same backlog streamed by `floe run` into each, and
what a checkpoint costs in requests as the table's history grows.

    FLOE_BUILD_DIR=build/release .venv/bin/python bench/object_store_bench.py

About 5 minutes on 2 cores. Prints one JSON document (progress on stderr) and writes
it to <build>/bench/results/object_store.json; bench/object_store_render.py renders it.

What it does, on one throwaway PostgreSQL 15 (tests/integration/pgcluster.py), a moto
S3 server (s3server.py) and Apache Iceberg's REST catalog server over it
(restserver.py, behind restserver.CatalogFaultProxy, which counts requests):

1. Backlog, for each of `local` (a directory + SQLite catalog) and `s3+rest`: a
   pipeline (snapshot: never, checkpoint.interval 1s) is started once to create its
   slot and stopped; BENCH_OS_ROWS rows (id bigint, 100-byte text) are inserted in
   transactions of BENCH_OS_TX_ROWS; `floe run` starts again and the time until the
   slot's confirmed_flush_lsn passes the end of the backlog gives rows/s (floe's
   startup included, both sides alike). Checkpoint latencies are floe's own log lines
   ("committed ... in N ms"): p50 and p99.
2. Requests per checkpoint (`s3+rest`): with checkpoint.interval BENCH_OS_INTERVAL
   (default 500ms) and one single-row insert every quarter second, floe runs for
   BENCH_OS_SECONDS (default 120). Over two windows of 20 s, one early (seconds 5-25)
   and one late (the last 20 s), the requests moto logged (every S3 request, floe's and
   the catalog server's metadata writes alike: what the user pays for) and the REST
   requests the proxy counted are divided by the checkpoints floe logged in the window.
   The goal: a checkpoint of one table costs a handful of requests, independent of
   the table's history (the late window follows hundreds of commits).
3. Requests per Silver merge (`s3+rest`): `floe silver` backfills the Silver table
   from the Bronze table of parts 1 and 2, then BENCH_OS_MERGES (default 10) times:
   BENCH_OS_MERGE_CHANGES (default 20000) updates of random existing keys and a tenth
   as many inserts are streamed into Bronze by `floe run` (stopped once the slot
   confirms them), and `floe silver` merges them (merge-on-read, no compaction in
   between, so position deletes and small files gather). Each `floe silver` process
   is counted alone: the S3 requests moto logged while it ran (second resolution; the
   processes are a second apart) and the REST requests the proxy counted; and the
   bytes the merge read from Silver (its own log line).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import psycopg  # noqa: E402

from pgcluster import PgCluster  # noqa: E402
from restserver import CatalogFaultProxy, RestCatalogServer  # noqa: E402
from s3server import S3Server  # noqa: E402

BUILD = Path(os.environ.get("FLOE_BUILD_DIR", REPO / "build" / "release")).resolve()
FLOE = BUILD / "src" / "floe" / "cli" / "floe"
ROWS = int(os.environ.get("BENCH_OS_ROWS", "2000000"))
TX_ROWS = int(os.environ.get("BENCH_OS_TX_ROWS", "10000"))
INTERVAL = os.environ.get("BENCH_OS_INTERVAL", "500ms")
SECONDS = float(os.environ.get("BENCH_OS_SECONDS", "120"))
WINDOW = 20.0
MERGES = int(os.environ.get("BENCH_OS_MERGES", "10"))
MERGE_CHANGES = int(os.environ.get("BENCH_OS_MERGE_CHANGES", "20000"))
SILVER_READ_LINE = re.compile(r"(\d+) bytes read from Silver")
TOKEN = "bench-token"
MOTO_LINE = re.compile(r'\[(\d\d/\w+/\d{4} \d\d:\d\d:\d\d)\] "(?:\x1b\[[0-9;]*m)*([A-Z]+) ')
CHECKPOINT_LINE = re.compile(r"^(\S+Z) info  checkpoint: .* in (\d+) ms")


def log(msg: str) -> None:
    print(f"[object_store_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr,
          flush=True)


class Pipeline:
    def __init__(self, name: str, base: Path, pg: PgCluster, dsn: str, storage: str):
        self.name, self.base, self.pg, self.dsn = name, base / name, pg, dsn
        self.base.mkdir(parents=True)
        self.log_path = self.base / "floe.log"
        self.slot = f"bench_{name}"
        self.proc = None
        self.storage = storage

    def write_config(self, interval: str) -> Path:
        path = self.base / "pipeline.yaml"
        path.write_text(
            f"service: {self.name}\nsource:\n  conninfo: \"{self.dsn}\"\n"
            f"  slot: {self.slot}\n  publication: {{name: pub_{self.name}, create: tables, "
            f"tables: [public.t]}}\n  snapshot: never\n{self.storage}"
            f"checkpoint:\n  interval: {interval}\nmetrics:\n  listen: 127.0.0.1:0\n")
        return path

    def start(self, interval: str = "1s") -> None:
        config = self.write_config(interval)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(FLOE), "run", str(config)], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=self.base)

    def stop(self) -> None:
        self.proc.terminate()
        if self.proc.wait(120) != 0:
            raise RuntimeError(f"floe run {self.name} exited {self.proc.returncode}:\n"
                               + self.log_path.read_text(errors="replace")[-3000:])
        self._log.close()

    def wait_confirmed(self, con, target: str, timeout: float = 1800) -> float:
        t0 = time.perf_counter()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"floe run {self.name} exited:\n"
                                   + self.log_path.read_text(errors="replace")[-3000:])
            row = con.execute("SELECT confirmed_flush_lsn >= %s::pg_lsn FROM "
                              "pg_replication_slots WHERE slot_name = %s",
                              (target, self.slot)).fetchone()
            if row and row[0]:
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"{self.name} did not catch up in {timeout} s")
            time.sleep(0.1)

    def checkpoints(self, since: float | None = None,
                    until: float | None = None) -> list[tuple[float, int]]:
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            m = CHECKPOINT_LINE.match(line)
            if not m:
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                tzinfo=timezone.utc).timestamp()
            if (since is None or t >= since) and (until is None or t < until):
                out.append((t, int(m.group(2))))
        return out


def percentile(values: list[int], q: float) -> float:
    values = sorted(values)
    return float(values[min(len(values) - 1, int(q * len(values)))]) if values else 0.0


def moto_requests(log_path: Path, since: float, until: float) -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        m = MOTO_LINE.search(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%d/%b/%Y %H:%M:%S").timestamp()
        if since <= t < until:
            counts[m.group(2)] = counts.get(m.group(2), 0) + 1
    return counts


def silver_requests(p: Pipeline, proxy: CatalogFaultProxy, s3_log: Path) -> dict:
    """One `floe silver` of pipeline `p`, alone: its S3 requests (moto's log, whole
    seconds of its run) and REST requests."""
    time.sleep(1.1)  # nothing else in moto's log in the seconds it runs
    before = proxy.counts()
    t0 = time.time()
    proc = subprocess.run([str(FLOE), "silver", str(p.base / "pipeline.yaml")],
                          capture_output=True, text=True, cwd=p.base, timeout=1800)
    t1 = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"floe silver exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    time.sleep(1.1)  # let moto flush its log lines
    s3_counts = moto_requests(s3_log, float(int(t0)), float(int(t1) + 1))
    after = proxy.counts()
    rest_counts = {f"{m} {q}": after.get((m, q), 0) - before.get((m, q), 0)
                   for (m, q) in after if after.get((m, q), 0) > before.get((m, q), 0)}
    read = SILVER_READ_LINE.findall(proc.stdout + proc.stderr)
    return {"seconds": t1 - t0, "s3_requests": s3_counts,
            "s3_total": sum(s3_counts.values()), "rest_requests": rest_counts,
            "rest_total": sum(rest_counts.values()),
            "silver_bytes_read": sum(int(b) for b in read)}


def backlog(p: Pipeline, con) -> dict:
    p.start()
    while "streaming slot" not in p.log_path.read_text(errors="replace"):
        time.sleep(0.2)
    p.stop()
    con.execute("TRUNCATE t")
    for start in range(0, ROWS, TX_ROWS):
        con.execute("INSERT INTO t SELECT g, repeat(md5(g::text), 3) FROM "
                    "generate_series(%s::bigint, %s::bigint) g", (start + 1, min(ROWS, start + TX_ROWS)))
    target = con.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
    since = time.time()
    p.start()
    seconds = p.wait_confirmed(con, target)
    p.stop()
    latencies = [ms for _, ms in p.checkpoints(since=since)]
    return {"rows": ROWS, "seconds": seconds, "rows_per_s": ROWS / seconds,
            "checkpoints": len(latencies), "commit_p50_ms": percentile(latencies, 0.5),
            "commit_p99_ms": percentile(latencies, 0.99)}


def main() -> int:
    work = BUILD / "bench" / "object_store"
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    pg = PgCluster()
    pg.start()
    s3 = S3Server(work)
    s3.make_bucket("lake")
    rest = RestCatalogServer(work / "rest", s3, "s3://lake/bench", token=TOKEN)
    proxy = CatalogFaultProxy(rest.port)
    doc: dict = {"settings": {"rows": ROWS, "tx_rows": TX_ROWS, "interval": INTERVAL,
                              "seconds": SECONDS, "merges": MERGES,
                              "merge_changes": MERGE_CHANGES}}
    try:
        with psycopg.connect(pg.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE bench")
        dsn = pg.dsn("bench")
        con = psycopg.connect(dsn, autocommit=True)
        con.execute("CREATE TABLE t (id bigint PRIMARY KEY, v text)")
        local = Pipeline("local", work, pg, dsn, f"warehouse: {work / 'local' / 'wh'}\n")
        remote = Pipeline("s3rest", work, pg, dsn,
                          "warehouse: s3://lake/bench\ncatalog:\n  type: rest\n"
                          f"  uri: {proxy.uri}\n  token: {TOKEN}\n" + s3.floe_yaml())
        for p in (local, remote):
            log(f"backlog of {ROWS:,} rows into {p.name}")
            doc[f"backlog_{p.name}"] = backlog(p, con)
            log(json.dumps(doc[f"backlog_{p.name}"]))

        log(f"requests per checkpoint, {SECONDS:.0f} s at checkpoint.interval {INTERVAL}")
        remote.start(INTERVAL)
        while "streaming slot" not in remote.log_path.read_text(errors="replace")[-20000:]:
            time.sleep(0.2)
        t_start = time.time()
        marks: dict[str, tuple[float, dict]] = {}
        i = ROWS
        while time.time() - t_start < SECONDS:
            now = time.time() - t_start
            for name, at in (("early_start", 5.0), ("early_end", 5.0 + WINDOW),
                             ("late_start", SECONDS - WINDOW)):
                if name not in marks and now >= at:
                    marks[name] = (time.time(), proxy.counts())
            i += 1
            con.execute("INSERT INTO t VALUES (%s, 'x')", (i,))
            time.sleep(0.25)
        marks["late_end"] = (time.time(), proxy.counts())
        time.sleep(2)  # let moto flush its log lines of the window
        remote.stop()
        windows = []
        for name in ("early", "late"):
            (t0, c0), (t1, c1) = marks[f"{name}_start"], marks[f"{name}_end"]
            cps = remote.checkpoints(since=t0, until=t1)
            before = len(remote.checkpoints(until=t0))
            s3_counts = moto_requests(s3.log_path, t0, t1)
            rest_counts = {f"{m} {p}": c1.get((m, p), 0) - c0.get((m, p), 0)
                           for (m, p) in c1 if c1.get((m, p), 0) > c0.get((m, p), 0)}
            n = max(1, len(cps))
            windows.append({
                "window": name, "checkpoints": len(cps), "commits_before": before,
                "s3_requests": s3_counts,
                "s3_per_checkpoint": sum(s3_counts.values()) / n,
                "rest_requests": rest_counts,
                "rest_per_checkpoint": sum(rest_counts.values()) / n,
                "commit_p50_ms": percentile([ms for _, ms in cps], 0.5),
                "commit_p99_ms": percentile([ms for _, ms in cps], 0.99)})
            log(json.dumps(windows[-1]))
        doc["windows"] = windows

        log(f"requests per Silver merge: a backfill, then {MERGES} merges of "
            f"{MERGE_CHANGES:,} updates each")
        merges = [{"merge": 0, "changes": 0, **silver_requests(remote, proxy, s3.log_path)}]
        log(json.dumps(merges[-1]))
        top = con.execute("SELECT max(id) FROM t").fetchone()[0]
        for n in range(1, MERGES + 1):
            con.execute("UPDATE t SET v = v || 'u' WHERE id IN (SELECT 1 + "
                        "(random() * %s)::bigint FROM generate_series(1, %s))",
                        (top - 1, MERGE_CHANGES))
            con.execute("INSERT INTO t SELECT g, 'new' FROM generate_series(%s::bigint, "
                        "%s::bigint) g", (top + 1, top + MERGE_CHANGES // 10))
            top += MERGE_CHANGES // 10
            target = con.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
            remote.start(INTERVAL)
            remote.wait_confirmed(con, target)
            remote.stop()
            merges.append({"merge": n, "changes": MERGE_CHANGES + MERGE_CHANGES // 10,
                           **silver_requests(remote, proxy, s3.log_path)})
            log(json.dumps(merges[-1]))
        doc["merges"] = merges
        doc["versions"] = {"floe": subprocess.run([str(FLOE), "--version"],
                                                  capture_output=True,
                                                  text=True).stdout.strip().splitlines()[0]}
        doc["date"] = time.strftime("%Y-%m-%d")
        doc["machine"] = {"cores": os.cpu_count()}
        doc["git"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
    finally:
        proxy.close()
        rest.stop()
        s3.stop()
        pg.destroy()
    out = json.dumps(doc, indent=1)
    results = BUILD / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "object_store.json").write_text(out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
