"""Drives `floe run` for the integration tests (not a test file).

`FloeRun` writes a pipeline YAML for a `pg` fixture database and a warehouse under
the test's tmp dir, starts `floe run` as a subprocess (stdout and stderr into a log
file that the `floe` fixture prints when a test fails), stops it gracefully (SIGTERM,
exit code 0 expected) or kills it (SIGKILL), and reads the Bronze tables it writes
with the two independent readers: PyIceberg's SqlCatalog and DuckDB's iceberg_scan
on the table's current metadata file. `rows()` reads both, insists they agree, and
returns the rows in the table's total order (cdc_commit_lsn, cdc_seq).

Bronze's visible state changes only at checkpoints, so tests wait with
`run.wait_until(predicate)` rather than sleeping.
"""

from __future__ import annotations

import collections
import itertools
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest

CDC_COLUMNS = ["cdc_op", "cdc_ts", "cdc_processed_at", "cdc_source_lsn",
               "cdc_source_tx_id", "cdc_commit_lsn", "cdc_seq", "cdc_unchanged"]


class FloeExited(AssertionError):
    pass


def wait_until(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.25,
               what: str = "condition", on_timeout: Callable[[], str] | None = None):
    """Polls `predicate` until it returns something truthy (returned) or `timeout`
    seconds pass (AssertionError naming `what`)."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except FloeExited:
            raise
        except Exception as e:  # a table that does not exist yet, a racing read, ...
            last_error = e
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout else ""
            if callable(what):
                what = what()
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}"
                + (f" (last error: {last_error!r})" if last_error else "") + extra)
        time.sleep(interval)


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


class FloeRun:
    """One pipeline: config file, warehouse, log, and the floe process (if any)."""

    _counter = itertools.count()

    def __init__(self, floe_bin: Path, pg, base: Path, *, service: str = "svc",
                 publication: str | dict | None = None, tables: list[str] | None = None,
                 snapshot: str = "initial", interval: str = "500ms",
                 slot: str | None = None, extra_yaml: str = "",
                 make_warehouse: bool = True, snapshot_workers: int | None = None,
                 warehouse_uri: str | None = None, catalog_props: dict | None = None,
                 catalog_yaml: str | None = None,
                 catalog_factory: Callable[[], Any] | None = None,
                 source_yaml: str = ""):
        self.floe_bin = Path(floe_bin).resolve()
        self.pg = pg
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.service = service
        self.warehouse = self.base / "warehouse"
        self.config_path = self.base / "pipeline.yaml"
        self.log_path = self.base / "floe.log"
        if make_warehouse:
            self.warehouse.mkdir()
        # An object-store warehouse (s3://...): the local directory keeps only the
        # SQLite catalog; `catalog_props` are PyIceberg's FileIO settings for it.
        self.warehouse_uri = warehouse_uri
        self.catalog_props = dict(catalog_props or {})
        # Another catalog than the local SQLite one (a REST catalog): its `catalog:`
        # section, and what opens it for the test's readers (PyIceberg).
        self.catalog_factory = catalog_factory
        self.slot = slot or f"floe_{service}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self._log = None
        self._catalog = None
        if publication is None:
            if tables:
                publication = {"name": "floe_pub", "create": "tables", "tables": tables}
            else:
                publication = {"name": "floe_pub", "create": "all_tables"}
        if isinstance(publication, str):
            pub_yaml = f"  publication: {publication}\n"
            self.publication = publication
        else:
            self.publication = publication["name"]
            pub_yaml = (f"  publication:\n"
                        f"    name: {publication['name']}\n"
                        f"    create: {publication['create']}\n")
            if publication.get("tables"):
                listed = ", ".join(f"'{t}'" for t in publication["tables"])
                pub_yaml += f"    tables: [{listed}]\n"
        conninfo = pg.dsn.replace('"', '\\"')
        self.config_path.write_text(
            f"service: {service}\n"
            f"source:\n"
            f"  conninfo: \"{conninfo}\"\n"
            f"  slot: {self.slot}\n"
            f"{pub_yaml}"
            f"  snapshot: {snapshot}\n"
            + source_yaml
            + (f"  snapshot_workers: {snapshot_workers}\n" if snapshot_workers else "")
            + (f"warehouse: {warehouse_uri}\n{catalog_yaml}" if catalog_yaml else
               f"warehouse: {warehouse_uri}\ncatalog:\n  path: {self.warehouse}/catalog.db\n"
               if warehouse_uri else f"warehouse: {self.warehouse}\n")
            + f"checkpoint:\n"
            f"  interval: {interval}\n"
            # a free port each: tests may run several floe processes at once
            + ("" if "metrics:" in extra_yaml else "metrics:\n  listen: 127.0.0.1:0\n")
            + f"{extra_yaml}")

    # -- process ----------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *args: str, env: dict[str, str] | None = None,
              preexec_fn=None) -> "FloeRun":
        """Starts `floe run`; `env` adds to the environment (FLOE_FAILPOINT, say);
        `preexec_fn` runs in the child before floe (to set a resource limit, say)."""
        assert not self.running, "floe is already running"
        self.starts += 1
        self._log = open(self.log_path, "ab", buffering=0)
        self._log.write(f"===== floe run start #{self.starts} {' '.join(args)} "
                        f"({time.strftime('%H:%M:%S')}) =====\n".encode())
        self.proc = subprocess.Popen(
            [str(self.floe_bin), "run", str(self.config_path), *args],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            cwd=self.base, env={**os.environ, **env} if env else None,
            preexec_fn=preexec_fn)
        return self

    def wait_streaming(self, timeout: float = 60) -> "FloeRun":
        """Waits until this start of floe streams from its slot (its "streaming slot"
        log line, written once the copies are done, and the slot active): every
        change made from now on reaches Bronze as a change (c/u/d/t), not as a
        snapshot row. (The slot alone is active already while floe creates it,
        before the copy.)"""
        def streaming():
            this_start = self.log_text().rsplit("===== floe run start", 1)[-1]
            if f"streaming slot {self.slot} of publication" not in this_start:
                return False
            rows = self.pg.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                (self.slot,))
            return bool(rows and rows[0][0])
        self.wait_until(streaming, timeout, what=f"floe streaming from slot {self.slot}")
        return self

    def _closed(self, rc: int, how: str) -> int:
        if self._log:
            self._log.write(f"===== floe exited {rc} ({how}, "
                            f"{time.strftime('%H:%M:%S')}) =====\n".encode())
            self._log.close()
            self._log = None
        return rc

    def stop(self, timeout: float = 60, expect_rc: int | None = 0) -> int:
        """SIGTERM and wait: floe takes a final checkpoint and exits 0."""
        assert self.proc is not None, "floe was not started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._closed(-9, "did not stop on SIGTERM, killed")
            raise AssertionError(
                f"floe did not exit within {timeout}s of SIGTERM\n{self.log_tail()}")
        self._closed(rc, "SIGTERM")
        if expect_rc is not None and rc != expect_rc:
            raise AssertionError(f"floe exited {rc} on SIGTERM, expected {expect_rc}\n"
                                 f"{self.log_tail()}")
        return rc

    def kill(self) -> None:
        """SIGKILL: no chance to checkpoint."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self._closed(-9, "SIGKILL")
        elif self.proc is not None:
            self._closed(self.proc.returncode, "had already exited")

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"floe still running after {timeout}s\n{self.log_tail()}")
        self._closed(rc, "exited by itself")
        return rc

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            rc = self.proc.returncode
            self._closed(rc, "exited unexpectedly")
            self.proc = None
            raise FloeExited(f"floe run exited on its own with code {rc}\n"
                             f"{self.log_tail()}")

    def metrics_url(self, timeout: float = 30) -> str:
        """The base URL of this run's /metrics endpoint (from its log line)."""
        import re

        def find():
            found = re.findall(r"serving /metrics, /healthz and /readyz on (\S+):(\d+)",
                               self.log_text())
            return found[-1] if found else None

        host, port = self.wait_until(find, timeout, what="the metrics endpoint log line")
        return f"http://{host}:{port}"

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_text().splitlines()
        return f"--- floe log {self.log_path} (last {lines} lines) ---\n" + \
            "\n".join(text[-lines:])

    def wait_until(self, predicate: Callable[[], Any], timeout: float = 60,
                   what: str = "condition", interval: float = 0.25,
                   require_running: bool = True):
        def check():
            if require_running:
                self.check_alive()
            return predicate()
        return wait_until(check, timeout, interval, what,
                          on_timeout=lambda: "\n" + self.log_tail())

    # -- catalog and readers ----------------------------------------------------

    def catalog(self):
        from pyiceberg.catalog.sql import SqlCatalog

        if self._catalog is None and self.catalog_factory is not None:
            self._catalog = self.catalog_factory()
        if self._catalog is None:
            db = self.warehouse / "catalog.db"
            if not db.exists():
                # Do not let PyIceberg create the catalog before floe does.
                raise FileNotFoundError(f"{db} does not exist (yet)")
            self._catalog = SqlCatalog(
                "floe", uri=f"sqlite:///{db}",
                warehouse=self.warehouse_uri or f"file://{self.warehouse}",
                **self.catalog_props)
        return self._catalog

    def ident(self, table: str) -> tuple[str, ...]:
        """'public.t' -> ('bronze', svc, 'public', 't'); 'pg_logical_messages' or
        'quarantine' -> ('bronze', svc, name)."""
        return ("bronze", self.service, *table.split("."))

    def load(self, table: str):
        return self.catalog().load_table(self.ident(table))

    def exists(self, table: str) -> bool:
        try:
            self.load(table)
            return True
        except Exception:
            return False

    def metadata_path(self, table: str) -> str:
        return self.load(table).metadata_location.removeprefix("file://")

    @staticmethod
    def _order(names) -> list[str]:
        """Bronze rows in (cdc_commit_lsn, cdc_seq) order; the audit table's (no
        cdc_seq) in WAL order of the messages, cdc_source_lsn."""
        if "cdc_commit_lsn" in names and "cdc_seq" in names:
            return ["cdc_commit_lsn", "cdc_seq"]
        if "cdc_source_lsn" in names:
            return ["cdc_source_lsn"]
        return []

    def arrow_pyiceberg(self, table: str):
        t = self.load(table).scan().to_arrow()
        order = self._order(t.column_names)
        if order:
            t = t.sort_by([(c, "ascending") for c in order])
        return t

    def arrow_duckdb(self, con, table: str):
        order = self._order([f.name for f in self.load(table).schema().fields])
        by = f" ORDER BY {', '.join(order)}" if order else ""
        return con.execute(f"SELECT * FROM iceberg_scan(?){by}",
                           [self.metadata_path(table)]).fetch_arrow_table()

    def rows_pyiceberg(self, table: str) -> list[dict]:
        return self.arrow_pyiceberg(table).to_pylist()

    def rows_duckdb(self, con, table: str) -> list[dict]:
        return self.arrow_duckdb(con, table).to_pylist()

    def rows(self, con, table: str) -> list[dict]:
        """The whole table read by PyIceberg AND DuckDB; fails unless they agree.
        Rows in (cdc_commit_lsn, cdc_seq) order."""
        py = self.rows_pyiceberg(table)
        dk = self.rows_duckdb(con, table)
        assert_same_rows(py, dk, f"{table}: PyIceberg vs DuckDB")
        return py

    def count(self, table: str) -> int:
        """Rows visible now (0 when the table does not exist yet), from the snapshot
        summary when it carries total-records, else by a PyIceberg scan."""
        if self.catalog_factory is None and not (self.warehouse / "catalog.db").exists():
            return 0
        try:
            t = self.load(table)
        except Exception:
            return 0
        snap = t.current_snapshot()
        if snap is None:
            return 0
        total = snap.summary.get("total-records") if snap.summary else None
        if total is not None:
            return int(total)
        return t.scan().to_arrow().num_rows

    def has_row(self, table: str, **equal) -> bool:
        """Whether a row with these column values is visible (PyIceberg, filtered
        scan); False while the table does not exist."""
        from pyiceberg.expressions import And, EqualTo

        try:
            t = self.load(table)
        except Exception:
            return False
        terms = [EqualTo(c, v) for c, v in equal.items()]
        expr = terms[0] if len(terms) == 1 else And(*terms)
        return t.scan(row_filter=expr).to_arrow().num_rows > 0

    def pyiceberg_count_where(self, table: str, predicate: Callable[[dict], bool]) -> int:
        try:
            return sum(1 for r in self.rows_pyiceberg(table) if predicate(r))
        except Exception:
            return 0

    def commit_lsns(self, table: str) -> list[int]:
        """floe.commit-lsn of every snapshot of the table, oldest first."""
        t = self.load(table)
        out = []
        for snap in t.snapshots():
            value = snap.summary.get("floe.commit-lsn") if snap.summary else None
            assert value is not None, f"{table}: snapshot {snap.snapshot_id} has no " \
                f"floe.commit-lsn in its summary: {snap.summary}"
            assert str(value).isdigit(), f"floe.commit-lsn {value!r} is not decimal"
            out.append(int(value))
        return out

    def check_commit_lsn(self, table: str, rows: list[dict]) -> None:
        """Every snapshot carries floe.commit-lsn, never decreasing, and the current
        one covers every row's commit LSN."""
        lsns = self.commit_lsns(table)
        assert lsns, f"{table} has no snapshots"
        assert lsns == sorted(lsns), f"{table}: floe.commit-lsn went backwards: {lsns}"
        if rows:
            assert lsns[-1] >= max(r["cdc_commit_lsn"] for r in rows), \
                (table, lsns[-1], max(r["cdc_commit_lsn"] for r in rows))

    # -- source side ------------------------------------------------------------

    def slot_confirmed_flush(self) -> int | None:
        rows = self.pg.execute(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
            "WHERE slot_name = %s", (self.slot,))
        if not rows or rows[0][0] is None:
            return None
        return lsn_int(rows[0][0])


