"""Cases where Silver (or the lake) once differed from the source, each reproduced on
a real PostgreSQL through `floe run` and `floe silver`, and checked against the
source with PyIceberg and DuckDB (issue 14's numbered divergences) by oracle.py's
check_silver. The oracle is the source read with psql, never floe's own fold or
verify."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from floerun import check_order, floe, fold, lsn_int  # noqa: F401
from oracle import check_silver, source_rows
from test_maintenance import local, maint
from test_silver import silver, silver_ident
from test_silver_tools import tool as silver_tool

SERVICE = "svc"
# Incompressible, ~20 KB: stored out of line, so an update that leaves it alone
# does not send it (pgoutput's unchanged-TOAST marker).
# Correlated with the outer row `g`, so that every row gets a body of its own (an
# uncorrelated subquery runs once for the whole INSERT).
BIG = ("(SELECT string_agg(md5(random()::text || g2 || g), '') "
       "FROM generate_series(1, 640) g2)")


def wait_flushed(run, pg, timeout: float = 90) -> None:
    """Waits until the slot has confirmed everything written so far: every change
    committed before this call is in Bronze."""
    target = lsn_int(pg.execute("SELECT pg_current_wal_lsn()::text")[0][0])
    run.wait_until(lambda: (run.slot_confirmed_flush() or 0) >= target, timeout=timeout,
                   what=f"the slot to confirm {target:X}")


def wait_copied(run, table: str, timeout: float = 90) -> None:
    """Waits until floe run's copy again of public.`table` commits (Bronze drops
    floe.source.recopy-pending in that commit)."""
    run.wait_until(lambda: "floe.source.recopy-pending" not in run.catalog().load_table(
        ("bronze", SERVICE, "public", table)).properties, timeout=timeout,
        what=f"the copy of {table} to commit")


def test_boolean_and_nan_key_columns_after_the_first_merge(floe, pg, duckdb_con):
    """Break-it findings: a boolean key column after the first asked Parquet for a
    bloom filter it cannot write (every merge of the table failed), and a NaN in a
    float key column reached the merge's scan filter, which cannot name NaN (every
    merge after a change to such a row failed)."""
    pg.execute("CREATE TABLE kb (a int, b boolean, v int, PRIMARY KEY (a, b))")
    pg.execute("INSERT INTO kb SELECT g % 20, g >= 20, g FROM generate_series(0, 39) g")
    pg.execute("CREATE TABLE kf (a int, f float8, r real, v int, PRIMARY KEY (a, f, r))")
    pg.execute("INSERT INTO kf VALUES (1, 'NaN', 1, 1), (1, 1.5, 'NaN', 2), "
               "(2, 'Infinity', '-Infinity', 3), (2, '-0', 0, 4), (3, 'NaN', 'NaN', 5), "
               "(4, 2.5, 2.5, 6)")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.kb", ["a", "b"])
    check_silver(run, pg, duckdb_con, "public.kf", ["a", "f", "r"])
    pg.execute("UPDATE kb SET v = -v WHERE a % 3 = 0")
    pg.execute("DELETE FROM kb WHERE a = 5 AND b")
    pg.execute("DELETE FROM kb WHERE a = 7 AND b")
    pg.execute("UPDATE kb SET b = NOT b WHERE a = 7")
    pg.execute("UPDATE kf SET v = v * 10 WHERE f = 'NaN' OR r = 'NaN'")
    pg.execute("DELETE FROM kf WHERE a = 3")
    pg.execute("UPDATE kf SET f = 'NaN' WHERE a = 4")
    pg.execute("INSERT INTO kf VALUES (5, 'NaN', 0, 7)")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.kb", ["a", "b"])
    check_silver(run, pg, duckdb_con, "public.kf", ["a", "f", "r"])


def test_an_update_right_after_another_rows_delete_keeps_its_own_toast(floe, pg,
                                                                       duckdb_con):
    """#1: DELETE a; UPDATE b SET title (b's body unchanged TOAST) in one transaction
    must not give b the deleted row's body, in a backfill as in a merge."""
    pg.execute("CREATE TABLE docs (id uuid PRIMARY KEY, title text, body text)")
    pg.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute(f"INSERT INTO docs SELECT gen_random_uuid(), 't' || g, {BIG} "
               "FROM generate_series(1, 6) g")
    ids = [r[0] for r in pg.execute("SELECT id FROM docs ORDER BY title")]
    assert pg.execute("SELECT count(DISTINCT body) FROM docs")[0][0] == 6

    def delete_then_retitle(a, b, title):
        with pg.connect(autocommit=False) as c:
            c.execute("DELETE FROM docs WHERE id = %s", (a,))
            c.execute("UPDATE docs SET title = %s WHERE id = %s", (title, b))
            c.commit()

    delete_then_retitle(ids[0], ids[1], "retitled 1")
    wait_flushed(run, pg)
    assert any(r["cdc_unchanged"] == ["body"] for r in run.rows_pyiceberg("public.docs")), \
        "the test meant an update with an unchanged TOAST value, but Bronze has none"
    silver(run)  # a backfill of the new Silver table
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])

    delete_then_retitle(ids[2], ids[3], "retitled 3")
    wait_flushed(run, pg)
    silver(run)  # a merge into the existing table
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])


