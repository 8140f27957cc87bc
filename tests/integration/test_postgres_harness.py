"""The harness itself: a real PostgreSQL (15, or the FLOE_PG_VERSION of the matrix)
with logical decoding, run as an unprivileged user, cleaned up afterwards; and a
pgoutput slot that advances."""

import os
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest

from pgcluster import DIR_PREFIX, OWNER_FILE, PgCluster, pg_version, sweep_leftovers


@pytest.mark.every_version
def test_server_is_the_asked_version_with_logical_wal(pg):
    (version,), = pg.execute("SHOW server_version_num")
    assert int(version) // 10000 == pg_version(), (version, pg_version())
    assert pg.execute("SHOW wal_level") == [("logical",)]
    assert int(pg.execute("SHOW max_replication_slots")[0][0]) >= 10


def test_server_runs_as_an_unprivileged_user(pg_cluster):
    owner = pg_cluster.data_dir.stat().st_uid
    assert owner == pg_cluster.run_as_uid
    assert owner != 0
    pid = int((pg_cluster.data_dir / "postmaster.pid").read_text().splitlines()[0])
    assert os.stat(f"/proc/{pid}").st_uid == owner


def test_pgoutput_slot_advances_after_its_changes_are_consumed(pg):
    pg.execute("CREATE TABLE items (id bigint PRIMARY KEY, name text)")
    pg.execute("CREATE PUBLICATION floe_pub FOR TABLE items")
    pg.execute("SELECT pg_create_logical_replication_slot('floe_slot', 'pgoutput')")
    (start,), = pg.execute(
        "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'floe_slot'")

    pg.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g")
    pg.execute("UPDATE items SET name = 'renamed' WHERE id <= 10")
    pg.execute("DELETE FROM items WHERE id > 90")
    (after_writes,), = pg.execute("SELECT pg_current_wal_lsn()")

    rows = pg.execute(
        "SELECT lsn, data FROM pg_logical_slot_get_binary_changes('floe_slot', NULL, NULL, "
        "'proto_version', '1', 'publication_names', 'floe_pub')")
    kinds = [bytes(data)[:1] for _, data in rows]
    assert kinds.count(b"I") == 100
    assert kinds.count(b"U") == 10
    assert kinds.count(b"D") == 10
    assert kinds.count(b"B") == kinds.count(b"C") == 3
    assert b"R" in kinds  # the relation is described before its first change

    (end,), = pg.execute(
        "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'floe_slot'")
    lsn = lambda s: (int(s.split("/")[0], 16) << 32) | int(s.split("/")[1], 16)
    assert lsn(str(end)) > lsn(str(start))
    assert lsn(str(end)) >= lsn(str(rows[-1][0]))

    # Consumed changes are not delivered again.
    again = pg.execute(
        "SELECT count(*) FROM pg_logical_slot_get_binary_changes('floe_slot', NULL, NULL, "
        "'proto_version', '1', 'publication_names', 'floe_pub')")
    assert again == [(0,)]

    pg.execute("SELECT pg_drop_replication_slot('floe_slot')")
    assert pg.execute("SELECT slot_name FROM pg_replication_slots") == []


def test_a_cluster_is_removed_after_use():
    cluster = PgCluster().start()
    base = cluster.base
    with psycopg.connect(cluster.dsn()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    cluster.destroy()
    assert not base.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(cluster.dsn(), connect_timeout=2)


@pytest.fixture
def cluster_root():
    """A directory for clusters of this test alone, reachable by the server's user."""
    root = tempfile.mkdtemp(prefix="floe-sweep-test-")
    os.chmod(root, 0o755)
    os.environ["FLOE_PG_TMPDIR"] = root
    try:
        yield Path(root)
    finally:
        del os.environ["FLOE_PG_TMPDIR"]
        shutil.rmtree(root, ignore_errors=True)


def test_leftovers_of_a_killed_run_are_swept_and_do_not_block_a_new_cluster(cluster_root):
    # A run that died without cleaning up: its server still runs and the process
    # that created it is gone.
    crashed = PgCluster().start()
    (crashed.base / OWNER_FILE).write_text("999999999")  # no such process
    stale_base = crashed.base
    pid = int((crashed.data_dir / "postmaster.pid").read_text().splitlines()[0])

    fresh = PgCluster().start()  # sweeps first
    try:
        assert not stale_base.exists()
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "State:\tZ" in status.read_text()
        with psycopg.connect(fresh.dsn()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # A live run's cluster is never swept.
        assert sweep_leftovers(str(cluster_root)) == []
        assert fresh.base.exists()
    finally:
        fresh.destroy()
    assert list(cluster_root.glob(DIR_PREFIX + "*")) == []