def assert_same_rows(a: list[dict], b: list[dict], what: str) -> None:
    assert len(a) == len(b), f"{what}: {len(a)} rows vs {len(b)} rows"
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            keys = sorted(set(x) | set(y))
            diff = {k: (x.get(k, "<missing>"), y.get(k, "<missing>")) for k in keys
                    if x.get(k, "<missing>") != y.get(k, "<missing>")}
            raise AssertionError(f"{what}: row {i} differs: {diff}\nfirst: {x}\nsecond: {y}")


def compare_events(what: str, expected: list, got: list, show=lambda e: e) -> None:
    """Equal lists (an oracle's changes and Bronze's, in order), or an error saying
    how many are missing and how many extra (twice or invented), where they first
    differ, and examples; `show` shortens one for the message."""
    if got == expected:
        return
    missing = collections.Counter(expected) - collections.Counter(got)
    extra = collections.Counter(got) - collections.Counter(expected)
    first = next((i for i, (e, g) in enumerate(zip(expected, got)) if e != g),
                 min(len(expected), len(got)))
    raise AssertionError(
        f"{what}: {len(expected)} expected changes, {len(got)} in Bronze; "
        f"{sum(missing.values())} missing, {sum(extra.values())} extra (twice or "
        f"invented); first difference at {first}: expected "
        f"{show(expected[first]) if first < len(expected) else None}, got "
        f"{show(got[first]) if first < len(got) else None}; missing e.g. "
        f"{[show(e) for e in list(missing)[:3]]}; extra e.g. "
        f"{[show(e) for e in list(extra)[:3]]}")


