"""What one PostgreSQL version has and another has not (issue #18), each checked on the
server of the matrix that has it (FLOE_PG_VERSION; `make test` runs these on every
version, and each test skips itself, saying why, where the feature does not exist).
The oracle is the source read with psql (oracle.py's check_silver) and the values in
Bronze read by PyIceberg."""

from __future__ import annotations

import pytest

from floerun import floe  # noqa: F401
from oracle import check_silver
from pgcluster import pg_version
from test_divergences import wait_flushed
from test_silver import silver, silver_ident

SERVICE = "svc"


@pytest.mark.every_version
def test_generated_columns_a_postgres_18_publication_sends_reach_bronze_and_silver(
        floe, pg, duckdb_con):
    """PostgreSQL 18 sends stored generated columns when the publication says
    `publish_generated_columns = stored`, or names them in its column list: they land
    in Bronze and Silver, on the copy path as on the stream, never as a null the
    source does not hold. A virtual generated column is never sent: left out, and
    said so."""
    if pg_version() < 18:
        pytest.skip("publish_generated_columns is PostgreSQL 18's")
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, a int, "
               "b int GENERATED ALWAYS AS (a * 2) STORED, c text, "
               "v int GENERATED ALWAYS AS (a * 3) VIRTUAL)")
    pg.execute("CREATE TABLE listed (id int PRIMARY KEY, a int, "
               "g text GENERATED ALWAYS AS ('g' || a) STORED, "
               "h int GENERATED ALWAYS AS (a + 1) STORED)")
    # acc: every stored column by the publication's option; listed: g by the column
    # list (h is not in it).
    pg.execute("CREATE PUBLICATION floe_pub FOR TABLE acc, listed (id, a, g) "
               "WITH (publish_generated_columns = stored)")
    pg.execute("INSERT INTO acc (id, a, c) SELECT g, g, 'x' FROM generate_series(1, 30) g")
    pg.execute("INSERT INTO listed (id, a) SELECT g, g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE, publication="floe_pub").start()
    run.wait_streaming()
    pg.execute("INSERT INTO acc (id, a, c) SELECT g, g, 'y' FROM generate_series(31, 40) g")
    pg.execute("UPDATE acc SET a = a + 100 WHERE id % 3 = 0")
    pg.execute("DELETE FROM acc WHERE id % 7 = 0")
    pg.execute("UPDATE listed SET a = -a WHERE id % 2 = 0")
    wait_flushed(run, pg)

    # Bronze: b on every row, the copied ones ('r') and the streamed ones alike.
    rows = run.rows_pyiceberg("public.acc")
    assert {r["cdc_op"] for r in rows} >= {"r", "c", "u", "d"}, rows[:3]
    live = [r for r in rows if r["cdc_op"] != "d"]
    assert all(r["b"] == r["a"] * 2 for r in live), [r for r in live if r["b"] != r["a"] * 2]
    assert "v" not in rows[0]
    listed = run.rows_pyiceberg("public.listed")
    assert all(r["g"] == f"g{r['a']}" for r in listed), listed[:3]
    assert "h" not in listed[0]

    silver(run)
    t = run.catalog().load_table(silver_ident("public.acc"))
    assert [f.name for f in t.schema().fields if f.name != "cdc_commit_lsn"] == \
        ["id", "a", "b", "c"]
    check_silver(run, pg, duckdb_con, "public.acc", ["id"], leave_out=("v",))
    check_silver(run, pg, duckdb_con, "public.listed", ["id"], leave_out=("h",))
    log = run.log_text()
    assert 'generated column(s) ["v"] are not replicated' in log, run.log_tail()
    assert '["b"' not in log and '"g"]' not in log, run.log_tail()
    run.stop()