def test_generated_columns_are_left_out_everywhere_and_said_so(floe, pg, duckdb_con):
    """#2: a stored generated column is never a silent null: Bronze and Silver leave
    it out on the copy path and on the stream path alike, and the log says why."""
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, a int, "
               "b int GENERATED ALWAYS AS (a * 2) STORED, c text)")
    pg.execute("INSERT INTO acc (id, a, c) SELECT g, g, 'x' FROM generate_series(1, 20) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("INSERT INTO acc (id, a, c) SELECT g, g, 'y' FROM generate_series(21, 30) g")
    pg.execute("UPDATE acc SET a = a + 100 WHERE id % 3 = 0")
    wait_flushed(run, pg)
    silver(run)
    t = run.catalog().load_table(silver_ident("public.acc"))
    assert [f.name for f in t.schema().fields if f.name != "cdc_commit_lsn"] == \
        ["id", "a", "c"]
    assert "b" not in [f.name for f in run.load("public.acc").schema().fields]
    check_silver(run, pg, duckdb_con, "public.acc", ["id"], leave_out=("b",))
    assert 'generated column(s) ["b"] are not replicated' in run.log_text()


def test_deletes_under_replica_identity_using_index_reach_silver(floe, pg, duckdb_con):
    """#3: under REPLICA IDENTITY USING INDEX on a unique index that is not the
    primary key, a delete carries only the index's columns; Silver merges by them."""
    pg.execute("CREATE TABLE acct (id int PRIMARY KEY, code text NOT NULL, v int)")
    pg.execute("CREATE UNIQUE INDEX acct_code ON acct (code)")
    pg.execute("ALTER TABLE acct REPLICA IDENTITY USING INDEX acct_code")
    pg.execute("INSERT INTO acct SELECT g, 'c' || g, g FROM generate_series(1, 40) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("DELETE FROM acct WHERE id % 4 = 0")
    pg.execute("UPDATE acct SET v = -v WHERE id % 5 = 0")
    pg.execute("INSERT INTO acct VALUES (100, 'c100', 100)")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.acct", ["id"])
    # A merge into the existing table: deletes, a code change, an insert.
    pg.execute("DELETE FROM acct WHERE id % 7 = 0")
    pg.execute("UPDATE acct SET code = code || '-x' WHERE id = 1")
    pg.execute("INSERT INTO acct VALUES (101, 'c101', 101)")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.acct", ["id"])


def test_a_table_named_dot_gets_its_own_directory(floe, pg, duckdb_con):
    """#5: tables named `.` and `..` get directories of their own, and
    remove-orphans never takes another table's files for theirs."""
    pg.execute('CREATE TABLE "." (id int PRIMARY KEY, v text)')
    pg.execute('CREATE TABLE ".." (id int PRIMARY KEY, v text)')
    pg.execute("CREATE TABLE orders (id int PRIMARY KEY, v text)")
    for t in ('"."', '".."', "orders"):
        pg.execute(f"INSERT INTO {t} SELECT g, 'v' || g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("UPDATE orders SET v = 'changed'")
    wait_flushed(run, pg)
    silver(run)
    schema_dir = Path(local(run.load("public.orders").location())).parent
    locations = {Path(local(run.catalog().load_table(("bronze", SERVICE, "public", t))
                            .location())).resolve()
                 for t in (".", "..", "orders")}
    assert len(locations) == 3, locations
    for loc in locations:
        assert loc.parent == schema_dir.resolve(), (loc, schema_dir)
    for t in (".", ".."):
        check_silver(run, pg, duckdb_con, ("public", t), ["id"])
    # Every file is made old: only references keep one.
    for p in run.warehouse.rglob("*"):
        if p.is_file() and not p.name.startswith("catalog.db"):
            os.utime(p, (time.time() - 4 * 24 * 3600,) * 2)
    out = maint(run, "remove-orphans", "--dry-run")
    assert "would remove 0 orphan file(s)" in out and "would remove 1" not in out, out
    assert out.count("would remove 0 orphan file(s)") >= 6, out
    maint(run, "remove-orphans")
    assert sorted(r["v"] for r in run.rows(duckdb_con, "public.orders")
                  if r["cdc_op"] == "u") == ["changed"] * 10
    check_silver(run, pg, duckdb_con, "public.orders", ["id"])


def test_a_message_naming_a_huge_table_stops_nothing(floe, pg, duckdb_con):
    """#6: any role may emit a message whose JSON names a 300-character table; the
    audit row lands (its source_table intact) and every table keeps committing."""
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    huge = "x" * 300
    euro = "\u20ac" * 100
    with pg.connect(autocommit=False) as c:
        c.execute("INSERT INTO t VALUES (1, 'a')")
        c.execute("SELECT pg_logical_emit_message(true, 'audit', %s)",
                  (f'{{"table": "{huge}"}}',))
        c.execute("SELECT pg_logical_emit_message(true, 'audit', %s)",
                  (f'{{"source_table": "{euro}"}}',))
        c.commit()
    pg.execute("INSERT INTO t VALUES (2, 'b')")
    wait_flushed(run, pg)
    assert sorted(r["id"] for r in run.rows_pyiceberg("public.t")) == [1, 2]
    audit = run.catalog().load_table(("bronze", SERVICE, "pg_logical_messages"))
    rows = audit.scan().to_arrow().to_pylist()
    assert sorted(r["source_table"] for r in rows) == sorted([huge, euro])
    path = audit.metadata_location.removeprefix("file://")
    dk = duckdb_con.execute("SELECT source_table FROM iceberg_scan(?)", [path]).fetchall()
    assert sorted(r[0] for r in dk) == sorted([huge, euro])
    for p in Path(local(audit.location())).rglob("*"):
        assert len(p.name.encode()) <= 255, p


def test_the_smallest_interval_comes_through_exactly(floe, pg, duckdb_con):
    """#10: '-9223372036854775808 us' fits the interval struct; it is no quarantine
    case, on the copy path or the stream path."""
    pg.execute("CREATE TABLE iv (id int PRIMARY KEY, v interval)")
    pg.execute("INSERT INTO iv VALUES (1, '-9223372036854775808 us'), "
               "(2, '9223372036854775807 us')")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("INSERT INTO iv VALUES (3, '-9223372036854775808 us'), "
               "(4, '-9223372036854775807 us')")
    wait_flushed(run, pg)
    rows = {r["id"]: r["v"] for r in run.rows_pyiceberg("public.iv")}
    want = {1: -2**63, 2: 2**63 - 1, 3: -2**63, 4: -2**63 + 1}
    assert {k: v["microseconds"] if v else None for k, v in rows.items()} == want
    assert not run.catalog().table_exists(("bronze", SERVICE, "quarantine")) or \
        run.catalog().load_table(("bronze", SERVICE, "quarantine")).scan() \
        .to_arrow().num_rows == 0


def test_a_table_the_catalog_cannot_name_holds_nothing_back(floe, pg, duckdb_con):
    """#7: a published table in schema "a.b" (the SQL catalog joins namespace levels
    with '.') is reported and skipped while the others flow; once named in
    naming.tables and floe restarted, it is copied whole."""
    from test_run_metrics import scrape

    pg.execute('CREATE SCHEMA "a.b"')
    pg.execute('CREATE TABLE "a.b".t (id int PRIMARY KEY, v text)')
    pg.execute("CREATE TABLE ok (id int PRIMARY KEY, v text)")
    pg.execute("""INSERT INTO "a.b".t VALUES (1, 'before')""")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("INSERT INTO ok SELECT g, 'v' FROM generate_series(1, 50) g")
    pg.execute("""INSERT INTO "a.b".t VALUES (2, 'while unnamed')""")
    pg.execute("""UPDATE "a.b".t SET v = 'changed' WHERE id = 1""")
    pg.execute("UPDATE ok SET v = 'w' WHERE id <= 10")
    wait_flushed(run, pg)  # the slot moves on: the table holds nothing back
    assert sorted(r["id"] for r in run.rows_pyiceberg("public.ok")
                  if r["cdc_op"] == "u") == list(range(1, 11))
    log = run.log_text()
    assert '"a.b".t cannot be replicated under its name' in log, log
    assert '"a.b".t: {bronze: bronze.svc.<schema>.<table>' in log, log
    assert "reconnecting" not in log, log
    metrics = scrape(run.metrics_url())
    assert metrics[("floe_source_table_unnamed", (("table", "a.b.t"),))] == 1, \
        {k: v for k, v in metrics.items() if "unnamed" in k[0]}
    run.stop()

    with open(run.config_path, "a") as f:
        f.write('naming:\n  tables:\n    \'"a.b".t\': {bronze: bronze.svc.a_b.t, '
                'silver: silver.svc.a_b.t}\n')
    run.start()
    run.wait_streaming()
    pg.execute("""INSERT INTO "a.b".t VALUES (3, 'after')""")
    wait_flushed(run, pg)
    silver(run)
    t = run.catalog().load_table(("silver", SERVICE, "a_b", "t"))
    assert sorted((r["id"], r["v"]) for r in t.scan().to_arrow().to_pylist()) == \
        sorted(pg.execute('SELECT id, v FROM "a.b".t'))
    check_silver(run, pg, duckdb_con, "public.ok", ["id"])


def _churn(pg, table: str, base: int) -> None:
    pg.execute(f"UPDATE {table} SET v = v || '+{base}' WHERE id % 3 = 0")
    pg.execute(f"DELETE FROM {table} WHERE id % 5 = 0")
    pg.execute(f"INSERT INTO {table} SELECT g, 'n' FROM generate_series({base}, {base + 9}) g")


def test_a_table_back_in_the_publication_is_copied_again(floe, pg, duckdb_con):
    """#4: changes made while a table was out of the publication never reach the
    stream; when it is added back (while floe runs, or while it is stopped) Bronze
    gets a `t` row and a fresh copy, and Silver equals the source again."""
    for t in ("a", "b"):
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO {t} SELECT g, 'v' FROM generate_series(1, 30) g")
    run = floe(service=SERVICE, tables=["public.a", "public.b"]).start()
    run.wait_streaming()
    _churn(pg, "a", 100)
    wait_flushed(run, pg)
    pg.execute("ALTER PUBLICATION floe_pub DROP TABLE a")
    _churn(pg, "a", 200)  # never streamed
    _churn(pg, "b", 200)
    pg.execute("ALTER PUBLICATION floe_pub ADD TABLE a")
    _churn(pg, "a", 300)
    run.wait_until(lambda: "is not the table Bronze copied" in run.log_text(), timeout=60,
                   what="floe to notice public.a came back")
    run.wait_until(lambda: any(r["cdc_op"] == "t" for r in run.rows_pyiceberg("public.a")),
                   timeout=60, what="the t row and the copy of public.a")
    wait_flushed(run, pg)
    silver(run)
    for t in ("a", "b"):
        check_silver(run, pg, duckdb_con, ("public", t), ["id"])

    # The same while floe is stopped.
    run.stop()
    pg.execute("ALTER PUBLICATION floe_pub DROP TABLE a")
    _churn(pg, "a", 400)
    pg.execute("ALTER PUBLICATION floe_pub ADD TABLE a")
    run.start()
    run.wait_streaming()
    _churn(pg, "a", 500)
    wait_flushed(run, pg)
    assert run.log_text().count("is not the table Bronze copied") == 2
    silver(run)
    check_silver(run, pg, duckdb_con, "public.a", ["id"])


def test_a_table_dropped_and_recreated_or_renamed_is_copied_again(floe, pg, duckdb_con):
    """#4: a table dropped and re-created under its name (a new OID), while floe runs
    and while it is stopped, and a renamed table: Silver equals the source."""
    pg.execute("CREATE TABLE r (id int PRIMARY KEY, v text)")
    pg.execute("CREATE TABLE m (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO r SELECT g, 'v' FROM generate_series(1, 30) g")
    pg.execute("INSERT INTO m SELECT g, 'v' FROM generate_series(1, 30) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    _churn(pg, "r", 100)
    wait_flushed(run, pg)
    pg.execute("DROP TABLE r")
    pg.execute("CREATE TABLE r (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO r SELECT g, 'again' FROM generate_series(5, 12) g")
    pg.execute("ALTER TABLE m RENAME TO m2")
    _churn(pg, "m2", 200)
    run.wait_until(lambda: "is not the table Bronze copied" in run.log_text(), timeout=60,
                   what="floe to notice public.r was re-created")
    _churn(pg, "r", 300)
    wait_flushed(run, pg)
    run.wait_until(lambda: run.exists("public.m2"), what="Bronze of the renamed table")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.r", ["id"])
    check_silver(run, pg, duckdb_con, "public.m2", ["id"])

    run.stop()
    pg.execute("DROP TABLE r")
    pg.execute("CREATE TABLE r (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO r VALUES (1, 'third incarnation')")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.r", ["id"])


def test_a_table_first_seen_in_the_stream_that_no_longer_exists_is_skipped(
        floe, pg, duckdb_con):
    """Break-it B2: a table the stream names that is gone from the source's catalog by
    the time floe reads its changes (created, written and dropped; renamed, written
    and dropped) cannot be copied. floe took it for a table without a key, then
    failed to copy it ("has no columns or does not exist") at every start: the whole
    pipeline stopped for good. Its streamed changes now land in Bronze, it is
    skipped with a log line, and the other tables go on."""
    pg.execute("CREATE TABLE kept (id int PRIMARY KEY, v text)")
    pg.execute("CREATE TABLE doomed (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO doomed VALUES (1, 'a')")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    run.stop()
    pg.execute("CREATE TABLE brief (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO brief SELECT g, 'b' FROM generate_series(1, 5) g")
    pg.execute("DELETE FROM brief WHERE id = 2")
    pg.execute("DROP TABLE brief")
    pg.execute("ALTER TABLE doomed RENAME TO doomed_later")
    pg.execute("INSERT INTO doomed_later VALUES (2, 'b')")
    pg.execute("DROP TABLE doomed_later")
    pg.execute("INSERT INTO kept VALUES (1, 'after')")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    assert run.proc.poll() is None, run.log_tail(40)
    log = run.log_text()
    for gone in ("public.brief", "public.doomed_later"):
        assert f"{gone} appeared in the stream but is no longer in the source" in log, log
    assert "has no columns or does not exist" not in log
    # The stream's changes of the gone tables are in Bronze, exactly.
    brief = [(r["cdc_op"], r["id"]) for r in run.rows_pyiceberg("public.brief")]
    assert brief == [("c", 1), ("c", 2), ("c", 3), ("c", 4), ("c", 5), ("d", 2)], brief
    assert [(r["cdc_op"], r["id"]) for r in run.rows_pyiceberg("public.doomed_later")] \
        == [("c", 2)]
    pg.execute("INSERT INTO kept VALUES (2, 'later')")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.kept", ["id"])
    # A table created later under a gone table's name is copied, not taken for it.
    pg.execute("CREATE TABLE brief (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO brief VALUES (7, 'new')")
    run.start()
    run.wait_streaming()
    pg.execute("INSERT INTO brief VALUES (8, 'newer')")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.brief", ["id"])


def test_a_table_renamed_before_its_copy_reads_it_is_skipped_not_fatal(floe, pg, duckdb_con):
    """A table listed for a copy and renamed before the copy read its columns (floe
    pauses before the copy's snapshot, `copy.before-snapshot`): the copy failed
    ("has no columns or does not exist") and floe stopped. The table is now left out
    with a warning, and under its new name it is copied like any table found later."""
    pg.execute("CREATE TABLE kept (id int PRIMARY KEY, v text)")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    run.stop()
    pg.execute("CREATE TABLE early (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO early SELECT g, 'e' FROM generate_series(1, 20) g")
    run.start(env={"FLOE_FAILPOINT": "copy.before-snapshot=sleep:3000"})
    run.wait_until(lambda: "failpoint copy.before-snapshot" in run.log_text(), 60,
                   what="the copy to pause", interval=0.05)
    pg.execute("ALTER TABLE early RENAME TO later")
    pg.execute("UPDATE later SET v = 'l' WHERE id < 5")
    run.wait_streaming()
    run.wait_until(lambda: "public.early: not copied, it is no longer in the source"
                   in run.log_text(), 60, what="the copy to leave public.early out")
    pg.execute("INSERT INTO kept VALUES (1, 'k')")
    wait_flushed(run, pg)
    run.wait_until(lambda: run.exists("public.later"), what="Bronze of public.later")
    wait_copied(run, "later")
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.later", ["id"])
    check_silver(run, pg, duckdb_con, "public.kept", ["id"])


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
def test_a_key_change_streamed_after_its_table_was_dropped_is_a_delete_and_an_insert(
        floe, pg, identity):
    """Soak seed 980530675: key-changing updates of a table with a two-column primary
    key, and the table dropped and created again before floe read them (here: in the
    same transaction, which floe decodes after its commit). floe learnt a streamed
    relation's primary key from the catalog, which no longer had the dropped relation:
    its changes carried no key, so Bronze held each key change as a `u` of the new key
    instead of a `d` of the old key and a `c` of the new one (under DEFAULT identity
    the Relation message itself flags the key columns; under FULL it flags every
    column). floe now reads such a relation's changes with the columns and key Bronze
    recorded for it."""
    pg.execute("CREATE TABLE kd (grp text, seq int, title text, PRIMARY KEY (grp, seq))")
    pg.execute(f"ALTER TABLE kd REPLICA IDENTITY {identity}")
    pg.execute("INSERT INTO kd SELECT 'g' || g, g, 't' FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    with pg.connect(autocommit=False) as c:
        c.execute("UPDATE kd SET seq = seq + 100 WHERE seq <= 2")
        c.execute("UPDATE kd SET title = 'x' WHERE seq = 3")
        c.execute("DROP TABLE kd")
        c.execute("CREATE TABLE kd (grp text, seq int, title text, PRIMARY KEY (grp, seq))")
        c.commit()
    wait_flushed(run, pg)
    run.stop()
    got = sorted((r["cdc_op"], r["grp"], r["seq"]) for r in run.rows_pyiceberg("public.kd")
                 if r["cdc_op"] in "cud")
    assert got == [("c", "g1", 101), ("c", "g2", 102), ("d", "g1", 1), ("d", "g2", 2),
                   ("u", "g3", 3)], got


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
def test_a_key_change_of_a_table_dropped_while_floe_was_stopped_is_a_delete_and_an_insert(
        floe, pg, identity):
    """Break-it (session 15) B1: the same as above when floe starts after the drop.
    Only the Bronze tables loaded in the run were asked for the dropped relation's
    columns, and a run that starts after the drop has loaded none: under FULL the key
    change landed as a lone `u` of the new key (no `d` of the old one, which Silver
    then kept), and Bronze recorded an empty primary key. floe now loads the Bronze
    table of the name the stream gives the relation."""
    pg.execute("CREATE TABLE kg (id int PRIMARY KEY, v text)")
    pg.execute(f"ALTER TABLE kg REPLICA IDENTITY {identity}")
    pg.execute("INSERT INTO kg SELECT g, 'v' || g FROM generate_series(1, 3) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_copied(run, "kg")
    wait_flushed(run, pg)
    run.stop()
    pg.execute("UPDATE kg SET id = 11 WHERE id = 1")
    pg.execute("DELETE FROM kg WHERE id = 2")
    pg.execute("DROP TABLE kg")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    got = sorted((r["cdc_op"], r["id"]) for r in run.rows_pyiceberg("public.kg")
                 if r["cdc_op"] in "cud")
    assert got == [("c", 11), ("d", 1), ("d", 2)], got
    if identity == "FULL":
        assert "is no longer in the source's catalog" in run.log_text()
    assert "the key every change carries changed" not in run.log_text()


def relation_marks(rows: list[dict]) -> list[tuple[int, int]]:
    """The positions of Bronze's `t` rows of no transaction that are not a copy's
    (whose cdc_source_lsn is its cdc_commit_lsn): floe's marks where a table's name
    passed to another relation."""
    return [(r["cdc_commit_lsn"], r["cdc_seq"]) for r in rows
            if r["cdc_op"] == "t" and r["cdc_source_tx_id"] is None and
            r["cdc_source_lsn"] != r["cdc_commit_lsn"]]


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
@pytest.mark.parametrize("how", ["separate", "one transaction"])
def test_a_table_created_again_written_and_dropped_while_floe_was_stopped(
        floe, pg, duckdb_con, how, identity):
    """Break-it (session 15) B7: a table dropped, created again, written and dropped
    again while floe was stopped. The second table's changes continued the first
    one's Bronze changelog with no `t` row, so Silver held a blend of both (the first
    table's rows no change of the second touched). floe now writes a `t` row where
    the stream's relation of a name changes, right before the new relation's first
    change: Silver holds the second table as it was when it was dropped. In one
    transaction the old relation's last change and the new one's first are adjacent:
    the change stream leaves one cdc_seq free between them for the `t` row.
    Break-it (session 16) F1: under REPLICA IDENTITY FULL nothing said which columns
    were the second table's key (gone from the catalog, never read by Bronze): its
    key change landed as a lone `u`, Bronze's key became `[]` and Silver was left
    stale for good. The key Bronze recorded for the name is taken, by name."""
    pg.execute("CREATE TABLE g2 (id int PRIMARY KEY, v text)")
    pg.execute(f"ALTER TABLE g2 REPLICA IDENTITY {identity}")
    pg.execute("INSERT INTO g2 SELECT g, 'first ' || g FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    recreate = ["UPDATE g2 SET v = 'first, changed' WHERE id = 1",
                "DROP TABLE g2",
                "CREATE TABLE g2 (id int PRIMARY KEY, v text)",
                f"ALTER TABLE g2 REPLICA IDENTITY {identity}",
                "INSERT INTO g2 VALUES (1, 'second 1'), (10, 'second 10')"]
    if how == "one transaction":
        pg.execute("BEGIN; " + "; ".join(recreate) + "; COMMIT")
    else:
        for statement in recreate:
            pg.execute(statement)
    pg.execute("UPDATE g2 SET v = 'second 10, changed' WHERE id = 10")
    pg.execute("UPDATE g2 SET id = 12 WHERE id = 1")
    want = source_rows(pg, "public.g2")
    pg.execute("DROP TABLE g2")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.g2", ["id"], want=want)
    rows = run.rows_pyiceberg("public.g2")
    check_order("public.g2", rows)
    assert len(relation_marks(rows)) == 1, rows
    assert fold(rows, ["id"]).keys() == {(10,), (12,)}, rows
    moved = [(r["cdc_op"], r["id"]) for r in rows if r["id"] in (1, 12) and
             r["cdc_source_tx_id"] is not None]
    assert moved[-2:] == [("d", 1), ("c", 12)], moved
    assert run.load("public.g2").properties["floe.source.primary-key"] == '["id"]'
    assert "the key every change carries changed" not in run.log_text()


def test_a_relation_mark_is_written_again_when_floe_dies_before_its_commit(
        floe, pg, duckdb_con):
    """The `t` row where a name passes to another relation is written with that
    relation's first change, and floe records the new relation (the Bronze table's
    floe.source.relations) before they commit. floe SIGKILLed in between
    (checkpoint.before-commit) replays the transaction at the next start: the `t` row
    is written again with it, exactly once, and Silver is the second table."""
    pg.execute("CREATE TABLE mk (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO mk SELECT g, 'first ' || g FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    pg.execute("DROP TABLE mk")
    pg.execute("CREATE TABLE mk (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO mk VALUES (2, 'second 2'), (20, 'second 20')")
    want = source_rows(pg, "public.mk")
    pg.execute("DROP TABLE mk")

    def recorded_not_committed() -> bool:
        t = run.catalog().load_table(("bronze", SERVICE, "public", "mk"))
        spans = json.loads(t.properties.get("floe.source.relations", "[]"))
        return any(s[3] for s in spans) and not relation_marks(
            t.scan().to_arrow().to_pylist())
    for _ in range(6):
        run.start(env={"FLOE_FAILPOINT": "checkpoint.before-commit@1"})
        assert run.wait_exit(120) == -9, run.log_tail()
        if recorded_not_committed():
            break
    else:
        pytest.fail("floe never died between recording the new relation and committing")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    rows = run.rows_pyiceberg("public.mk")
    check_order("public.mk", rows)
    assert len(relation_marks(rows)) == 1, rows
    silver(run)
    check_silver(run, pg, duckdb_con, "public.mk", ["id"], want=want)


def test_the_last_changes_of_a_table_created_again_while_floe_was_stopped_reach_bronze(
        floe, pg, duckdb_con):
    """Break-it (session 15) B3: a table changed, dropped and created again while floe
    was stopped. floe copied the new table at start and moved the Bronze table's
    position to the copy's, so the stream skipped every change below it: the old
    table's last changes never reached Bronze (Silver was right, the changelog was
    not). The copy again now leaves Bronze's position where the stream was, as a
    copy after a column change does: the old table's changes land, then a `t` row
    before the new table's first change, then the copy's `t` and `r` rows."""
    pg.execute("CREATE TABLE lc (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO lc SELECT g, 'first ' || g FROM generate_series(1, 4) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    pg.execute("UPDATE lc SET v = 'last' WHERE id = 1")
    pg.execute("DELETE FROM lc WHERE id = 2")
    pg.execute("DROP TABLE lc")
    pg.execute("CREATE TABLE lc (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO lc VALUES (1, 'new 1'), (7, 'new 7')")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    pg.execute("UPDATE lc SET v = 'new 7, changed' WHERE id = 7")
    wait_flushed(run, pg)
    run.stop()
    rows = run.rows_pyiceberg("public.lc")
    check_order("public.lc", rows)
    changes = [(r["cdc_op"], r["id"], r["v"]) for r in rows
               if r["cdc_source_tx_id"] is not None]
    assert ("u", 1, "last") in changes and ("d", 2, None) in changes, changes
    assert ("c", 7, "new 7") in changes and ("u", 7, "new 7, changed") in changes, changes
    assert fold(rows, ["id"]).keys() == {(1,), (7,)}, rows
    silver(run)
    check_silver(run, pg, duckdb_con, "public.lc", ["id"])


@pytest.mark.parametrize("stopped", [False, True])
def test_a_table_created_again_under_snapshot_never_starts_from_nothing(
        floe, pg, duckdb_con, stopped):
    """Break-it (session 15) B4: with `snapshot: never` no copy follows a table
    dropped and created again, so nothing ended the old table's rows: Silver kept
    them beside the new table's. The `t` row where the name's relation changes ends
    them, whether floe streamed through the change or started after it."""
    run = floe(service=SERVICE, snapshot="never").start()
    run.wait_streaming()
    pg.execute("CREATE TABLE sn (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO sn SELECT g, 'old ' || g FROM generate_series(1, 5) g")
    wait_flushed(run, pg)
    if stopped:
        run.stop()
    pg.execute("DROP TABLE sn")
    pg.execute("CREATE TABLE sn (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO sn VALUES (3, 'new 3'), (30, 'new 30')")
    if stopped:
        run.start()
        run.wait_streaming()
    wait_flushed(run, pg)
    pg.execute("UPDATE sn SET v = 'new 30, changed' WHERE id = 30")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.sn", ["id"])
    rows = run.rows_pyiceberg("public.sn")
    check_order("public.sn", rows)
    assert len(relation_marks(rows)) == 1, rows


@pytest.mark.parametrize("how", ["recreated", "unpublished"])
def test_a_table_not_in_the_publication_is_never_copied(floe, pg, how):
    """Break-it (session 15) B2: a publication FOR TABLE t; t changed in a way that
    copies it again (a column added with a default), then dropped and created again
    outside the publication, or removed from the publication. The copy went by name
    and read the table whatever its membership: rows of a table nobody published
    (here a `secret` column) reached Bronze and Silver. A copy now reads only a table
    that is in the publication."""
    pg.execute("CREATE TABLE np (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO np SELECT g, 'v' FROM generate_series(1, 3) g")
    run = floe(service=SERVICE, tables=["public.np"]).start()
    run.wait_streaming()
    wait_copied(run, "np")
    wait_flushed(run, pg)
    run.stop()
    pg.execute("ALTER TABLE np ADD COLUMN d int NOT NULL DEFAULT 7")
    pg.execute("UPDATE np SET v = 'x' WHERE id = 1")
    if how == "recreated":
        pg.execute("DROP TABLE np")
        pg.execute("CREATE TABLE np (id int PRIMARY KEY, v text, secret text)")
        pg.execute("INSERT INTO np VALUES (100, 'not published', 's3cr3t')")
    else:
        pg.execute("ALTER PUBLICATION floe_pub DROP TABLE np")
        pg.execute("INSERT INTO np VALUES (100, 'not published', 7)")
    assert pg.execute("SELECT count(*) FROM pg_publication_tables "
                    "WHERE pubname = 'floe_pub'")[0][0] == 0
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.wait_until(lambda: "public.np: not copied" in run.log_text(), timeout=60,
                   what="floe to refuse the copy of public.np")
    run.stop()
    rows = run.rows_pyiceberg("public.np")
    assert not [r for r in rows if r["id"] == 100], rows
    assert "s3cr3t" not in repr(rows)
    assert ("u", 1) in [(r["cdc_op"], r["id"]) for r in rows], rows


def test_silver_waits_for_the_copy_of_a_table_renamed_back(floe, pg, duckdb_con):
    """Break-it (session 16) F2: in one transaction a table is renamed away, another
    table created under its name, written and dropped, and the first renamed back and
    changed. The stream shows it back under its name, but it was copied again only at
    the next discovery (up to 10 s later): floe stopped in between left Bronze without
    its changes under the other name, and `floe silver` merged that (2 rows of 10). Now
    the stream's rename back copies it at once, and until that copy commits Silver
    waits (floe.source.recopy-pending), here across a SIGKILL as the copy starts."""
    pg.execute("CREATE TABLE rb (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO rb SELECT g, 'v' || g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    run.start(env={"FLOE_FAILPOINT": "copy.before-snapshot@1"})
    run.wait_streaming()
    pg.execute("BEGIN; UPDATE rb SET v = 'changed' WHERE id = 1; "
               "ALTER TABLE rb RENAME TO rb_away; "
               "CREATE TABLE rb (id int PRIMARY KEY, v text); "
               "INSERT INTO rb VALUES (50, 'other'); "
               "UPDATE rb_away SET v = 'away' WHERE id = 2; "
               "DROP TABLE rb; ALTER TABLE rb_away RENAME TO rb; "
               "UPDATE rb SET v = 'back' WHERE id = 3; COMMIT")
    assert run.wait_exit(120) == -9, run.log_tail()
    assert "public.rb is back under its name" in run.log_text()
    out = silver(run)
    assert "waiting for floe run to copy public.rb again" in out, out
    run.start()
    run.wait_streaming()
    wait_copied(run, "rb")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rb", ["id"])


def test_changes_made_under_another_name_and_renamed_back_are_copied_again(
        floe, pg, duckdb_con):
    """Break-it B1: a table renamed away, changed under its other name and renamed
    back. Its changes reached the stream under the other name only (Bronze of that
    name), its identity (oid, publication membership) did not change, so Bronze and
    Silver of the table under its own name missed them for good. The stream naming a
    held table's relation under another name now marks the table to be copied
    again. In one transaction, and in three while floe is stopped and while it runs."""
    for t in ("one_tx", "stopped", "running"):
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO {t} SELECT g, 'v' FROM generate_series(1, 30) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    _churn(pg, "one_tx", 100)
    wait_flushed(run, pg)
    with pg.connect(autocommit=False) as c:
        c.execute("ALTER TABLE one_tx RENAME TO one_tx_away")
        c.execute("UPDATE one_tx_away SET v = 'away' WHERE id < 10")
        c.execute("DELETE FROM one_tx_away WHERE id BETWEEN 20 AND 25")
        c.execute("ALTER TABLE one_tx_away RENAME TO one_tx")
        c.commit()
    pg.execute("ALTER TABLE running RENAME TO running_away")
    _churn(pg, "running_away", 200)
    pg.execute("ALTER TABLE running_away RENAME TO running")
    wait_flushed(run, pg)
    run.stop()
    pg.execute("ALTER TABLE stopped RENAME TO stopped_away")
    _churn(pg, "stopped_away", 300)
    pg.execute("ALTER TABLE stopped_away RENAME TO stopped")
    run.start()
    run.wait_streaming()
    for t in ("one_tx", "stopped", "running"):
        run.wait_until(lambda t=t: f"public.{t} is not the table Bronze copied"
                       in run.log_text() or f"public.{t} is back under its name"
                       in run.log_text(), timeout=60,
                       what=f"floe to copy public.{t} again")
        run.wait_until(lambda t=t: any(r["cdc_op"] == "t" for r in
                                       run.rows_pyiceberg(f"public.{t}")), timeout=60,
                       what=f"the copy again of public.{t}")
    for t in ("one_tx", "stopped", "running"):
        pg.execute(f"UPDATE {t} SET v = 'last' WHERE id = 1")
    wait_flushed(run, pg)
    run.stop()
    silver(run)
    for t in ("one_tx", "stopped", "running"):
        check_silver(run, pg, duckdb_con, f"public.{t}", ["id"])


def test_a_table_recreated_with_its_columns_elsewhere_is_bound_by_name(floe, pg,
                                                                      duckdb_con):
    """Soak seed 998210465: a table dropped and created again under its name with the
    same columns, which now sit at other attnums (the old table had a dropped
    column). The new relation's columns were bound to the old relation's by attnum:
    `b` (attnum 2, the dropped column's) was taken for a new column and `c` (attnum 3,
    the old `b`'s) for `b` retyped, so Bronze grew fields it never needed and the
    changes until the copy again held their values under other names. A new relation
    (another pg_class oid) is bound by name, like a new table."""
    pg.execute("CREATE TABLE r (id int PRIMARY KEY, gone text, b int, c text)")
    pg.execute("INSERT INTO r SELECT g, 'x', g, 'c' || g FROM generate_series(1, 20) g")
    pg.execute("ALTER TABLE r DROP COLUMN gone")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("UPDATE r SET c = 'before' WHERE id = 1")
    wait_flushed(run, pg)
    fields_before = [f.name for f in run.load("public.r").schema().fields]
    pg.execute("DROP TABLE r")
    pg.execute("CREATE TABLE r (id int PRIMARY KEY, b int, c text)")
    pg.execute("INSERT INTO r VALUES (100, 7, 'new')")
    pg.execute("UPDATE r SET b = 8 WHERE id = 100")
    wait_flushed(run, pg)
    run.wait_until(lambda: "is not the table Bronze copied" in run.log_text(), timeout=60,
                   what="floe to notice public.r was re-created")
    wait_copied(run, "r")
    pg.execute("UPDATE r SET c = 'after the copy' WHERE id = 100")
    wait_flushed(run, pg)
    run.stop()

    log = run.log_text()
    assert "not an Iceberg promotion" not in log and "added as field" not in log, \
        run.log_tail()
    assert [f.name for f in run.load("public.r").schema().fields] == fields_before
    changes = [(r["cdc_op"], r["b"], r["c"]) for r in run.rows(duckdb_con, "public.r")
               if r["id"] == 100 and r["cdc_source_tx_id"] is not None]
    assert changes == [("c", 7, "new"), ("u", 8, "new"), ("u", 8, "after the copy")], \
        changes
    silver(run)
    check_silver(run, pg, duckdb_con, "public.r", ["id"])


def test_a_long_slot_name_still_copies_tables(floe, pg, duckdb_con):
    """Code-read (b): the temporary copy slot's name stays within 63 bytes."""
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO t SELECT g, 'v' FROM generate_series(1, 10) g")
    run = floe(service=SERVICE, slot="s" * 63).start()
    run.wait_streaming()
    pg.execute("INSERT INTO t VALUES (11, 'w')")
    wait_flushed(run, pg)
    assert sorted(r["id"] for r in run.rows_pyiceberg("public.t")) == list(range(1, 12))


def test_a_retyped_or_dropped_column_looks_like_the_source_in_silver(floe, pg,
                                                                     duckdb_con):
    """#8: after ALTER COLUMN code TYPE int USING code::int (a change Iceberg cannot
    promote: Bronze writes code__int) Silver's column `code` is an int holding every
    row's current value, and a dropped column leaves Silver's current schema."""
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, code text, note text, gone int)")
    pg.execute("INSERT INTO acc SELECT g, (g * 7)::text, 'n' || g, g FROM "
               "generate_series(1, 40) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("UPDATE acc SET note = 'before' WHERE id <= 5")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.acc", ["id"])

    with pg.connect(autocommit=False) as c:
        c.execute("ALTER TABLE acc ALTER COLUMN code TYPE int USING code::int")
        c.execute("UPDATE acc SET note = 'retyped' WHERE id = 3")
        c.commit()
    pg.execute("ALTER TABLE acc DROP COLUMN gone")
    pg.execute("UPDATE acc SET code = -1 WHERE id = 4")
    pg.execute("DELETE FROM acc WHERE id = 5")
    run.wait_until(lambda: "copied again" in run.log_text() or
                   "copied public.acc" in run.log_text().split("retyped")[-1],
                   what="the copy after the type change")
    wait_flushed(run, pg)
    wait_copied(run, "acc")
    silver(run)
    t = run.catalog().load_table(silver_ident("public.acc"))
    types = {f.name: str(f.field_type) for f in t.schema().fields}
    assert types == {"id": "int", "code": "int", "note": "string",
                     "cdc_commit_lsn": "long"}, types
    check_silver(run, pg, duckdb_con, "public.acc", ["id"])
    # Merges after it go on as usual.
    pg.execute("UPDATE acc SET code = code + 1000 WHERE id % 4 = 0")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.acc", ["id"])


def test_detached_and_attached_partitions_leave_and_join_silver(floe, pg, duckdb_con):
    """#9: with publish_via_partition_root = true, DETACH PARTITION takes its rows out
    of the root table and ATTACH PARTITION brings a table's existing rows in, with no
    change in the WAL stream; Silver's ev equals the source's ev after each."""
    pg.execute("CREATE TABLE ev (id int, region text, v text, PRIMARY KEY (id, region)) "
               "PARTITION BY LIST (region)")
    pg.execute("CREATE TABLE ev_us PARTITION OF ev FOR VALUES IN ('us')")
    pg.execute("CREATE TABLE ev_eu PARTITION OF ev FOR VALUES IN ('eu')")
    pg.execute("INSERT INTO ev SELECT g, CASE WHEN g % 2 = 0 THEN 'us' ELSE 'eu' END, "
               "'v' || g FROM generate_series(1, 22) g")
    pg.execute("CREATE PUBLICATION evpub FOR TABLE ev WITH (publish_via_partition_root = "
               "true)")
    run = floe(service=SERVICE, publication="evpub").start()
    run.wait_streaming()
    pg.execute("UPDATE ev SET v = 'moved', region = 'us' WHERE id = 1")  # cross-partition
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.ev", ["id", "region"])

    pg.execute("ALTER TABLE ev DETACH PARTITION ev_us")
    pg.execute("UPDATE ev SET v = 'after detach' WHERE id = 3")
    run.wait_until(lambda: "had partitions attached" in run.log_text(),
                   timeout=60, what="floe to notice the detached partition")
    wait_flushed(run, pg)
    run.wait_until(lambda: sum(r["cdc_op"] == "t" for r in run.rows_pyiceberg("public.ev"))
                   >= 1, what="the copy after the detach")
    silver(run)
    assert pg.execute("SELECT count(*) FROM ev")[0][0] == 10  # the 10 eu rows; ev_us took 12
    check_silver(run, pg, duckdb_con, "public.ev", ["id", "region"])

    pg.execute("CREATE TABLE ev_ap (id int, region text, v text, PRIMARY KEY (id, region))")
    pg.execute("INSERT INTO ev_ap SELECT g, 'ap', 'ap' || g FROM generate_series(100, 104) g")
    pg.execute("ALTER TABLE ev ATTACH PARTITION ev_ap FOR VALUES IN ('ap')")
    run.wait_until(lambda: run.log_text().count("had partitions attached") >= 2,
                   timeout=60, what="floe to notice the attached partition")
    wait_flushed(run, pg)
    run.wait_until(lambda: sum(r["cdc_op"] == "t" for r in run.rows_pyiceberg("public.ev"))
                   >= 2, what="the copy after the attach")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.ev", ["id", "region"])

    # Detached, changed behind the stream's back and attached again: the same set of
    # partitions as before (found by the break-it pass).
    with pg.connect(autocommit=False) as c:
        c.execute("ALTER TABLE ev DETACH PARTITION ev_eu")
        c.execute("UPDATE ev_eu SET v = 'changed while detached'")
        c.execute("DELETE FROM ev_eu WHERE id < 8")
        c.execute("ALTER TABLE ev ATTACH PARTITION ev_eu FOR VALUES IN ('eu')")
        c.commit()
    run.wait_until(lambda: run.log_text().count("had partitions attached") >= 3,
                   timeout=60, what="floe to notice the partition detached and attached")
    wait_flushed(run, pg)
    run.wait_until(lambda: sum(r["cdc_op"] == "t" for r in run.rows_pyiceberg("public.ev"))
                   >= 3, what="the copy after the round trip")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.ev", ["id", "region"])

    # One partition truncated on its own: under publish_via_partition_root PostgreSQL
    # sends nothing for it (its new relfilenode gives it away).
    pg.execute("TRUNCATE ev_ap")
    run.wait_until(lambda: run.log_text().count("had partitions attached") >= 4,
                   timeout=60, what="floe to notice the truncated partition")
    wait_flushed(run, pg)
    run.wait_until(lambda: sum(r["cdc_op"] == "t" for r in run.rows_pyiceberg("public.ev"))
                   >= 4, what="the copy after the truncate")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.ev", ["id", "region"])


def test_floe_run_commits_again_after_its_postgres_catalog_restarts(floe, pg, tmp_path):
    """Code-read (a): the PostgreSQL catalog's connection is opened again after the
    catalog server restarts; floe run commits the changes made around the restart."""
    from pyiceberg.catalog.sql import SqlCatalog

    from pgcluster import PgCluster

    catalog_server = PgCluster().start()
    try:
        catalog_dsn = catalog_server.dsn()
        pg.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        run = floe(service=SERVICE, extra_yaml=(
            "catalog:\n  type: postgres\n"
            f"  conninfo: \"{catalog_dsn}\"\n"))
        run.start()
        run.wait_streaming()
        pg.execute("INSERT INTO t SELECT g, 'a' FROM generate_series(1, 10) g")
        wait_flushed(run, pg)
        catalog_server.restart()
        pg.execute("INSERT INTO t SELECT g, 'b' FROM generate_series(11, 20) g")
        wait_flushed(run, pg, timeout=120)
        py = SqlCatalog("floe", uri=f"postgresql+psycopg://postgres@127.0.0.1:"
                                    f"{catalog_server.port}/postgres")
        rows = py.load_table(("bronze", SERVICE, "public", "t")).scan().to_arrow()
        assert sorted(rows.column("id").to_pylist()) == list(range(1, 21))
        run.check_alive()
        # The catalog's notices on its own tables when floe opens it again ("relation
        # iceberg_tables already exists, skipping") are not in floe's log.
        run.stop()
        run.start().wait_streaming()
        run.stop()
        assert "NOTICE" not in run.log_text()
    finally:
        catalog_server.destroy()


def test_a_malformed_catalog_conninfo_never_shows_its_password(tool):
    """Code-read (g): libpq's parse errors quote the text around the fault."""
    import json
    import subprocess

    for conninfo in ("host=127.0.0.1 password=s3cret Pa55word",
                     "host=127.0.0.1 password='s3cret-Pa55word",
                     "postgresql://u:s3cret-Pa55word@127.0.0.1:5432/db?x=%zz",
                     "postgresql://u:s3cret-Pa55word%zz@127.0.0.1:5432/db"):
        out = subprocess.run([str(tool("catalog_tool")), "--pg", conninfo,
                              "list-namespaces"], capture_output=True, text=True)
        assert out.returncode != 0
        assert "s3cret" not in out.stdout + out.stderr and \
            "Pa55word" not in out.stdout + out.stderr, out.stdout + out.stderr
        assert "malformed" in json.loads(out.stdout)["error"], out.stdout


def test_a_key_change_during_the_backfill_of_a_toasted_table_keeps_the_value(
        floe, pg, duckdb_con):
    """A table added to the publication while floe streams is backfilled; a
    key-changing update inside a chunk's window sends no unchanged TOAST value, so it
    is no whole row: the key is selected again and Silver has the value."""
    pg.execute("CREATE TABLE other (id int PRIMARY KEY)")
    pg.execute("CREATE TABLE docs (id int PRIMARY KEY, title text, body text)")
    pg.execute("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")
    pg.execute(f"INSERT INTO docs SELECT g, 't' || g, {BIG} FROM generate_series(1, 40) g")
    pg.execute("CREATE PUBLICATION docpub FOR TABLE other")
    run = floe(service=SERVICE, publication="docpub",
               extra_yaml="").start()
    run.wait_streaming()
    with pg.connect() as c:
        c.execute("ALTER PUBLICATION docpub ADD TABLE docs")
        for i in range(1, 41, 3):
            c.execute("UPDATE docs SET id = id + 1000 WHERE id = %s", (i,))
    run.wait_until(lambda: run.exists("public.docs"), what="Bronze docs")
    wait_flushed(run, pg)
    run.wait_until(lambda: "backfilled" in run.log_text() or "copied public.docs"
                   in run.log_text(), timeout=90, what="the backfill of public.docs")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.docs", ["id"])


def test_remove_orphans_never_takes_an_enclosing_tables_files(floe, pg, duckdb_con):
    """A source schema named `quarantine` puts Bronze tables `quarantine.metadata` and
    `quarantine.data` in the quarantine table's own metadata/ and data/ directories;
    remove-orphans of those tables must not take the quarantine table's files for
    theirs (found by the independent break-it pass)."""
    pg.execute("CREATE SCHEMA quarantine")
    for t in ("metadata", "data"):
        pg.execute(f"CREATE TABLE quarantine.{t} (id int PRIMARY KEY, v text)")
        pg.execute(f"INSERT INTO quarantine.{t} SELECT g, 'v' FROM generate_series(1, 5) g")
    pg.execute("CREATE TABLE ts (id int PRIMARY KEY, at timestamp)")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("INSERT INTO ts VALUES (1, 'infinity')")  # goes to the quarantine
    wait_flushed(run, pg)
    silver(run)
    quarantine = ("bronze", SERVICE, "quarantine")
    run.wait_until(lambda: run.catalog().table_exists(quarantine), what="the quarantine")
    before = run.catalog().load_table(quarantine).scan().to_arrow().num_rows
    assert before == 1
    run.stop()
    for p in run.warehouse.rglob("*"):
        if p.is_file() and not p.name.startswith("catalog.db"):
            os.utime(p, (time.time() - 4 * 24 * 3600,) * 2)
    out = maint(run, "remove-orphans")
    assert "removed 0 orphan file(s)" in out and "removed 1" not in out, out
    q = run.catalog().load_table(quarantine)
    assert q.scan().to_arrow().num_rows == 1
    path = q.metadata_location.removeprefix("file://")
    assert duckdb_con.execute("SELECT count(*) FROM iceberg_scan(?)", [path]).fetchone()[0] == 1
    for t in ("metadata", "data"):
        check_silver(run, pg, duckdb_con, ("quarantine", t), ["id"])


def test_a_retyped_key_column_says_how_to_rebuild_silver(floe, pg, duckdb_con):
    """A key column retyped in a way Iceberg cannot promote: Silver cannot re-key in
    place; the pass fails for that table with the fix, and after dropping the Silver
    table the next pass rebuilds it equal to the source."""
    pg.execute("CREATE TABLE k (id text PRIMARY KEY, v text)")
    pg.execute("INSERT INTO k SELECT g::text, 'v' FROM generate_series(1, 10) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    silver(run)
    pg.execute("ALTER TABLE k ALTER COLUMN id TYPE int USING id::int")
    pg.execute("UPDATE k SET v = 'u' WHERE id = 1")
    wait_flushed(run, pg)
    run.wait_until(lambda: "floe.source.recopy-pending" not in
                   run.catalog().load_table(("bronze", SERVICE, "public", "k")).properties,
                   what="the copy to commit")
    out = silver(run, expect_rc=1)
    assert "cannot change its key in place: drop the Silver table" in out, out
    run.catalog().drop_table(silver_ident("public.k"))
    silver(run)
    check_silver(run, pg, duckdb_con, "public.k", ["id"])


def test_odd_key_names_and_a_column_named_like_a_cdc_column(floe, pg, duckdb_con):
    """Found by the differential test: a key column named with non-ASCII, a space or a
    quote (its bucket partition field's name is no Avro name), and a source column
    named cdc_commit_lsn (Silver's debugging column)."""
    pg.execute('CREATE TABLE a ("Kéy" int PRIMARY KEY, v text)')
    pg.execute('CREATE TABLE b ("key col" text, "k""q" int, v text, '
               'PRIMARY KEY ("key col", "k""q"))')
    pg.execute('CREATE TABLE c (id int PRIMARY KEY, cdc_commit_lsn int, "a.b" text)')
    pg.execute("INSERT INTO a SELECT g, 'x' FROM generate_series(1, 20) g")
    pg.execute("INSERT INTO b SELECT 'k' || g, g, 'x' FROM generate_series(1, 20) g")
    pg.execute("INSERT INTO c SELECT g, g * 10 FROM generate_series(1, 20) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    for _ in range(2):
        pg.execute('UPDATE a SET v = v || \'+\' WHERE "Kéy" % 3 = 0')
        pg.execute('DELETE FROM b WHERE "k""q" % 5 = 0')
        pg.execute("UPDATE c SET cdc_commit_lsn = -cdc_commit_lsn WHERE id % 4 = 0" if _ == 0
                   else "UPDATE c SET cdc_commit_lsn = cdc_commit_lsn || '!' WHERE id % 4 = 0")
        wait_flushed(run, pg)
        silver(run)
        check_silver(run, pg, duckdb_con, "public.a", ["Kéy"])
        check_silver(run, pg, duckdb_con, "public.b", ["key col", 'k"q'])
        check_silver(run, pg, duckdb_con, "public.c", ["id"])
        # A dropped column named like a nested path leaves Silver's schema too, and
        # the source's cdc_commit_lsn retyped beyond promotion replaces Silver's.
        pg.execute('ALTER TABLE c DROP COLUMN IF EXISTS "a.b"')
        if _ == 0:
            pg.execute("ALTER TABLE c ALTER COLUMN cdc_commit_lsn TYPE text "
                       "USING cdc_commit_lsn::text")
            pg.execute("UPDATE c SET cdc_commit_lsn = 'x' WHERE id = 2")
            run.wait_until(lambda: "floe.source.recopy-pending" not in run.catalog()
                           .load_table(("bronze", SERVICE, "public", "c")).properties,
                           what="the copy after the retype")


def test_a_column_added_under_silvers_debugging_column_name_replaces_it(floe, pg,
                                                                        duckdb_con):
    """Found by make soak: ADD COLUMN cdc_commit_lsn on a table whose Silver table
    already has its debugging column of that name."""
    pg.execute("CREATE TABLE d (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO d SELECT g, 'v' FROM generate_series(1, 10) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    silver(run)
    pg.execute("ALTER TABLE d ADD COLUMN cdc_commit_lsn timestamptz")
    pg.execute("UPDATE d SET cdc_commit_lsn = '2026-01-02 03:04:05+00' WHERE id <= 3")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.d", ["id"])


def bronze_columns(run, table: str) -> list[str]:
    t = run.catalog().load_table(("bronze", SERVICE, *table.split(".")))
    return [f.name for f in t.schema().fields if not f.name.startswith("cdc_")]


def test_a_rename_replayed_after_a_restart_keeps_the_columns_values(floe, pg,
                                                                      duckdb_con):
    """A column renamed, then floe restarted from a slot position before the rename
    (a SIGKILL between a checkpoint's commit and its flush does that): the stream
    replays changes Bronze holds, described with the old column name. That old
    shape must not re-bind Bronze's columns (before the fix it was taken for a drop
    and an add: the column's values went null in Silver for every row not changed
    since). A second slot created before the rename makes the replay certain."""
    pg.execute("CREATE TABLE ren (id int PRIMARY KEY, a text, b int)")
    pg.execute("INSERT INTO ren SELECT g, 'a' || g, g FROM generate_series(1, 30) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("SELECT pg_create_logical_replication_slot('floe_behind', 'pgoutput')")
    pg.execute("UPDATE ren SET b = b + 100 WHERE id <= 3")  # replayed, old shape
    pg.execute("ALTER TABLE ren RENAME COLUMN a TO a2")
    pg.execute("UPDATE ren SET b = b + 100 WHERE id BETWEEN 4 AND 6")
    wait_flushed(run, pg)
    run.stop()
    assert bronze_columns(run, "public.ren") == ["id", "a2", "b"]

    # The same pipeline and slot name, the slot put back where the other stayed
    # (floe refuses a Bronze fed from another slot's name).
    pg.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
    pg.execute("SELECT pg_copy_logical_replication_slot('floe_behind', %s)", (run.slot,))
    pg.execute("SELECT pg_drop_replication_slot('floe_behind')")
    run.start()
    run.wait_streaming()
    pg.execute("UPDATE ren SET b = -1 WHERE id = 7")
    wait_flushed(run, pg)
    run.stop()
    assert bronze_columns(run, "public.ren") == ["id", "a2", "b"]
    # Nothing replayed twice.
    rows = run.rows_pyiceberg("public.ren")
    updates = sorted(r["id"] for r in rows if r["cdc_op"] == "u")
    assert updates == [1, 2, 3, 4, 5, 6, 7], updates
    silver(run)
    check_silver(run, pg, duckdb_con, "public.ren", ["id"])


def test_renames_made_while_floe_was_stopped_bind_each_column_right(floe, pg,
                                                                   duckdb_con):
    """While floe is stopped: a change, then `a` renamed to `b` and `c` to `a`, then
    another change. At restart the stream describes the first change with the old
    names, but the catalog already has the new ones; its `a` is the old `c`. Before
    the fix the old `a` got the old `c`'s attnum, and Bronze wrote a's values into
    c's column."""
    pg.execute("CREATE TABLE sw (id int PRIMARY KEY, a text, c int)")
    pg.execute("INSERT INTO sw SELECT g, 'a' || g, g FROM generate_series(1, 20) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    pg.execute("UPDATE sw SET a = 'old shape', c = -1 WHERE id = 1")
    pg.execute("ALTER TABLE sw RENAME COLUMN a TO b")
    pg.execute("ALTER TABLE sw RENAME COLUMN c TO a")
    pg.execute("UPDATE sw SET b = 'new shape', a = -2 WHERE id = 2")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    rows = [r for r in run.rows_pyiceberg("public.sw") if r["cdc_op"] == "u"]
    by_id = {r["id"]: r for r in rows}
    assert by_id[1]["b"] == "old shape" and by_id[1]["a"] == -1, by_id[1]
    assert by_id[2]["b"] == "new shape" and by_id[2]["a"] == -2, by_id[2]
    silver(run)
    check_silver(run, pg, duckdb_con, "public.sw", ["id"])


def test_names_swapped_twice_while_floe_lags_are_not_bound_by_name(floe, pg, duckdb_con):
    """Two transactions, each swapping two column names and updating a row, read once
    the catalog has moved past both (floe stopped meanwhile; or simply lagging): the
    first one's description has the same names as Bronze's bindings, in another
    order, and the catalog cannot give the attnums. Bound by name, its values went
    under the other names and a later pair of renames rotated three columns:
    Silver held b = B-0 and c = A-0 where the source has A-0 and B-0 (found by the
    break-it pass). Names in another order cannot be undone: the table is copied
    again, and Silver equals the source."""
    pg.execute("CREATE TABLE sw2 (id int PRIMARY KEY, a text, b text, c text)")
    pg.execute("INSERT INTO sw2 SELECT g, 'a' || g, 'b' || g, 'c' || g "
               "FROM generate_series(1, 20) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    run.stop()
    with pg.connect(autocommit=False) as c:
        for statement in ["ALTER TABLE sw2 RENAME a TO tmp", "ALTER TABLE sw2 RENAME b TO a",
                          "ALTER TABLE sw2 RENAME tmp TO b",
                          "UPDATE sw2 SET b = 'A-0', a = 'B-0', c = 'C-0' WHERE id = 1"]:
            c.execute(statement)
        c.commit()
        for statement in ["ALTER TABLE sw2 RENAME c TO tmp", "ALTER TABLE sw2 RENAME a TO c",
                          "ALTER TABLE sw2 RENAME tmp TO a",
                          "UPDATE sw2 SET b = 'A-1', c = 'B-1', a = 'C-1' WHERE id = 2"]:
            c.execute(statement)
        c.commit()
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    wait_copied(run, "sw2")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.sw2", ["id"])
    assert "names swapped between columns" in run.log_text(), run.log_tail()
    run.stop()


def test_two_toast_columns_swapped_and_swapped_back_keep_their_values(floe, pg,
                                                                    duckdb_con):
    """An update leaves b1 unchanged (TOAST, listed by name in cdc_unchanged); then
    b1 and b2 swap names, and swap back, each with an update. The older change's
    `b1` is the column that had the name then. The bindings forgot a name a column
    took back, so the other column, which held it in between, was taken: Silver had
    b1 null and b2 the old body, and the update's 'small' was lost (found by the
    break-it pass)."""
    pg.execute("CREATE TABLE sb (id int PRIMARY KEY, n int, b1 text, b2 text)")
    pg.execute("ALTER TABLE sb ALTER COLUMN b1 SET STORAGE EXTERNAL, "
               "ALTER COLUMN b2 SET STORAGE EXTERNAL")
    pg.execute(f"INSERT INTO sb SELECT g, 0, {BIG}, {BIG} FROM generate_series(1, 3) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("UPDATE sb SET n = n + 1, b2 = 'small' WHERE id = 1")
    for row in (2, 3):
        with pg.connect(autocommit=False) as c:
            for statement in ["ALTER TABLE sb RENAME b1 TO tmp", "ALTER TABLE sb RENAME b2 TO b1",
                              "ALTER TABLE sb RENAME tmp TO b2",
                              f"UPDATE sb SET n = n + 1 WHERE id = {row}"]:
                c.execute(statement)
            c.commit()
        wait_flushed(run, pg)
        silver(run)
        check_silver(run, pg, duckdb_con, "public.sb", ["id"])
        # verify's own fold of Bronze reads the older change's name as the merge
        # does (it reported DIFFERENT after the first swap, Silver being right).
        out = silver_tool(run, "verify", str(run.config_path), "--table", "public.sb")
        assert "Silver vs fold(Bronze <= watermark): OK" in out, out
    run.stop()


def test_a_column_added_with_a_default_reaches_every_silver_row(floe, pg, duckdb_con):
    """ADD COLUMN ... DEFAULT gives every existing row the default (a constant one
    without touching them, a volatile one or an identity by rewriting the table);
    logical decoding sends none of it. The table is copied again, and Silver has the
    value in every row. A column added without a default is no reason to copy."""
    pg.execute("CREATE TABLE addc (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO addc SELECT g, 'v' || g FROM generate_series(1, 25) g")
    pg.execute("CREATE TABLE plain (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO plain SELECT g, 'v' || g FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    pg.execute("ALTER TABLE plain ADD COLUMN extra int")
    pg.execute("UPDATE plain SET extra = 1 WHERE id = 1")
    pg.execute("ALTER TABLE addc ADD COLUMN n int NOT NULL DEFAULT 7")
    pg.execute("ALTER TABLE addc ADD COLUMN r float8 DEFAULT random()")
    pg.execute("ALTER TABLE addc ADD COLUMN s int GENERATED ALWAYS AS IDENTITY")
    pg.execute("UPDATE addc SET v = 'changed' WHERE id = 1")
    run.wait_until(lambda: "public.addc: column(s) changed" in run.log_text(),
                   what="the copy after ADD COLUMN ... DEFAULT")
    wait_flushed(run, pg)
    wait_copied(run, "addc")
    pg.execute("UPDATE addc SET n = 8 WHERE id = 2")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.addc", ["id"])
    check_silver(run, pg, duckdb_con, "public.plain", ["id"])
    assert "public.plain: column(s) changed" not in run.log_text()


def test_renames_swaps_dotted_names_and_a_renamed_key_follow_the_source(floe, pg,
                                                                        duckdb_con):
    """Silver follows renames by field id: two columns swapping names in one
    transaction, a column named `a.b` renamed and promoted (a dotted path cannot name
    it), and a primary-key column renamed (the same key under a new name, not a new
    key). Before the fix each failed every `floe silver` pass."""
    pg.execute('CREATE TABLE rn (id int PRIMARY KEY, x text, y text, "a.b" int)')
    pg.execute("INSERT INTO rn SELECT g, 'x' || g, 'y' || g, g FROM "
               "generate_series(1, 20) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rn", ["id"])
    with pg.connect(autocommit=False) as c:
        c.execute("ALTER TABLE rn RENAME COLUMN x TO tmp")
        c.execute("ALTER TABLE rn RENAME COLUMN y TO x")
        c.execute("ALTER TABLE rn RENAME COLUMN tmp TO y")
        c.execute('ALTER TABLE rn RENAME COLUMN "a.b" TO "c.d"')
        c.execute('ALTER TABLE rn ALTER COLUMN "c.d" TYPE bigint')
        c.execute("ALTER TABLE rn RENAME COLUMN id TO rn_id")
        c.execute("UPDATE rn SET x = 'new x', \"c.d\" = 5000000000 WHERE rn_id = 1")
        c.commit()
    wait_flushed(run, pg)
    out = silver(run)
    t = run.catalog().load_table(silver_ident("public.rn"))
    names = [f.name for f in t.schema().fields]
    assert names[:4] == ["rn_id", "y", "x", "c.d"] or \
        sorted(names) == sorted(["rn_id", "x", "y", "c.d", "cdc_commit_lsn"]), (names, out)
    check_silver(run, pg, duckdb_con, "public.rn", ["rn_id"])
    # Renames are no reason to copy the table again (the key is the same key).
    assert "in a way logical decoding does not send" not in run.log_text()
    pg.execute("DELETE FROM rn WHERE rn_id = 2")
    pg.execute("UPDATE rn SET y = 'later' WHERE rn_id = 3")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rn", ["rn_id"])


def test_a_new_row_key_copies_the_table_so_a_rebuilt_silver_drops_no_delete(
        floe, pg, duckdb_con):
    """The key every change carries changes (REPLICA IDENTITY USING INDEX on a unique
    index that is not the primary key): Bronze's older deletes carry only the old key.
    Bronze is copied again (a `t` row), so the Silver table, rebuilt with the new key
    by the merge, starts from that copy; before the fix the rebuilt table held the
    deleted rows again (and before that, Silver refused the new key until dropped by
    hand)."""
    pg.execute("CREATE TABLE rk (id int PRIMARY KEY, email text NOT NULL UNIQUE, v text)")
    pg.execute("INSERT INTO rk SELECT g, 'u' || g || '@x', 'v' || g FROM "
               "generate_series(1, 30) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("DELETE FROM rk WHERE id <= 5")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rk", ["id"])

    pg.execute("ALTER TABLE rk REPLICA IDENTITY USING INDEX rk_email_key")
    pg.execute("UPDATE rk SET v = 'after' WHERE id = 6")
    run.wait_until(lambda: "the key every change carries changed" in run.log_text(),
                   what="the copy after the key change")
    wait_flushed(run, pg)
    wait_copied(run, "rk")
    pg.execute("DELETE FROM rk WHERE id = 7")
    wait_flushed(run, pg)
    out = silver(run)
    assert "rebuilding the Silver table with the new key" in out, out
    check_silver(run, pg, duckdb_con, "public.rk", ["email"])


def test_a_declared_merge_key_a_delete_does_not_carry_is_refused(floe, pg, duckdb_con):
    """silver.keys naming a column a DELETE does not carry (the replica identity is
    the primary key) would leave every deleted row in Silver: the merge is refused with
    the fix; under REPLICA IDENTITY FULL the same key merges, deletes included."""
    pg.execute("CREATE TABLE dk (id int PRIMARY KEY, email text NOT NULL, v text)")
    pg.execute("INSERT INTO dk SELECT g, 'u' || g, 'v' || g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE,
               extra_yaml="silver:\n  keys:\n    public.dk: [email]\n").start()
    run.wait_streaming()
    pg.execute("DELETE FROM dk WHERE id = 1")
    wait_flushed(run, pg)
    out = silver(run, None, expect_rc=1)
    assert "a DELETE carries only" in out and "REPLICA IDENTITY FULL" in out, out
    assert not run.catalog().table_exists(silver_ident("public.dk"))

    # A delete now carries every column: the deletes Bronze holds do not (id 1's
    # has no email), so the table is copied again first.
    pg.execute("ALTER TABLE dk REPLICA IDENTITY FULL")
    pg.execute("DELETE FROM dk WHERE id = 2")
    pg.execute("UPDATE dk SET v = 'full' WHERE id = 3")
    run.wait_until(lambda: "a delete now carries" in run.log_text(),
                   what="the copy after REPLICA IDENTITY FULL")
    wait_flushed(run, pg)
    wait_copied(run, "dk")
    pg.execute("DELETE FROM dk WHERE id = 4")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.dk", ["email"])


def test_an_unchanged_toast_value_survives_a_rename_of_its_column(floe, pg, duckdb_con):
    """An update that leaves a TOASTed column alone (Bronze lists it in cdc_unchanged
    by its name then), then that column renamed, both in one Silver increment: the
    merge must still keep the value (before the fix the old name matched no column and
    the row's value went null)."""
    pg.execute("CREATE TABLE tr (id int PRIMARY KEY, title text, body text)")
    pg.execute("ALTER TABLE tr ALTER COLUMN body SET STORAGE EXTERNAL")
    pg.execute(f"INSERT INTO tr SELECT g, 't' || g, {BIG} FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    pg.execute("UPDATE tr SET title = 'retitled' WHERE id = 2")
    pg.execute("ALTER TABLE tr RENAME COLUMN body TO content")
    pg.execute("UPDATE tr SET title = 'after' WHERE id = 3")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.tr", ["id"])


def test_a_toast_columns_old_name_taken_by_a_new_column_keeps_the_value(floe, pg,
                                                                       duckdb_con):
    """An update that leaves TOASTed `body` alone (Bronze lists `body` in
    cdc_unchanged), then `body` renamed to `content` and a new `body` added, all in one
    Silver increment: the older change's `body` is `content` (before, the current name
    won, and `content` went null in Silver)."""
    pg.execute("CREATE TABLE reused (id int PRIMARY KEY, title text, body text)")
    pg.execute("ALTER TABLE reused ALTER COLUMN body SET STORAGE EXTERNAL")
    pg.execute(f"INSERT INTO reused SELECT g, 't' || g, {BIG} FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    pg.execute("UPDATE reused SET title = 'retitled' WHERE id = 2")
    with pg.connect(autocommit=False) as c:
        c.execute("UPDATE reused SET title = 'same tx' WHERE id = 4")
        c.execute("ALTER TABLE reused RENAME COLUMN body TO content")
        c.execute("ALTER TABLE reused ADD COLUMN body text")
        c.execute("UPDATE reused SET title = 'after', body = 'new' WHERE id = 3")
        c.commit()
    pg.execute("UPDATE reused SET title = 'later' WHERE id = 5")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.reused", ["id"])
    # And once more after a restart (the last positions come from Bronze's commit).
    run.stop()
    pg.execute("UPDATE reused SET title = 'stopped' WHERE id = 1")
    pg.execute("ALTER TABLE reused RENAME COLUMN content TO text_body")
    pg.execute("ALTER TABLE reused RENAME COLUMN body TO content")
    run.start()
    run.wait_streaming()
    pg.execute("UPDATE reused SET title = 'again' WHERE id = 2")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.reused", ["id"])


def test_a_column_renamed_or_dropped_and_a_new_one_added_under_its_name(floe, pg,
                                                                       duckdb_con):
    """While floe is stopped, after a change: `b` renamed to `c` and a new `b` added
    (table q1), or `b` dropped and added again (table q2). The stream describes the
    first change with the old `b`, and the catalog's `b` is the new column (found by
    the break-it pass: `c` lost its values, or the old value showed in the new `b`)."""
    for t in ("q1", "q2"):
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, a text, b text)")
        pg.execute(f"INSERT INTO {t} SELECT g, 'a' || g, 'b' || g FROM "
                   "generate_series(1, 10) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    run.stop()
    pg.execute("UPDATE q1 SET b = 'pre' WHERE id = 1")
    pg.execute("ALTER TABLE q1 RENAME COLUMN b TO c")
    pg.execute("ALTER TABLE q1 ADD COLUMN b text")
    pg.execute("UPDATE q1 SET b = 'post' WHERE id = 2")
    pg.execute("UPDATE q2 SET b = 'pre' WHERE id = 1")
    pg.execute("ALTER TABLE q2 DROP COLUMN b")
    pg.execute("ALTER TABLE q2 ADD COLUMN b text")
    pg.execute("UPDATE q2 SET b = 'post' WHERE id = 2")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    for t in ("q1", "q2"):
        wait_copied(run, t)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.q1", ["id"])
    check_silver(run, pg, duckdb_con, "public.q2", ["id"])


def test_an_update_of_a_declared_key_under_replica_identity_full_moves_the_row(
        floe, pg, duckdb_con):
    """silver.keys declares `code` (not the primary key) and the table has REPLICA
    IDENTITY FULL: an update changing `code` must leave no row under the old code in
    Silver (before the fix Bronze wrote a plain update, keyed by the primary key, and
    the old code's row stayed)."""
    pg.execute("CREATE TABLE kc (id int PRIMARY KEY, code text NOT NULL, v text)")
    pg.execute("ALTER TABLE kc REPLICA IDENTITY FULL")
    pg.execute("INSERT INTO kc SELECT g, 'c' || g, 'v' || g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE,
               extra_yaml="silver:\n  keys:\n    public.kc: [code]\n").start()
    run.wait_streaming()
    silver(run)
    pg.execute("UPDATE kc SET code = 'cc5', v = 'x' WHERE id = 5")
    pg.execute("UPDATE kc SET v = 'y' WHERE id = 6")
    pg.execute("DELETE FROM kc WHERE id = 7")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.kc", ["code"])


def test_a_declared_merge_key_that_is_null_is_refused_not_collapsed(floe, pg,
                                                                   duckdb_con):
    """silver.keys declares a nullable column: two source rows with a NULL there are
    one key to the merge, so Silver would silently keep one of them (before the fix it
    did). The merge is refused with the fix; once the source gives the rows keys, the
    next pass merges and Silver equals the source."""
    pg.execute("CREATE TABLE nk (id int PRIMARY KEY, code text, v text)")
    pg.execute("ALTER TABLE nk REPLICA IDENTITY FULL")
    pg.execute("INSERT INTO nk SELECT g, 'c' || g, 'v' || g FROM generate_series(1, 5) g")
    run = floe(service=SERVICE,
               extra_yaml="silver:\n  keys:\n    public.nk: [code]\n").start()
    run.wait_streaming()
    silver(run)
    pg.execute("INSERT INTO nk VALUES (6, NULL, 'six'), (7, NULL, 'seven')")
    pg.execute("UPDATE nk SET v = 'changed' WHERE id = 2")
    wait_flushed(run, pg)
    out = silver(run, None, expect_rc=1)
    assert "NULL in merge key column `code`: 2 change(s)" in out, out
    assert "silver.keys" in out, out
    pg.execute("UPDATE nk SET code = 'c' || id WHERE code IS NULL")
    pg.execute("ALTER TABLE nk ALTER COLUMN code SET NOT NULL")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.nk", ["code"])


def test_a_declared_merge_key_that_is_not_unique_is_refused_not_collapsed(
        floe, pg, duckdb_con):
    """silver.keys declares a column that two source rows share: in the copy (`nd`),
    or after an insert (`nu`). Silver silently kept one of them (before the fix it
    did); now the merge is refused and names the change. Once the duplicates are gone
    and a unique index keeps them so, `floe run --backfill-table` lets the next pass
    merge `nu`; `nd` (whose copy read two rows of a key) merges once silver.keys
    declares a unique key and floe run copies it again. Silver then equals the
    source."""
    from test_run_watermark import latest_backfill  # (it imports this module)

    pg.execute("""
        CREATE TABLE nu (id int PRIMARY KEY, email text NOT NULL, v text);
        ALTER TABLE nu REPLICA IDENTITY FULL;
        INSERT INTO nu SELECT g, 'e' || g, 'v' || g FROM generate_series(1, 20) g;
        CREATE TABLE nd (id int PRIMARY KEY, code text NOT NULL, v text);
        ALTER TABLE nd REPLICA IDENTITY FULL;
        INSERT INTO nd SELECT g, 'c' || (g % 7), 'v' || g FROM generate_series(1, 20) g;
    """)
    keys = "silver:\n  keys:\n    public.nu: [email]\n    public.nd: [{}]\n"
    run = floe(service=SERVICE, extra_yaml=keys.format("code")).start()
    run.wait_streaming()
    out = silver(run, None, expect_rc=1)
    assert "silver.keys (`code`) is not unique in the source" in out, out
    check_silver(run, pg, duckdb_con, "public.nu", ["email"])
    pg.execute("INSERT INTO nu VALUES (21, 'e3', 'dup')")
    pg.execute("UPDATE nu SET v = 'changed' WHERE id = 5")
    wait_flushed(run, pg)
    out = silver(run, None, expect_rc=1)
    assert "silver.keys (`email`) is not unique in the source" in out, out
    assert "--backfill-table" in out, out
    # Silver still holds what it held: the one row of e3 and v5's old value.
    check_silver(run, pg, duckdb_con, "public.nu", ["email"],
                 want=[{"id": g, "email": f"e{g}", "v": f"v{g}"} for g in range(1, 21)])
    pg.execute("DELETE FROM nu WHERE id = 21")
    pg.execute("CREATE UNIQUE INDEX ON nu (email)")
    run.stop()
    run.config_path.write_text(
        run.config_path.read_text().replace(keys.format("code"), keys.format("id")))
    run.start("--backfill-table", "public.nu")
    run.wait_streaming()
    run.wait_until(lambda: (latest_backfill(run, "public.nu") or {}).get("done"), 90,
                   what="the requested backfill of public.nu", interval=0.3)
    wait_copied(run, "nd")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.nu", ["email"])
    check_silver(run, pg, duckdb_con, "public.nd", ["id"])


def test_a_delete_carrying_a_nan_removes_the_row_that_holds_it(floe, pg, duckdb_con):
    """A deferrable unique key (break-it): a row whose float is NaN moves onto another
    row's key and away again in one transaction. The delete of that key carries the
    NaN (REPLICA IDENTITY FULL); NaN == NaN being false, it removed the other row
    instead, and Silver lost row 1 and held row 2 twice."""
    pg.execute("""
        CREATE TABLE fnan (id int PRIMARY KEY, code int NOT NULL, v text, f float8,
                           CONSTRAINT fnan_code UNIQUE (code) DEFERRABLE);
        ALTER TABLE fnan REPLICA IDENTITY FULL;
        INSERT INTO fnan VALUES (1, 10, 'a', 2.5), (2, 20, 'x', 'NaN'), (3, 40, 'c', 3.5);
    """)
    run = floe(service=SERVICE,
               extra_yaml="silver:\n  keys:\n    public.fnan: [code]\n").start()
    run.wait_streaming()
    silver(run)
    with pg.connect(autocommit=False) as c:
        c.execute("SET CONSTRAINTS ALL DEFERRED")
        c.execute("UPDATE fnan SET code = 10 WHERE id = 2")
        c.execute("UPDATE fnan SET code = 30 WHERE id = 2")
        c.commit()
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.fnan", ["code"])


def test_a_primary_key_change_under_a_declared_key_keeps_its_toast_values(
        floe, pg, duckdb_con):
    """silver.keys declares `code`; an update of the primary key only is written as a
    delete and an insert of the same merge key, the insert without the TOAST value the
    update left alone. It took no value (break-it: `big` went null in Silver)."""
    pg.execute(f"""
        CREATE TABLE pkm (id int PRIMARY KEY, code text NOT NULL, big text, small int);
        ALTER TABLE pkm ALTER COLUMN big SET STORAGE EXTERNAL;
        ALTER TABLE pkm REPLICA IDENTITY FULL;
        INSERT INTO pkm SELECT g, 'c' || g, {BIG}, g FROM generate_series(1, 5) g;
    """)
    run = floe(service=SERVICE,
               extra_yaml="silver:\n  keys:\n    public.pkm: [code]\n").start()
    run.wait_streaming()
    silver(run)
    pg.execute("UPDATE pkm SET id = id + 100 WHERE code = 'c1'")
    pg.execute("UPDATE pkm SET id = id + 100, small = 0 WHERE code = 'c2'")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.pkm", ["code"])
    # Its declared key moved afterwards: the merge and verify's own fold agree.
    pg.execute("UPDATE pkm SET code = 'moved1' WHERE code = 'c1'")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.pkm", ["code"])
    out = silver_tool(run, "verify", str(run.config_path), "--table", "public.pkm")
    assert "Silver vs fold(Bronze <= watermark): OK" in out, out


def test_a_column_added_by_a_rewrite_whose_default_is_dropped_at_once(floe, pg,
                                                                      duckdb_con):
    """`ADD COLUMN y timestamptz NOT NULL DEFAULT clock_timestamp()` then `DROP
    DEFAULT` (a common migration): the rewrite filled every row, and by the time floe
    looks, the catalog has no default left; the table's new relfilenode gives it away
    (found by the break-it pass: y read null in every Silver row)."""
    pg.execute("CREATE TABLE rw (id int PRIMARY KEY, a text)")
    pg.execute("INSERT INTO rw SELECT g, 'a' || g FROM generate_series(1, 15) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    pg.execute("UPDATE rw SET a = 'seen' WHERE id = 1")
    wait_flushed(run, pg)
    run.stop()
    pg.execute("ALTER TABLE rw ADD COLUMN y timestamptz NOT NULL DEFAULT clock_timestamp()")
    pg.execute("ALTER TABLE rw ALTER COLUMN y DROP DEFAULT")
    pg.execute("UPDATE rw SET a = 'v' WHERE id = 2")
    run.start()
    run.wait_streaming()
    run.wait_until(lambda: "public.rw: column(s) changed" in run.log_text(),
                   what="the copy after the rewrite")
    wait_flushed(run, pg)
    wait_copied(run, "rw")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rw", ["id"])


def test_a_rewrite_after_a_truncate_in_its_transaction_or_while_floe_lags(floe, pg,
                                                                          duckdb_con):
    """TRUNCATE, new rows, then `ADD COLUMN y ... DEFAULT clock_timestamp()` and `DROP
    DEFAULT`: in one transaction (t1), or in later transactions that floe reads only
    after all of them committed (t2, while floe is stopped). The catalog floe reads
    when it meets the TRUNCATE already holds the rewrite's relfilenode; taken for the
    truncate's, it hid the rewrite, and y read null in Silver's new rows."""
    for t in ("t1", "t2"):
        pg.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, a text)")
        pg.execute(f"INSERT INTO {t} SELECT g, 'a' || g FROM generate_series(1, 10) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    with pg.connect(autocommit=False) as c:
        c.execute("TRUNCATE t1")
        c.execute("INSERT INTO t1 SELECT g, 'new' || g FROM generate_series(1, 8) g")
        c.execute("ALTER TABLE t1 ADD COLUMN y timestamptz NOT NULL "
                  "DEFAULT clock_timestamp()")
        c.execute("ALTER TABLE t1 ALTER COLUMN y DROP DEFAULT")
        c.commit()
    pg.execute("UPDATE t1 SET a = 'touched' WHERE id = 1")
    wait_flushed(run, pg)
    run.stop()
    pg.execute("TRUNCATE t2")
    pg.execute("INSERT INTO t2 SELECT g, 'new' || g FROM generate_series(1, 8) g")
    pg.execute("ALTER TABLE t2 ADD COLUMN y timestamptz NOT NULL DEFAULT clock_timestamp()")
    pg.execute("ALTER TABLE t2 ALTER COLUMN y DROP DEFAULT")
    pg.execute("UPDATE t2 SET a = 'touched' WHERE id = 1")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    for t in ("t1", "t2"):
        wait_copied(run, t)
    silver(run)
    for t in ("t2", "t1"):
        check_silver(run, pg, duckdb_con, ("public", t), ["id"])


def test_a_key_renamed_while_floe_lags_behind_other_ddl_rebuilds_silver(floe, pg,
                                                                         duckdb_con):
    """The primary key renamed, then another column added, while floe is stopped: the
    shapes it replays disagree with the catalog, so the rename reads as a drop and an
    add, the key changes and floe run copies the table again. Silver then refused the
    new key until dropped by hand; now the merge rebuilds it (Bronze's copy replaces
    every row anyway)."""
    pg.execute("CREATE TABLE rk (id int PRIMARY KEY, a text)")
    pg.execute("INSERT INTO rk SELECT g, 'a' || g FROM generate_series(1, 12) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    silver(run)
    run.stop()
    pg.execute("UPDATE rk SET a = 'before' WHERE id = 1")
    pg.execute("ALTER TABLE rk RENAME COLUMN id TO kid")
    pg.execute("UPDATE rk SET a = 'renamed' WHERE kid = 2")
    pg.execute("ALTER TABLE rk ADD COLUMN b text")
    pg.execute("UPDATE rk SET b = 'added' WHERE kid = 3")
    pg.execute("DELETE FROM rk WHERE kid = 4")
    run.start()
    run.wait_streaming()
    wait_flushed(run, pg)
    wait_copied(run, "rk")
    out = silver(run)
    assert "rebuilding the Silver table with the new key" in out, out
    check_silver(run, pg, duckdb_con, "public.rk", ["kid"])
    pg.execute("UPDATE rk SET a = 'later' WHERE kid = 5")
    pg.execute("DELETE FROM rk WHERE kid = 6")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rk", ["kid"])


def test_two_source_tables_never_share_a_bronze_table(floe, pg, duckdb_con):
    """naming.tables maps public.a onto public.b's default Bronze name: one of the two
    is skipped and reported (log, metric), never interleaved with the other under one
    set of column bindings; the one replicated equals its source."""
    pg.execute("CREATE TABLE a (id int PRIMARY KEY, x text)")
    pg.execute("CREATE TABLE b (id int PRIMARY KEY, y int, z text)")
    pg.execute("INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 5) g")
    pg.execute("INSERT INTO b SELECT g, g, 'b' || g FROM generate_series(1, 7) g")
    run = floe(service=SERVICE, extra_yaml=(
        "naming:\n  tables:\n    public.a: {bronze: bronze.svc.public.b, "
        "silver: silver.svc.public.a}\n")).start()
    run.wait_until(lambda: "is the Bronze table of" in run.log_text(),
                   what="the clash to be reported")
    pg.execute("UPDATE a SET x = 'changed'")
    pg.execute("UPDATE b SET z = 'changed' WHERE id = 1")
    wait_flushed(run, pg)
    owner = run.catalog().load_table(("bronze", SERVICE, "public", "b")).properties[
        "floe.source.table"]
    assert owner in ("public.a", "public.b"), owner
    silver(run)
    if owner == "public.b":
        check_silver(run, pg, duckdb_con, "public.b", ["id"])
    else:
        t = run.catalog().load_table(("silver", SERVICE, "public", "a"))
        assert sorted(r["x"] for r in t.scan().to_arrow().to_pylist()) == ["changed"] * 5


def test_keys_shifted_or_swapped_by_one_statement_keep_every_row(floe, pg, duckdb_con):
    """`UPDATE t SET id = id + 1` under a deferrable key, a key swap in one statement and
    a deferred duplicate across statements hold two rows of one key for a moment:
    Bronze reads d1 c2 d2 c3 ..., and d2 deletes the row that was 2 before, not the one
    c2 made. Silver lost rows (and took TOAST values from the wrong row) before the fold
    followed each key's rows. In a backfill and in merges; also under a declared key."""
    # A deferrable key cannot be the replica identity: FULL is how such tables publish.
    pg.execute("CREATE TABLE shifted (id int PRIMARY KEY DEFERRABLE, title text, "
               "body text)")
    pg.execute("ALTER TABLE shifted REPLICA IDENTITY FULL")
    pg.execute("ALTER TABLE shifted ALTER COLUMN body SET STORAGE EXTERNAL")
    pg.execute(f"INSERT INTO shifted SELECT g, 't' || g, {BIG} "
               "FROM generate_series(1, 8) g")
    # A declared key that is unique in the data but not a constraint.
    pg.execute("CREATE TABLE coded (id int PRIMARY KEY, code int NOT NULL, body text)")
    pg.execute("ALTER TABLE coded REPLICA IDENTITY FULL")
    pg.execute("ALTER TABLE coded ALTER COLUMN body SET STORAGE EXTERNAL")
    pg.execute(f"INSERT INTO coded SELECT g, g, {BIG} FROM generate_series(1, 6) g")
    run = floe(service=SERVICE,
               extra_yaml="silver:\n  keys:\n    public.coded: [code]\n").start()
    run.wait_streaming()

    def shift():
        pg.execute("UPDATE shifted SET id = id + 1, title = title || '+'")
        pg.execute("UPDATE coded SET code = code + 1")

    shift()
    wait_flushed(run, pg)
    silver(run)  # backfills: the copy's rows, then the shift
    check_silver(run, pg, duckdb_con, "public.shifted", ["id"])
    check_silver(run, pg, duckdb_con, "public.coded", ["code"])

    shift()
    # A swap in one statement, body unchanged (sent as unchanged TOAST).
    pg.execute("UPDATE shifted SET id = CASE id WHEN 4 THEN 5 ELSE 4 END "
               "WHERE id IN (4, 5)")
    seventh = pg.execute("SELECT title FROM shifted WHERE id = 7")[0][0]
    with pg.connect(autocommit=False) as c:
        # A duplicate across statements: 6 moves onto 7, then the old 7 moves out.
        c.execute("SET CONSTRAINTS ALL DEFERRED")
        c.execute("UPDATE shifted SET id = 7 WHERE id = 6")
        c.execute("UPDATE shifted SET id = 60 WHERE id = 7 AND title = %s", (seventh,))
        # A new key inserted and deleted in one transaction.
        c.execute("INSERT INTO shifted VALUES (100, 'gone', 'x')")
        c.execute("DELETE FROM shifted WHERE id = 100")
        c.commit()
    (a, _), (b, b_title) = pg.execute(
        "SELECT id, title FROM shifted WHERE id BETWEEN 8 AND 9 ORDER BY id")
    with pg.connect(autocommit=False) as c:
        # A row parked on another's key and deleted there by its values (the delete
        # carries them all under FULL): the other row stays.
        c.execute("SET CONSTRAINTS ALL DEFERRED")
        c.execute("UPDATE shifted SET id = %s WHERE id = %s", (a, b))
        c.execute("DELETE FROM shifted WHERE id = %s AND title = %s", (a, b_title))
        c.commit()
    wait_flushed(run, pg)
    assert sum(r["cdc_unchanged"] == ["body"]
               for r in run.rows_pyiceberg("public.shifted")) >= 2, \
        "the test meant key changes with an unchanged TOAST value, but Bronze has none"
    silver(run)  # merges into the existing tables
    check_silver(run, pg, duckdb_con, "public.shifted", ["id"])
    check_silver(run, pg, duckdb_con, "public.coded", ["code"])


def test_a_row_parked_on_a_held_key_and_deleted_by_its_values_leaves_the_held_row(
        floe, pg, duckdb_con):
    """Break-it finding: Silver holds rows 9 and 10 (deferrable key, REPLICA IDENTITY
    FULL, an EXTERNAL TOAST body). One transaction moves 10 onto 9 (its body unsent:
    unchanged TOAST) and deletes the moved row by its values. The merge took the
    delete for the held row 9's (the moved row's body was Silver's, unknown to the
    fold, so both rows looked alike) and Silver kept row 10's title and body under
    key 9. The first delete's values (the whole old row of 10) are now the moved
    row's known values."""
    pg.execute("CREATE TABLE parked (id int PRIMARY KEY DEFERRABLE, title text, body text)")
    pg.execute("ALTER TABLE parked REPLICA IDENTITY FULL")
    pg.execute("ALTER TABLE parked ALTER COLUMN body SET STORAGE EXTERNAL")
    pg.execute(f"INSERT INTO parked SELECT g, 't' || g, {BIG} FROM generate_series(1, 12) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    silver(run)  # Silver holds every row
    with pg.connect(autocommit=False) as c:
        c.execute("SET CONSTRAINTS ALL DEFERRED")
        c.execute("UPDATE parked SET id = 9 WHERE id = 10")
        c.execute("DELETE FROM parked WHERE id = 9 AND title = 't10'")
        c.commit()
    wait_flushed(run, pg)
    assert any(r["cdc_unchanged"] == ["body"] for r in run.rows_pyiceberg("public.parked")), \
        "the test meant a moved row without its TOAST value, but Bronze has none"
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.parked", ["id"])


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
def test_a_key_stored_out_of_line_and_left_unchanged_names_its_row(
        floe, pg, duckdb_con, identity):
    """Break-it finding: a text primary key of about 2.4 KB stored out of line (TOAST,
    STORAGE EXTERNAL). An update that leaves it unchanged sends it as unchanged
    TOAST, so Bronze held the update with a null key: Silver gained a row with a null
    key and kept the real row stale. The update's old image carries the key
    (PostgreSQL logs an identity key with external values); the new row takes it."""
    pg.execute("CREATE TABLE tk (k text PRIMARY KEY, title text, n int, body text)")
    pg.execute(f"ALTER TABLE tk REPLICA IDENTITY {identity}")
    pg.execute("ALTER TABLE tk ALTER COLUMN k SET STORAGE EXTERNAL")
    pg.execute("ALTER TABLE tk ALTER COLUMN body SET STORAGE EXTERNAL")
    long_key = ("(SELECT string_agg(md5('k' || g || i), '') FROM generate_series(1, 75) i) "
                "|| g")
    pg.execute(f"INSERT INTO tk SELECT {long_key}, 't' || g, 0, {BIG} "
               "FROM generate_series(1, 5) g")
    pg.execute("INSERT INTO tk VALUES ('short1', 's1', 0, NULL), ('short2', 's2', 0, '')")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    silver(run)
    pg.execute("UPDATE tk SET title = 'x' WHERE title = 't1'")
    pg.execute("UPDATE tk SET n = n + 1")
    pg.execute("DELETE FROM tk WHERE title = 't2'")
    pg.execute("UPDATE tk SET k = k || '-moved' WHERE title = 't3'")
    wait_flushed(run, pg)
    assert all(r["k"] is not None for r in run.rows_pyiceberg("public.tk")), \
        "a change of public.tk has no key in Bronze"
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.tk", ["k"])


@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
def test_a_key_change_keeps_the_key_part_stored_out_of_line_and_left_unchanged(
        floe, pg, duckdb_con, identity):
    """A two-column key (a text part of about 2.4 KB stored out of line, an int
    part): an update of the int part is a delete of the old key and an insert of the
    new one, and the text part, unchanged, arrives as unchanged TOAST in the new row.
    The inserted row must still carry it (from the old image), or it names no row."""
    pg.execute("CREATE TABLE ck (k text, n int, title text, PRIMARY KEY (k, n))")
    pg.execute(f"ALTER TABLE ck REPLICA IDENTITY {identity}")
    pg.execute("ALTER TABLE ck ALTER COLUMN k SET STORAGE EXTERNAL")
    long_key = ("(SELECT string_agg(md5('k' || g || i), '') FROM generate_series(1, 75) i) "
                "|| g")
    pg.execute(f"INSERT INTO ck SELECT {long_key}, g, 't' || g FROM generate_series(1, 4) g")
    run = floe(service=SERVICE).start()
    run.wait_streaming()
    wait_flushed(run, pg)
    silver(run)
    pg.execute("UPDATE ck SET n = n + 100 WHERE title = 't1'")
    pg.execute("UPDATE ck SET n = n + 100, title = 'moved' WHERE title = 't2'")
    pg.execute("UPDATE ck SET title = 'same key' WHERE title = 't3'")
    wait_flushed(run, pg)
    assert all(r["k"] is not None for r in run.rows_pyiceberg("public.ck")), \
        "a change of public.ck has no key in Bronze"
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.ck", ["k", "n"])


def test_a_key_declared_after_bronze_holds_updates_of_it_copies_the_table_again(
        floe, pg, duckdb_con):
    """silver.keys declared for a table whose Bronze already holds an update that
    changed the declared column (written as an update, not a delete and an insert,
    since the column was no key then): folding Bronze by the new key kept the old
    value's row in Silver for ever (break-it finding). Now `floe silver` waits until
    `floe run` has run with the declaration, and `floe run` copies the table again
    when the declared key changes; Silver then equals the source."""
    pg.execute("CREATE TABLE late (id int PRIMARY KEY, code text NOT NULL UNIQUE, v int)")
    pg.execute("ALTER TABLE late REPLICA IDENTITY FULL")
    pg.execute("INSERT INTO late VALUES (1, 'A', 0), (2, 'B', 0)")
    run = floe(service=SERVICE, tables=["public.late"])
    run.start().wait_streaming()
    pg.execute("UPDATE late SET code = 'C' WHERE id = 1")
    pg.execute("UPDATE late SET v = 5 WHERE id = 2")
    wait_flushed(run, pg)
    run.stop()
    declared = run.config_path.read_text() + "silver:\n  keys:\n    public.late: [code]\n"
    run.config_path.write_text(declared)
    # floe run has not run with the declaration yet: nothing is merged.
    out = silver(run)
    assert "floe run wrote its changes with [] declared" in out, out
    assert not run.catalog().table_exists(silver_ident("public.late"))
    run.start().wait_streaming()
    wait_copied(run, "late")
    pg.execute("UPDATE late SET code = 'D' WHERE id = 2")
    wait_flushed(run, pg)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.late", ["code"])
    run.stop()
