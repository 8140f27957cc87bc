"""Shared fixtures: a throwaway PostgreSQL cluster, a fresh database per test,
floe's built binaries, and the independent readers (DuckDB, pyarrow)."""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from pgcluster import PgCluster

REPO = Path(__file__).resolve().parents[2]


def _build_dir() -> Path:
    return Path(os.environ.get("FLOE_BUILD_DIR", REPO / "build" / "release"))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    d = _build_dir()
    if not (d / "src" / "floe" / "cli" / "floe").exists():
        pytest.fail(f"floe is not built in {d}; run `make build` (or set FLOE_BUILD_DIR)")
    return d


# test_run_idle.py checks a five-minute watch (idlewatch.py) that runs beside the
# other tests: started once collection is done, checked last. Under pytest-xdist
# (`make test` runs the suite on several workers, each collecting every test) the
# file goes first instead, and its test starts the watch and waits it out on its
# worker while the other workers run the rest.
_IDLE_TEST_FILE = "test_run_idle.py"


def _xdist_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


# Under pytest-xdist (`--dist loadfile --no-loadscope-reorder`) the files go to the
# workers in this order: the longest first (`--durations=0`, summed by file), so no
# long file starts last and keeps one worker busy while the others are done.
_LONGEST_FILES_FIRST = (
    "test_run_watermark.py", "test_divergences.py", "test_silver_memory.py",
    "test_source_faults.py", "test_stream_faults.py", "test_differential.py",
    "test_rest_catalog.py", "test_s3_warehouse.py", "test_source_shapes.py",
    "test_routing.py", "test_failpoints.py", "test_run_crash.py", "test_run.py",
)


def pytest_report_header(config):
    from pgcluster import pg_bindir
    try:
        return f"postgres: {pg_bindir()}"
    except RuntimeError as e:
        return f"postgres: {e}"


def pytest_collection_modifyitems(session, config, items):
    idle = [i for i in items if i.path.name == _IDLE_TEST_FILE]
    for item in idle:
        items.remove(item)
    if _xdist_worker():
        rank = {name: i for i, name in enumerate(_LONGEST_FILES_FIRST)}
        items.sort(key=lambda i: rank.get(i.path.name, len(rank)))  # stable
        items[:0] = idle
    else:
        items.extend(idle)


def pytest_collection_finish(session):
    floe_bin = _build_dir() / "src" / "floe" / "cli" / "floe"
    if _xdist_worker():
        return
    if floe_bin.exists() and any(i.path.name == _IDLE_TEST_FILE for i in session.items):
        import idlewatch
        idlewatch.start(floe_bin, Path(tempfile.mkdtemp(prefix="floe-idle-watch-")))


def pytest_sessionfinish(session, exitstatus):
    import idlewatch
    idlewatch.shutdown()


@pytest.fixture(scope="session")
def floe_bin(build_dir: Path) -> Path:
    return build_dir / "src" / "floe" / "cli" / "floe"


@pytest.fixture(scope="session")
def tool(build_dir: Path):
    """Path of a test tool built from tests/tools/."""

    def find(name: str) -> Path:
        p = build_dir / "tests" / "tools" / name
        if not p.exists():
            pytest.fail(f"test tool {name} is not built in {p.parent}; run `make build`")
        return p

    return find


@pytest.fixture(scope="session")
def pg_cluster():
    """One PostgreSQL server (15, or FLOE_PG_VERSION) for the whole session; removed
    at the end even when tests fail."""
    cluster = PgCluster().start()
    try:
        yield cluster
    finally:
        cluster.destroy()


_db_counter = itertools.count()


class PgDatabase:
    """A fresh database in the session's cluster."""

    def __init__(self, cluster: PgCluster, name: str):
        self.cluster = cluster
        self.name = name

    @property
    def dsn(self) -> str:
        return self.cluster.dsn(self.name)

    def connect(self, autocommit: bool = True) -> psycopg.Connection:
        return psycopg.connect(self.dsn, autocommit=autocommit)

    def execute(self, sql: str, params=None) -> list[tuple]:
        with self.connect() as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []


@pytest.fixture
def pg(pg_cluster: PgCluster):
    name = f"floe_test_{os.getpid()}_{next(_db_counter)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    db = PgDatabase(pg_cluster, name)
    try:
        yield db
    finally:
        pg_cluster.drop_database(name)


@pytest.fixture
def duckdb_con():
    """A DuckDB connection that loads extensions only from the pip-installed
    duckdb-ext-* packages (no network)."""
    import duckdb
    import duckdb_ext

    ext_dir = Path(list(duckdb_ext.__path__)[0]) / "extensions"
    con = duckdb.connect(config={
        "extension_directory": str(ext_dir),
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": True,
    })
    try:
        yield con
    finally:
        con.close()


def _set_decoding_memory(pg_cluster, value: str | None) -> None:
    """ALTER SYSTEM (RE)SET logical_decoding_work_mem and reload, then wait until new
    backends see it: pg_reload_conf() only signals the postmaster, and a walsender
    forked before it re-reads the file keeps the old value (a 300k-row transaction
    then arrives whole instead of streamed)."""
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        if value is None:
            admin.execute("ALTER SYSTEM RESET logical_decoding_work_mem")
        else:
            admin.execute(f"ALTER SYSTEM SET logical_decoding_work_mem = '{value}'")
        admin.execute("SELECT pg_reload_conf()")
        want = admin.execute("SELECT boot_val FROM pg_settings WHERE name = "
                             "'logical_decoding_work_mem'").fetchone()[0] \
            if value is None else value
    deadline = time.monotonic() + 30
    while True:
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as c:
            now = c.execute("SELECT setting || coalesce(unit, '') FROM pg_settings "
                            "WHERE name = 'logical_decoding_work_mem'").fetchone()[0]
        if now.lower() == want.lower() or now.lower() == f"{want}kb".lower():
            return
        assert time.monotonic() < deadline, f"logical_decoding_work_mem is {now}, not {want}"
        time.sleep(0.05)


@pytest.fixture
def small_decoding_memory(pg_cluster):
    """logical_decoding_work_mem at its minimum, so large transactions stream."""
    _set_decoding_memory(pg_cluster, "64kB")
    try:
        yield
    finally:
        _set_decoding_memory(pg_cluster, None)
