"""Many tables at once: a service with hundreds or thousands of tables, copied
together and touched by one transaction. floe holds a Parquet file open per table
it is writing, so it raises its soft open-file limit to the hard one at start, and
warns when the hard limit itself is low.

The oracle is the source: each Bronze table (PyIceberg) holds exactly the rows and
changes written with psql."""

from __future__ import annotations

import resource

from floerun import floe  # noqa: F401
from test_divergences import wait_flushed

N_TABLES = 600
LOW_LIMIT_WARNING = "the open-file limit is"


def open_file_limit(soft: int, hard: int | None = None):
    """A preexec_fn setting RLIMIT_NOFILE in floe's process before it starts."""
    def set_limit():
        was = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, was[1] if hard is None else hard))
    return set_limit


def test_six_hundred_tables_under_a_soft_open_file_limit_of_256(floe, pg):
    """600 published tables are copied together, then one transaction inserts a row
    into each and another updates every row, while floe was started with a soft
    open-file limit of 256 (the hard limit above it): every table is copied and
    gets its changes, and floe does not warn about the limit (it raised it)."""
    pg.execute("".join(f"CREATE TABLE t{i} (id int PRIMARY KEY, v text);"
                       f"INSERT INTO t{i} VALUES (0, 'seed');" for i in range(N_TABLES)))
    run = floe(publication={"name": "floe_pub", "create": "all_tables"},
               interval="500ms")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert hard == resource.RLIM_INFINITY or hard >= 4096, hard
    run.start(preexec_fn=open_file_limit(256))
    run.wait_streaming(timeout=300)
    pg.execute("".join(f"INSERT INTO t{i} VALUES (1, 'one');" for i in range(N_TABLES)))
    pg.execute("".join(f"UPDATE t{i} SET v = v || '!';" for i in range(N_TABLES)))
    wait_flushed(run, pg, timeout=300)
    run.check_alive()
    run.stop()
    for i in range(0, N_TABLES, 23):
        ops = sorted((r["cdc_op"], r["id"], r["v"])
                     for r in run.rows_pyiceberg(f"public.t{i}"))
        assert ops == [("c", 1, "one"), ("r", 0, "seed"), ("u", 0, "seed!"),
                       ("u", 1, "one!")], (i, ops)
    assert LOW_LIMIT_WARNING not in run.log_text()
    assert "Too many open files" not in run.log_text()


def test_a_low_hard_open_file_limit_is_reported_at_start(floe, pg):
    """A hard open-file limit of 512 cannot be raised by floe: it says so at start,
    with the fix, and still runs."""
    pg.execute("CREATE TABLE one (id int PRIMARY KEY)")
    run = floe(tables=["public.one"])
    run.start(preexec_fn=open_file_limit(512, 512))
    run.wait_streaming()
    run.stop()
    assert f"{LOW_LIMIT_WARNING} 512" in run.log_text(), run.log_tail()
    assert "ulimit -n" in run.log_text()