def check_order(table: str, rows: list[dict]) -> None:
    """(cdc_commit_lsn, cdc_seq) is unique and non-null, and cdc_seq counts 0.. in
    each transaction of streamed rows. A copy of a table Bronze already held starts
    with a `t` row of no transaction (cdc_seq 0 at the copy's position); so does a
    new relation under the table's name (cdc_seq one before its first change)."""
    pairs = [(r["cdc_commit_lsn"], r["cdc_seq"]) for r in rows]
    assert all(c is not None and s is not None for c, s in pairs), table
    dupes = [p for p, n in collections.Counter(pairs).items() if n > 1]
    assert not dupes, f"{table}: (cdc_commit_lsn, cdc_seq) not unique: {sorted(dupes)[:10]}"
    pairs_set = set(pairs)
    for r in rows:
        assert r["cdc_op"] in ("c", "u", "d", "r", "t"), r
        assert r["cdc_ts"] is not None and r["cdc_processed_at"] is not None, r
        copy_marker = (r["cdc_op"] == "t" and r["cdc_seq"] == 0 and
                       r["cdc_source_tx_id"] is None and
                       r["cdc_source_lsn"] == r["cdc_commit_lsn"])
        # Where a name passed to another relation: of no transaction, right before
        # the new relation's first change (and at its cdc_source_lsn).
        relation_mark = (not copy_marker and r["cdc_op"] == "t" and
                         r["cdc_source_tx_id"] is None and
                         (r["cdc_commit_lsn"], r["cdc_seq"] + 1) in pairs_set)
        if relation_mark:
            assert r["cdc_source_lsn"] is not None and \
                r["cdc_source_lsn"] < r["cdc_commit_lsn"], r
        if r["cdc_op"] != "r" and not copy_marker and not relation_mark:
            assert r["cdc_source_lsn"] is not None and r["cdc_source_tx_id"] is not None, r
            assert r["cdc_source_lsn"] <= r["cdc_commit_lsn"], r


