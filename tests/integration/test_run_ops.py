"""Operating `floe run`: secrets never reach logs, errors or metrics; an idle source
database keeps its slot's retained WAL small while another database on the same
server is busy; a transaction of millions of rows streams with a bounded peak RSS.
Uses floerun.py."""

from __future__ import annotations

import threading
import time
import urllib.request

import psycopg

from floerun import floe  # noqa: F401

SECRET = "Sup3r-s3cret-pa55word"


class WithPassword:
    """The `pg` database, its conninfo carrying a password (the test cluster trusts
    local connections, so the password is accepted and ignored)."""

    def __init__(self, pg, port: int | None = None):
        self._pg = pg
        self.dsn = pg.dsn + f" password={SECRET}"
        if port is not None:
            self.dsn = self.dsn.replace(f"port={pg.cluster.port}", f"port={port}")

    def __getattr__(self, name):
        return getattr(self._pg, name)


def test_the_password_never_appears_in_logs_errors_or_metrics(floe_bin, pg):
    import subprocess

    pg.execute("CREATE TABLE public.s (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO s VALUES (1, 'a')")
    from floerun import FloeRun

    good = FloeRun(floe_bin, WithPassword(pg), run_dir(pg, "good"))
    try:
        good.start().wait_streaming()
        pg.execute("INSERT INTO s VALUES (2, 'b')")
        good.wait_until(lambda: good.count("public.s") >= 2, 60, what="row 2")
        with urllib.request.urlopen(good.metrics_url() + "/metrics", timeout=10) as r:
            assert SECRET not in r.read().decode()
        good.stop()
    finally:
        good.kill()
    assert SECRET not in good.log_text()
    assert "floe_pub" in good.log_text()  # the log is not empty

    # connection failures (nothing listens on that port) are logged and retried
    bad = FloeRun(floe_bin, WithPassword(pg, port=1), run_dir(pg, "bad"),
                  slot="floe_bad")
    try:
        bad.start("--duration", "3s")
        assert bad.wait_exit(30) == 0
    finally:
        bad.kill()
    log = bad.log_text()
    assert "reconnecting" in log, log
    assert SECRET not in log

    out = subprocess.run([str(floe_bin), "validate", "--print", str(good.config_path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert SECRET not in out.stdout + out.stderr and "<redacted>" in out.stdout


def run_dir(pg, name):
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix=f"floe-{name}-"))


def lsn_of(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def test_an_idle_source_keeps_retained_wal_small_while_another_database_is_busy(
        floe, pg, pg_cluster):
    pg.execute("CREATE TABLE public.quiet (id int PRIMARY KEY)")
    run = floe()
    run.start().wait_streaming()

    busy_db = f"{pg.name}_busy"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{busy_db}"')
    try:
        stop = threading.Event()
        written = {"bytes": 0}

        def busy():
            with psycopg.connect(pg_cluster.dsn(busy_db), autocommit=True) as c:
                c.execute("CREATE TABLE noise (id bigserial, pad text)")
                start = lsn_of(c.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0])
                while not stop.is_set():
                    c.execute("INSERT INTO noise (pad) SELECT repeat('x', 500) "
                              "FROM generate_series(1, 700)")
                    now = lsn_of(c.execute("SELECT pg_current_wal_lsn()::text")
                                 .fetchone()[0])
                    written["bytes"] = now - start
                    time.sleep(0.25)

        worker = threading.Thread(target=busy, daemon=True)
        worker.start()
        worst = 0
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                run.check_alive()
                rows = pg.execute(
                    "SELECT (pg_current_wal_lsn() - restart_lsn)::bigint FROM "
                    "pg_replication_slots WHERE slot_name = %s", (run.slot,))
                worst = max(worst, int(rows[0][0]))
                time.sleep(1)
        finally:
            stop.set()
            worker.join(30)
        # the other database wrote far more WAL than the bound; floe's slot kept
        # only a little of it
        assert written["bytes"] > 80 << 20, (written, worst)
        assert worst < 64 << 20, (worst, written)
    finally:
        run.stop()
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{busy_db}" WITH (FORCE)')


def peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_two_million_row_transaction_streams_with_bounded_memory(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE public.big (id bigint PRIMARY KEY, a bigint, s text, "
               "n numeric(12,2), ts timestamptz)")
    run = floe()
    run.start().wait_streaming()
    pg.execute("INSERT INTO big SELECT g, g * 7, 'status-' || (g % 13), g * 1.25, "
               "now() FROM generate_series(1, 2000000) g")
    run.wait_until(lambda: run.count("public.big") >= 2_000_000, 240,
                   what="2M rows in Bronze", interval=1)
    rss_kb = peak_rss_kb(run.proc.pid)
    run.stop()
    assert rss_kb < 512 * 1024, f"peak RSS {rss_kb} kB"
    got = duckdb_con.execute(
        "SELECT count(*), count(DISTINCT id), sum(a), min(cdc_seq), max(cdc_seq), "
        "count(DISTINCT cdc_source_tx_id) FROM iceberg_scan(?)",
        [run.metadata_path("public.big")]).fetchone()
    assert got == (2_000_000, 2_000_000, 7 * 2_000_000 * 2_000_001 // 2, 0, 1_999_999, 1)
