"""The five-minute idle-source watch (issue: an idle database with `floe run`
attached keeps its slot's retained WAL small while another database on the same
server is busy).

Five minutes is too long to wait for in a test of its own, so the watch runs beside
the rest of the session: conftest.py starts it when the collected tests include
test_run_idle.py (right after collection), the other tests run meanwhile, and
test_run_idle.py, moved to the end of the run, waits for whatever is left of the
five minutes and checks the samples. It has its own PostgreSQL server, so nothing
the other tests do to theirs (restarts, slot games) touches it.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import psycopg

from floerun import FloeRun, lsn_int
from pgcluster import PgCluster

WATCH_SECONDS = 300


class _Database:
    """The bits of conftest's PgDatabase that FloeRun uses."""

    def __init__(self, cluster: PgCluster, name: str):
        self.cluster = cluster
        self.name = name

    @property
    def dsn(self) -> str:
        return self.cluster.dsn(self.name)

    def execute(self, sql: str, params=None) -> list[tuple]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []


class IdleWatch:
    def __init__(self, floe_bin: Path, base: Path):
        self.floe_bin = floe_bin
        self.base = base
        self.cluster: PgCluster | None = None
        self.run: FloeRun | None = None
        self.started_at: float | None = None
        self.error: BaseException | None = None
        self.samples: list[int] = []
        self.written = 0
        self.floe_died: str | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> "IdleWatch":
        try:
            self.cluster = PgCluster().start()
            with psycopg.connect(self.cluster.dsn(), autocommit=True) as admin:
                admin.execute('CREATE DATABASE "quiet"')
                admin.execute('CREATE DATABASE "busy"')
            quiet = _Database(self.cluster, "quiet")
            quiet.execute("CREATE TABLE public.quiet (id int PRIMARY KEY, v text)")
            quiet.execute("INSERT INTO quiet VALUES (1, 'one')")
            self.run = FloeRun(self.floe_bin, quiet, self.base / "floe")
            self.run.start().wait_streaming()
            self.run.wait_until(lambda: self.run.count("public.quiet") >= 1, 60,
                                what="the quiet table's copy")
        except BaseException as e:  # reported by the test, not at collection
            self.error = e
            return self
        self.started_at = time.monotonic()
        for target in (self._busy, self._sample):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _busy(self) -> None:
        """About 1 MB of WAL a second into the other database, for the whole watch
        (3.6 GB an hour). What an idle slot retains grows with the server's WAL rate:
        Postgres moves a logical slot's restart_lsn only at its running-transactions
        records, every 15 s, so the slot keeps some 15 to 40 s of the server's WAL
        (docs/running.md); at this rate that is well under the 64 MB bound."""
        try:
            with psycopg.connect(self.cluster.dsn("busy"), autocommit=True) as c:
                c.execute("CREATE TABLE noise (id bigserial, pad text)")
                start = lsn_int(c.execute("SELECT pg_current_wal_lsn()::text")
                                .fetchone()[0])
                while not self._stop.is_set():
                    c.execute("INSERT INTO noise (pad) SELECT repeat('x', 500) "
                              "FROM generate_series(1, 700)")
                    c.execute("DELETE FROM noise WHERE id < (SELECT max(id) - 5000 "
                              "FROM noise)")
                    now = lsn_int(c.execute("SELECT pg_current_wal_lsn()::text")
                                  .fetchone()[0])
                    self.written = now - start
                    self._stop.wait(0.4)
        except BaseException as e:
            self.error = self.error or e

    def _sample(self) -> None:
        """The slot's retained WAL (current WAL minus restart_lsn), every second."""
        try:
            with psycopg.connect(self.cluster.dsn(), autocommit=True) as c:
                while not self._stop.is_set():
                    if not self.run.running:
                        self.floe_died = self.run.log_tail()
                        return
                    row = c.execute(
                        "SELECT (pg_current_wal_lsn() - restart_lsn)::bigint FROM "
                        "pg_replication_slots WHERE slot_name = %s",
                        (self.run.slot,)).fetchone()
                    if row is None:
                        raise AssertionError(f"slot {self.run.slot} disappeared")
                    self.samples.append(int(row[0]))
                    self._stop.wait(1)
        except BaseException as e:
            self.error = self.error or e

    def elapsed(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    def finish(self) -> None:
        """Waits out the five minutes (unless something failed), then stops."""
        while (self.error is None and self.floe_died is None
               and self.elapsed() < WATCH_SECONDS):
            time.sleep(1)
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        if self.run is not None and self.run.running:
            self.run.stop()
        if self.cluster is not None:
            self.cluster.destroy()
            self.cluster = None


_watch: IdleWatch | None = None


def start(floe_bin: Path, base: Path) -> IdleWatch:
    global _watch
    if _watch is None:
        os.makedirs(base, exist_ok=True)
        _watch = IdleWatch(floe_bin, base).start()
    return _watch


def current() -> IdleWatch | None:
    return _watch


def shutdown() -> None:
    if _watch is not None:
        _watch.stop()