def events(rows: list[dict], *cols: str, ops: str = "cudrt") -> list[tuple]:
    return [(r["cdc_op"], *(r[c] for c in cols)) for r in rows if r["cdc_op"] in ops]


def fold(rows: list[dict], key: list[str]) -> dict[tuple, dict]:
    """Latest state per key as Silver must have it, the integration tests' one fold
    of Bronze's changes (the rules of src/floe/silver/fold.h): (cdc_commit_lsn,
    cdc_seq) order, d removes, t clears, a column in cdc_unchanged keeps the previous
    value, which for the new row of a key-changing update (d of the old key then a c
    lacking values, consecutive cdc_seq; an insert always carries every value) is the
    old key's."""
    state: dict[tuple, dict] = {}
    last_delete = None
    for r in sorted(rows, key=lambda r: (r["cdc_commit_lsn"], r["cdc_seq"])):
        op = r["cdc_op"]
        if op == "t":
            state.clear()
            last_delete = None
            continue
        k = tuple(r[c] for c in key)
        if op == "d":
            last_delete = (r["cdc_commit_lsn"], r["cdc_seq"], state.pop(k, {}))
            continue
        previous = state.get(k, {})
        if op == "c" and r.get("cdc_unchanged") and last_delete and k not in state and \
                last_delete[:2] == (r["cdc_commit_lsn"], r["cdc_seq"] - 1):
            previous = last_delete[2]
        values = {c: v for c, v in r.items() if not c.startswith("cdc_")}
        for c in r.get("cdc_unchanged") or []:
            values[c] = previous.get(c)
        state[k] = values
    return state


def duckdb_setup(con) -> None:
    con.execute("LOAD iceberg")
    con.execute("SET TimeZone = 'UTC'")


_run_counter = itertools.count()


@pytest.fixture
def floe(floe_bin, pg, tmp_path, duckdb_con, request):
    """Factory for FloeRun pipelines on this test's database; kills whatever is left
    running at the end and prints every floe log (shown by pytest on failure)."""
    duckdb_setup(duckdb_con)
    made: list[FloeRun] = []

    def make(**kwargs) -> FloeRun:
        run = FloeRun(floe_bin, pg, tmp_path / f"floe{next(_run_counter)}", **kwargs)
        made.append(run)
        return run

    yield make
    for run in made:
        run.kill()
    for run in made:
        print(run.log_tail(200))
