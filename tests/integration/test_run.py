"""`floe run` end to end: a real PostgreSQL, the floe binary, and the Bronze tables it
writes read back by PyIceberg AND DuckDB (they must agree, row for row). One test per
acceptance item of the "floe run" issue: snapshot then stream, TRUNCATE, a 1M-row
transaction (and a rolled-back one), commit order, the audit join with
pg_logical_emit_message, the Debezium-exercise change sequence with a new column,
schema evolution under load, restarts of floe and of Postgres, table discovery, and
quarantine. The helper is floerun.py."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import time
from decimal import Decimal

import psycopg
import pytest
import pyarrow.compute as pc
import pyarrow.parquet as pq

from floerun import (CDC_COLUMNS, assert_same_rows, check_order, events, floe,  # noqa: F401
                     fold)


def xid_of(conn) -> int:
    return conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]


def in_tx(pg, *statements, params=None) -> int:
    """Runs the statements in one transaction; returns its xid."""
    with pg.connect(autocommit=False) as conn:
        x = xid_of(conn)
        for s in statements:
            conn.execute(s, params)
        conn.commit()
    return x


def pg_now(pg):
    return pg.execute("SELECT clock_timestamp()")[0][0]


def source_rows(pg, table: str, key: list[str]) -> dict[tuple, dict]:
    with pg.connect() as conn:
        cur = conn.execute(f"SELECT * FROM {table}")
        names = [d.name for d in cur.description]
        return {tuple(r[names.index(k)] for k in key): dict(zip(names, r))
                for r in cur.fetchall()}


def wait_rows(run, con, table: str, n: int, timeout: float = 60):
    """Waits until `table` has at least n rows (PyIceberg), then returns all rows
    read by both readers."""
    run.wait_until(lambda: run.count(table) >= n, timeout,
                   what=lambda: f"{n} rows in Bronze {table} (have {run.count(table)})")
    return run.rows(con, table)


def stopped_rows(run, con, table: str) -> list[dict]:
    rows = run.rows(con, table)
    check_order(table, rows)
    run.check_commit_lsn(table, rows)
    return rows


# ---------------------------------------------------------------------------


@pytest.mark.parametrize("snapshot_workers", [None, 1], ids=["default-workers", "one-worker"])
def test_initial_snapshot_then_streamed_changes_land_exactly(floe, pg, duckdb_con,
                                                            snapshot_workers):
    pg.execute("""
        CREATE TABLE customers (id int PRIMARY KEY, name text, balance numeric(10,2),
                                born date);
        INSERT INTO customers VALUES (1, 'ann', 10.50, '1990-01-02'), (2, 'bob', 0, NULL),
                                     (3, 'cy', -3.25, '2000-02-29');
        CREATE TABLE lines (order_id int, line_no int, qty int, note text,
                            PRIMARY KEY (order_id, line_no));
        INSERT INTO lines VALUES (1, 1, 5, 'a'), (1, 2, 6, NULL), (2, 1, 7, 'b');
        CREATE TABLE docs (id int PRIMARY KEY, body text, n int);
        INSERT INTO docs SELECT 1, string_agg(md5(i::text), ''), 1
          FROM generate_series(1, 400) i;
    """)
    body = pg.execute("SELECT body FROM docs")[0][0]
    assert len(body) > 8192
    # Stored out of line (compressed size still over the TOAST threshold), so an
    # update that does not touch it sends the unchanged-TOAST marker.
    assert pg.execute("SELECT pg_column_size(body) FROM docs")[0][0] > 2100

    # source.snapshot_workers: the same copy with one connection as with the default.
    run = floe(snapshot_workers=snapshot_workers)
    if snapshot_workers:
        printed = subprocess.run([str(run.floe_bin), "validate", "--print",
                                  str(run.config_path)], capture_output=True, text=True)
        assert printed.returncode == 0, printed.stderr
        assert f"snapshot_workers: {snapshot_workers}" in printed.stdout, printed.stdout
    run.start().wait_streaming()
    for t, n in (("public.customers", 3), ("public.lines", 3), ("public.docs", 1)):
        wait_rows(run, duckdb_con, t, n)

    t0 = pg_now(pg)
    x1 = in_tx(pg, "INSERT INTO customers VALUES (4, 'dee', 99.99, '1985-05-05')")
    x2 = in_tx(pg, "UPDATE customers SET name = 'bobby', balance = 12.30 WHERE id = 2")
    x3 = in_tx(pg, "DELETE FROM customers WHERE id = 3")
    x4 = in_tx(pg, "UPDATE customers SET id = 10 WHERE id = 1")
    x5 = in_tx(pg,
               "INSERT INTO lines VALUES (2, 2, 1, 'new')",
               "UPDATE lines SET qty = 50 WHERE order_id = 1 AND line_no = 1",
               "DELETE FROM lines WHERE order_id = 1 AND line_no = 2",
               "UPDATE lines SET line_no = 9 WHERE order_id = 2 AND line_no = 1")
    x6 = in_tx(pg, "UPDATE docs SET n = 2 WHERE id = 1")
    x7 = in_tx(pg, "UPDATE docs SET body = 'short', n = 3 WHERE id = 1")
    x8 = in_tx(pg, "DELETE FROM docs WHERE id = 1")
    t1 = pg_now(pg)

    wait_rows(run, duckdb_con, "public.customers", 3 + 5)
    wait_rows(run, duckdb_con, "public.lines", 3 + 5)
    wait_rows(run, duckdb_con, "public.docs", 1 + 3)
    run.stop()

    # customers
    rows = stopped_rows(run, duckdb_con, "public.customers")
    snap = [r for r in rows if r["cdc_op"] == "r"]
    stream = [r for r in rows if r["cdc_op"] != "r"]
    assert sorted(events(snap, "id", "name", "balance", "born")) == [
        ("r", 1, "ann", Decimal("10.50"), dt.date(1990, 1, 2)),
        ("r", 2, "bob", Decimal("0.00"), None),
        ("r", 3, "cy", Decimal("-3.25"), dt.date(2000, 2, 29)),
    ]
    assert rows[:3] == snap, "snapshot rows must come first in (cdc_commit_lsn, cdc_seq)"
    assert max(r["cdc_commit_lsn"] for r in snap) < min(r["cdc_commit_lsn"] for r in stream)
    assert [(e, r["cdc_source_tx_id"], r["cdc_seq"]) for e, r in
            zip(events(stream, "id", "name", "balance", "born"), stream)] == [
        (("c", 4, "dee", Decimal("99.99"), dt.date(1985, 5, 5)), x1, 0),
        (("u", 2, "bobby", Decimal("12.30"), None), x2, 0),
        (("d", 3, None, None, None), x3, 0),  # REPLICA IDENTITY DEFAULT: key only
        (("d", 1, None, None, None), x4, 0),  # key change: d old key, then c new row
        (("c", 10, "ann", Decimal("10.50"), dt.date(1990, 1, 2)), x4, 1),
    ]
    assert stream[3]["cdc_commit_lsn"] == stream[4]["cdc_commit_lsn"]
    for r in stream:
        assert t0 <= r["cdc_ts"] <= t1, (r, t0, t1)
        assert r["cdc_processed_at"] >= r["cdc_ts"], r
        assert r["cdc_unchanged"] is None, r
    assert len({r["cdc_commit_lsn"] for r in stream}) == 4

    # lines: composite key, five changes in one transaction
    rows = stopped_rows(run, duckdb_con, "public.lines")
    assert sorted(events([r for r in rows if r["cdc_op"] == "r"],
                         "order_id", "line_no", "qty", "note")) == [
        ("r", 1, 1, 5, "a"), ("r", 1, 2, 6, None), ("r", 2, 1, 7, "b")]
    stream = [r for r in rows if r["cdc_op"] != "r"]
    assert events(stream, "order_id", "line_no", "qty", "note", "cdc_seq") == [
        ("c", 2, 2, 1, "new", 0),
        ("u", 1, 1, 50, "a", 1),
        ("d", 1, 2, None, None, 2),
        ("d", 2, 1, None, None, 3),
        ("c", 2, 9, 7, "b", 4),
    ]
    assert {r["cdc_source_tx_id"] for r in stream} == {x5}
    assert len({r["cdc_commit_lsn"] for r in stream}) == 1

    # docs: a TOASTed value left alone by an update is listed in cdc_unchanged
    rows = stopped_rows(run, duckdb_con, "public.docs")
    assert [(r["cdc_op"], r["id"], r["body"], r["n"], r["cdc_unchanged"],
             r["cdc_source_tx_id"]) for r in rows][1:] == [
        ("u", 1, None, 2, ["body"], x6),
        ("u", 1, "short", 3, None, x7),
        ("d", 1, None, None, None, x8),
    ]
    assert (rows[0]["cdc_op"], rows[0]["id"], rows[0]["body"], rows[0]["n"]) == \
        ("r", 1, body, 1)

    # Every source table's Bronze table has the row columns then the CDC columns,
    # and is partitioned by day(cdc_ts).
    from pyiceberg.transforms import DayTransform
    t = run.load("public.customers")
    assert [f.name for f in t.schema().fields] == \
        ["id", "name", "balance", "born"] + CDC_COLUMNS
    (part,) = t.spec().fields
    assert isinstance(part.transform, DayTransform)
    assert part.source_id == t.schema().find_field("cdc_ts").field_id
    assert t.name() == ("bronze", "svc", "public", "customers")

    # After the graceful stop the slot is confirmed at least past the last commit.
    flushed = run.slot_confirmed_flush()
    last = max(r["cdc_commit_lsn"] for r in run.rows_pyiceberg("public.docs"))
    assert flushed is not None and flushed >= last, (flushed, last)

    # The row key and cdc_seq, unique in a copy, are written without a Parquet
    # dictionary; the other columns with one.
    t = run.load("public.lines")
    for task in t.scan().plan_files():
        md = pq.ParquetFile(task.file.file_path.removeprefix("file://")).metadata
        chunks = {md.schema.column(i).name: md.row_group(0).column(i)
                  for i in range(md.num_columns)}
        plain = {n for n, c in chunks.items() if not c.has_dictionary_page}
        assert {"order_id", "line_no", "cdc_seq"} <= plain, plain
        assert not {"qty", "note", "cdc_op", "cdc_commit_lsn"} & plain, plain


def test_truncate_is_one_t_row_with_null_row_columns(floe, pg, duckdb_con):
    pg.execute("""
        CREATE TABLE t1 (id int PRIMARY KEY, v text);
        CREATE TABLE t2 (id int PRIMARY KEY);
        INSERT INTO t1 VALUES (1, 'a'), (2, 'b');
        INSERT INTO t2 VALUES (1);
    """)
    run = floe()
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.t1", 2)
    wait_rows(run, duckdb_con, "public.t2", 1)
    x1 = in_tx(pg, "TRUNCATE t1")
    x2 = in_tx(pg, "INSERT INTO t1 VALUES (5, 'after')")
    x3 = in_tx(pg, "TRUNCATE t1, t2")
    x4 = in_tx(pg, "INSERT INTO t2 VALUES (7)")
    wait_rows(run, duckdb_con, "public.t1", 5)
    wait_rows(run, duckdb_con, "public.t2", 3)
    run.stop()

    rows = stopped_rows(run, duckdb_con, "public.t1")
    assert sorted(events(rows[:2], "id", "v")) == [("r", 1, "a"), ("r", 2, "b")]
    assert events(rows[2:], "id", "v") == [
        ("t", None, None), ("c", 5, "after"), ("t", None, None)]
    assert [r["cdc_source_tx_id"] for r in rows[2:]] == [x1, x2, x3]
    assert fold(rows, ["id"]) == {}
    rows = stopped_rows(run, duckdb_con, "public.t2")
    assert [(r["cdc_op"], r["id"], r["cdc_source_tx_id"]) for r in rows][1:] == [
        ("t", None, x3), ("c", 7, x4)]
    assert rows[0]["cdc_op"] == "r" and rows[0]["id"] == 1
    assert fold(rows, ["id"]) == {(7,): {"id": 7}}


def test_a_million_row_transaction_lands_whole_and_a_rolled_back_one_not_at_all(
        floe, pg, duckdb_con):
    """Slow-tolerant: a 1M-row committed transaction and a 1M-row rolled-back one
    (both bigger than logical_decoding_work_mem, so streamed or spilled). Generous
    timeouts; the whole test stays under ~2 minutes."""
    pg.execute("CREATE TABLE big (id int PRIMARY KEY, v text)")
    run = floe(interval="1s")
    run.start().wait_streaming()
    with pg.connect(autocommit=False) as conn:
        x_big = xid_of(conn)
        conn.execute("INSERT INTO big SELECT g, 'row ' || g "
                      "FROM generate_series(1, 1000000) g")
        conn.commit()
        xid_of(conn)
        conn.execute("INSERT INTO big SELECT g, 'rolled back' "
                     "FROM generate_series(1000001, 2000000) g")
        conn.rollback()
    x_marker = in_tx(pg, "INSERT INTO big VALUES (0, 'marker')")
    run.wait_until(lambda: run.count("public.big") >= 1_000_001, timeout=100,
        what="1,000,001 rows in Bronze public.big", interval=1)
    run.stop()

    t = run.arrow_pyiceberg("public.big")
    md = run.metadata_path("public.big")
    duck = duckdb_con.execute("""
        SELECT count(*), count(DISTINCT id), min(id), max(id), sum(id),
               count(*) FILTER (WHERE v = 'row ' || id),
               count(*) FILTER (WHERE v = 'rolled back'),
               count(*) FILTER (WHERE cdc_op <> 'c'),
               count(DISTINCT cdc_source_tx_id),
               count(DISTINCT cdc_commit_lsn),
               count(DISTINCT (cdc_commit_lsn, cdc_seq)),
               min(cdc_seq) FILTER (WHERE id > 0), max(cdc_seq) FILTER (WHERE id > 0),
               count(*) FILTER (WHERE cdc_source_tx_id = ?)
        FROM iceberg_scan(?)""", [x_big, md]).fetchone()
    assert duck == (1_000_001, 1_000_001, 0, 1_000_000, 500_000_500_000, 1_000_000, 0, 0,
                    2, 2, 1_000_001, 0, 999_999, 1_000_000)

    ids = t.column("id")
    v = t.column("v")
    py = (t.num_rows, len(pc.unique(ids)), pc.min(ids).as_py(), pc.max(ids).as_py(),
          pc.sum(ids).as_py(),
          pc.sum(pc.equal(v, pc.binary_join_element_wise(
              "row ", pc.cast(ids, "string"), ""))).as_py(),
          pc.sum(pc.equal(v, "rolled back")).as_py(),
          pc.sum(pc.not_equal(t.column("cdc_op"), "c")).as_py(),
          len(pc.unique(t.column("cdc_source_tx_id"))),
          len(pc.unique(t.column("cdc_commit_lsn"))))
    assert py == (1_000_001, 1_000_001, 0, 1_000_000, 500_000_500_000, 1_000_000, 0, 0, 2, 2)
    last = t.slice(t.num_rows - 1).to_pylist()[0]
    assert (last["id"], last["v"], last["cdc_source_tx_id"], last["cdc_seq"]) == \
        (0, "marker", x_marker, 0)
    run.check_commit_lsn("public.big", [last])


def test_bronze_order_is_commit_order_not_start_order(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE ev (id int PRIMARY KEY, who text)")
    run = floe()
    run.start().wait_streaming()
    with pg.connect(autocommit=False) as c1, pg.connect(autocommit=False) as c2:
        c1.execute("INSERT INTO ev VALUES (1, 't1 first')")
        x1 = xid_of(c1)
        c2.execute("INSERT INTO ev VALUES (2, 't2')")
        x2 = xid_of(c2)
        c2.commit()                      # started later, commits first
        c1.execute("INSERT INTO ev VALUES (3, 't1 second')")
        c1.commit()
        # And once more with an update and a delete.
        c1.execute("UPDATE ev SET who = 't3' WHERE id = 2")
        x3 = xid_of(c1)
        c2.execute("DELETE FROM ev WHERE id = 1")
        x4 = xid_of(c2)
        c2.commit()
        c1.commit()
    assert x1 < x2 < x3 < x4
    rows = wait_rows(run, duckdb_con, "public.ev", 5)
    run.stop()
    rows = stopped_rows(run, duckdb_con, "public.ev")
    assert [(r["cdc_op"], r["id"], r["who"], r["cdc_source_tx_id"], r["cdc_seq"])
            for r in rows] == [
        ("c", 2, "t2", x2, 0),
        ("c", 1, "t1 first", x1, 0),
        ("c", 3, "t1 second", x1, 1),
        ("d", 1, None, x4, 0),
        ("u", 2, "t3", x3, 0),
    ]
    lsn = [r["cdc_commit_lsn"] for r in rows]
    assert lsn[0] < lsn[1] == lsn[2] < lsn[3] < lsn[4]
    # The change LSN is not the order: t1's first insert was written before t2's.
    assert rows[1]["cdc_source_lsn"] < rows[0]["cdc_source_lsn"]
    assert fold(rows, ["id"]) == {(2,): {"id": 2, "who": "t3"},
                                  (3,): {"id": 3, "who": "t1 second"}}


def test_a_backlog_of_single_row_transactions_lands_in_order_across_a_schema_change(
        floe, pg, duckdb_con):
    """Single-row transactions on two tables, queued while floe is stopped, with a
    column added to one of them half way: floe drains them in bulk (consecutive
    transactions share decoded batches and are written together), yet every row keeps
    its own transaction's xid, commit LSN and commit time, in commit order, and the
    rows after the ALTER carry the new column."""
    n = 3000
    pg.execute("""
        CREATE TABLE sa (id int PRIMARY KEY, v text, x bigint);
        CREATE TABLE sb (id int PRIMARY KEY, w int, x bigint);
    """)
    run = floe()
    run.start().wait_streaming()
    run.stop()
    # Transaction i (1..n): i % 4 == 0 updates sa row i - 2, i % 4 == 1 inserts into
    # sa, 2 inserts into sb, 3 deletes sa row i - 2 ... (when it exists). x is the
    # transaction's own xid. At i == n / 2 sa gains a column.
    pg.execute("""
        CREATE PROCEDURE gen_single(n int) LANGUAGE plpgsql AS $$
        BEGIN
          FOR i IN 1..n LOOP
            IF i = n / 2 THEN
              ALTER TABLE sa ADD COLUMN extra text;
              COMMIT;
            END IF;
            IF i % 4 = 1 THEN
              IF i >= n / 2 THEN
                EXECUTE 'INSERT INTO sa (id, v, x, extra) VALUES ($1, $2, $3, $4)'
                  USING i, 'v' || i, txid_current(), 'e' || i;
              ELSE
                INSERT INTO sa (id, v, x) VALUES (i, 'v' || i, txid_current());
              END IF;
            ELSIF i % 4 = 2 THEN
              INSERT INTO sb VALUES (i, i, txid_current());
            ELSIF i % 4 = 0 THEN
              UPDATE sa SET v = 'u' || i, x = txid_current() WHERE id = i - 3;
            ELSE
              DELETE FROM sa WHERE id = i - 6;
            END IF;
            COMMIT;
          END LOOP;
        END $$;
    """)
    pg.execute(f"CALL gen_single({n})")
    run.start().wait_streaming()
    src_a, src_b = source_rows(pg, "sa", ["id"]), source_rows(pg, "sb", ["id"])
    # Expected changes per table, in commit order: (op, id).
    want_a, want_b = [], []
    existing = set()
    for i in range(1, n + 1):
        if i % 4 == 1:
            want_a.append(("c", i))
            existing.add(i)
        elif i % 4 == 2:
            want_b.append(("c", i))
        elif i % 4 == 0 and i - 3 in existing:
            want_a.append(("u", i - 3))
        elif i % 4 == 3 and i - 6 in existing:
            want_a.append(("d", i - 6))
            existing.discard(i - 6)
    wait_rows(run, duckdb_con, "public.sa", len(want_a), timeout=120)
    wait_rows(run, duckdb_con, "public.sb", len(want_b), timeout=120)
    run.stop()

    rows_a = stopped_rows(run, duckdb_con, "public.sa")
    rows_b = stopped_rows(run, duckdb_con, "public.sb")
    assert [(r["cdc_op"], r["id"]) for r in rows_a] == want_a
    assert [(r["cdc_op"], r["id"]) for r in rows_b] == want_b
    for rows in (rows_a, rows_b):
        # One row per transaction: each has its own xid and commit LSN, both rising in
        # commit order (the procedure's transactions run one after the other).
        assert all(r["cdc_seq"] == 0 for r in rows)
        for prev, cur in zip(rows, rows[1:]):
            assert prev["cdc_commit_lsn"] < cur["cdc_commit_lsn"], (prev, cur)
            assert prev["cdc_source_tx_id"] < cur["cdc_source_tx_id"], (prev, cur)
            assert prev["cdc_ts"] <= cur["cdc_ts"], (prev, cur)
        for r in rows:
            assert r["cdc_source_lsn"] < r["cdc_commit_lsn"], r
            if r["cdc_op"] != "d":
                assert r["x"] == r["cdc_source_tx_id"], r
    # Both tables' transactions interleave: their commit LSNs are all distinct.
    lsns = [r["cdc_commit_lsn"] for r in rows_a + rows_b]
    assert len(set(lsns)) == len(lsns)
    # The new column: null before the ALTER, set on every insert after it.
    for r in rows_a:
        if r["cdc_op"] == "c":
            assert r["extra"] == (f"e{r['id']}" if r["id"] >= n // 2 else None), r
    assert fold(rows_a, ["id"]) == src_a
    assert fold(rows_b, ["id"]) == src_b


AUDIT_SQL = ("SELECT pg_logical_emit_message(true, 'audit', json_build_object("
             "'user', %s::text, 'table', 'public.accounts')::text)")


def test_audit_join_gives_the_acting_user_of_every_audited_change(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE accounts (id int PRIMARY KEY, owner text, balance bigint)")
    run = floe()
    run.start().wait_streaming()

    def audited(user, *statements, rollback=False):
        with pg.connect(autocommit=False) as conn:
            x = xid_of(conn)
            conn.execute(AUDIT_SQL, (user,))
            for s in statements:
                conn.execute(s)
            conn.rollback() if rollback else conn.commit()
        return x

    xa = audited("alice", "INSERT INTO accounts VALUES (1, 'a', 100), (2, 'b', 50)")
    xb = audited("bob", "UPDATE accounts SET balance = 175 WHERE id = 1",
                 "DELETE FROM accounts WHERE id = 2")
    xc = audited("carol", "INSERT INTO accounts VALUES (3, 'c', 70)",
                 "UPDATE accounts SET id = 30 WHERE id = 3")
    xu = in_tx(pg, "INSERT INTO accounts VALUES (4, 'unaudited', 1)")
    audited("mallory", "INSERT INTO accounts VALUES (5, 'rolled back', 0)", rollback=True)
    pg.execute("SELECT pg_logical_emit_message(false, 'heartbeat', 'tick')")
    xd = audited("dave", "UPDATE accounts SET owner = 'd' WHERE id = 4")
    content = {u: pg.execute("SELECT json_build_object('user', %s::text, 'table', "
                             "'public.accounts')::text", (u,))[0][0]
               for u in ("alice", "bob", "carol", "dave")}

    wait_rows(run, duckdb_con, "public.accounts", 9)
    run.wait_until(lambda: run.count("pg_logical_messages") >= 5, 60,
                   what="5 rows in pg_logical_messages")
    run.stop()

    data = stopped_rows(run, duckdb_con, "public.accounts")
    msgs = run.rows(duckdb_con, "pg_logical_messages")
    expected = [("c", 1, "alice"), ("c", 2, "alice"), ("u", 1, "bob"), ("d", 2, "bob"),
                ("c", 3, "carol"), ("d", 3, "carol"), ("c", 30, "carol"),
                ("c", 4, None), ("u", 4, "dave")]

    # DuckDB: the join of the WHOOP audit pattern, both sides filtered by cdc_ts.
    got = duckdb_con.execute("""
        SELECT d.cdc_op, d.id, json_extract_string(a.content, '$.user') AS acting_user
        FROM iceberg_scan(?) AS d
        LEFT JOIN (SELECT * FROM iceberg_scan(?) WHERE prefix = 'audit'
                   AND cdc_ts >= now() - INTERVAL 30 DAY) AS a
          ON d.cdc_source_tx_id = a.cdc_source_tx_id
        WHERE d.cdc_ts >= now() - INTERVAL 30 DAY
        ORDER BY d.cdc_commit_lsn, d.cdc_seq""",
        [run.metadata_path("public.accounts"),
         run.metadata_path("pg_logical_messages")]).fetchall()
    assert got == expected

    # PyIceberg: the same join in Python.
    by_tx = {m["cdc_source_tx_id"]: json.loads(m["content"])["user"]
             for m in msgs if m["prefix"] == "audit"}
    assert [(r["cdc_op"], r["id"], by_tx.get(r["cdc_source_tx_id"])) for r in data] == \
        expected
    assert [r["cdc_source_tx_id"] for r in data] == [xa, xa, xb, xb, xc, xc, xc, xu, xd]

    # The messages themselves: the rolled-back one never appears; transactional ones
    # share xid and commit LSN with their data changes.
    audit = [m for m in msgs if m["prefix"] == "audit"]
    assert [(m["content"], m["content_bytes"], m["transactional"], m["cdc_source_tx_id"])
            for m in audit] == [
        (content[u], content[u].encode(), True, x)
        for u, x in (("alice", xa), ("bob", xb), ("carol", xc), ("dave", xd))]
    commit_of = {r["cdc_source_tx_id"]: r["cdc_commit_lsn"] for r in data}
    for m in audit:
        assert m["cdc_commit_lsn"] == commit_of[m["cdc_source_tx_id"]], m
        assert m["cdc_ts"] is not None and m["cdc_processed_at"] is not None, m
        assert m["cdc_source_lsn"] is not None, m
    assert not any("mallory" in (m["content"] or "") for m in msgs)
    beats = [m for m in msgs if m["prefix"] == "heartbeat"]
    assert [(m["content"], m["transactional"]) for m in beats] == [("tick", False)]
    assert len(msgs) == 5
    # source_table: taken from the audit message's "table" (the WHOOP layout
    # partitions pg_logical_messages by it).
    assert [m["source_table"] for m in audit] == ["public.accounts"] * 4


def test_debezium_exercise_phases_land_as_exactly_those_events(floe, pg, duckdb_con):
    """shared/seeds/exercise-debezium-to-iceberg.txt, phases 1 and 2, as Postgres DML."""
    pg.execute("CREATE TABLE accounts (id int PRIMARY KEY, name text, amt int)")
    run = floe()
    run.start().wait_streaming()
    # phase 1
    pg.execute("INSERT INTO accounts VALUES (1, 'alice', 100)")
    pg.execute("INSERT INTO accounts VALUES (2, 'bob', 50)")
    pg.execute("UPDATE accounts SET amt = 175 WHERE id = 1")
    pg.execute("DELETE FROM accounts WHERE id = 2")
    wait_rows(run, duckdb_con, "public.accounts", 4)
    fold_sql = """
        SELECT * EXCLUDE (rn, cdc_op) FROM (
          SELECT {cols}, cdc_op, row_number() OVER (PARTITION BY id
                 ORDER BY cdc_commit_lsn DESC, cdc_seq DESC) AS rn
          FROM iceberg_scan(?))
        WHERE rn = 1 AND cdc_op <> 'd' ORDER BY id"""
    assert duckdb_con.execute(fold_sql.format(cols="id, name, amt"),
                              [run.metadata_path("public.accounts")]).fetchall() == \
        [(1, "alice", 175)]
    # phase 2: the source grows a column
    pg.execute("ALTER TABLE accounts ADD COLUMN region text")
    pg.execute("INSERT INTO accounts VALUES (3, 'carol', 70, 'EU')")
    pg.execute("UPDATE accounts SET amt = 120, region = 'US' WHERE id = 1")
    wait_rows(run, duckdb_con, "public.accounts", 6)
    run.stop()

    rows = stopped_rows(run, duckdb_con, "public.accounts")
    assert events(rows, "id", "name", "amt", "region") == [
        ("c", 1, "alice", 100, None),
        ("c", 2, "bob", 50, None),
        ("u", 1, "alice", 175, None),
        ("d", 2, None, None, None),
        ("c", 3, "carol", 70, "EU"),
        ("u", 1, "alice", 120, "US"),
    ]
    assert duckdb_con.execute(fold_sql.format(cols="id, name, amt, region"),
                              [run.metadata_path("public.accounts")]).fetchall() == \
        [(1, "alice", 120, "US"), (3, "carol", 70, "EU")]
    assert fold(rows, ["id"]) == {
        (1,): {"id": 1, "name": "alice", "amt": 120, "region": "US"},
        (3,): {"id": 3, "name": "carol", "amt": 70, "region": "EU"}}
    assert len(run.commit_lsns("public.accounts")) >= 2  # committed on checkpoints


def test_schema_evolution_while_writes_flow(floe, pg, duckdb_con):
    from pyiceberg.types import IntegerType, LongType, StringType

    pg.execute("""
        CREATE TABLE items (id int PRIMARY KEY, qty text, n int4, label text, gone text);
        INSERT INTO items VALUES (1, '5', 1, 'a', 'x');
    """)
    run = floe()
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.items", 1)
    first_schema = run.load("public.items").schema()

    pg.execute("INSERT INTO items VALUES (2, '2', 2, 'b', 'y')")
    pg.execute("ALTER TABLE items ADD COLUMN extra text")
    pg.execute("INSERT INTO items VALUES (3, '3', 3, 'c', 'z', 'e3')")
    wait_rows(run, duckdb_con, "public.items", 3)
    pg.execute("ALTER TABLE items ALTER COLUMN n TYPE bigint")
    pg.execute("INSERT INTO items VALUES (4, '4', 5000000000, 'd', 'w', 'e4')")
    pg.execute("ALTER TABLE items RENAME COLUMN label TO title")
    pg.execute("UPDATE items SET title = 'a2' WHERE id = 1")
    wait_rows(run, duckdb_con, "public.items", 5)
    pg.execute("ALTER TABLE items DROP COLUMN gone")
    pg.execute("INSERT INTO items (id, qty, n, title, extra) VALUES (5, '5', 5, 'e', 'e5')")
    # DDL between DML in one transaction.
    in_tx(pg,
          "INSERT INTO items (id, qty, n, title, extra) VALUES (8, '8', 8, 'h', 'e8')",
          "ALTER TABLE items ADD COLUMN tag text",
          "INSERT INTO items (id, qty, n, title, extra, tag) "
          "VALUES (7, '7', 7, 'g', 'e7', 't7')",
          "UPDATE items SET tag = 't2' WHERE id = 2")
    wait_rows(run, duckdb_con, "public.items", 9)
    # Not promotable in Iceberg: text -> integer. New rows go to qty__int, and as
    # PostgreSQL rewrote every row (which logical decoding does not send), floe copies
    # the table again: a `t` row, then every row with its qty in qty__int.
    pg.execute("ALTER TABLE items ALTER COLUMN qty TYPE integer USING qty::integer")
    pg.execute("INSERT INTO items (id, qty, n, title, extra, tag) "
               "VALUES (6, 6, 6, 'f', 'e6', NULL)")
    run.wait_until(lambda: "copied public.items" in run.log_text().split("qty__int")[-1],
                   what="the copy after the type change")
    wait_rows(run, duckdb_con, "public.items", 9 + 1 + 8)
    run.stop()

    rows = stopped_rows(run, duckdb_con, "public.items")
    cols = ("id", "qty", "n", "title", "gone", "extra", "qty__int", "tag")
    ev = events(rows, *cols)
    assert ev[:9] == [
        ("r", 1, "5", 1, "a", "x", None, None, None),
        ("c", 2, "2", 2, "b", "y", None, None, None),
        ("c", 3, "3", 3, "c", "z", "e3", None, None),
        ("c", 4, "4", 5000000000, "d", "w", "e4", None, None),
        ("u", 1, "5", 1, "a2", "x", None, None, None),
        ("c", 5, "5", 5, "e", None, "e5", None, None),
        ("c", 8, "8", 8, "h", None, "e8", None, None),
        ("c", 7, "7", 7, "g", None, "e7", None, "t7"),
        ("u", 2, "2", 2, "b", None, None, None, "t2"),
    ]
    assert len({r["cdc_commit_lsn"] for r in rows[6:9]}) == 1
    assert [r["cdc_seq"] for r in rows[6:9]] == [0, 1, 2]
    truncates = [i for i, e in enumerate(ev) if e[0] == "t"]
    assert len(truncates) == 1 and truncates[0] >= 9, ev
    copied = [e for e in ev[truncates[0] + 1:] if e[0] == "r"]
    src_qty = {k[0]: r["qty"] for k, r in source_rows(pg, "items", ["id"]).items()}
    # (op, id, qty, n, title, gone, extra, qty__int, tag): qty__int holds every value.
    assert {e[1]: e[7] for e in copied} == src_qty, copied
    assert all(e[2] is None for e in copied), copied

    schema = run.load("public.items").schema()
    names = [f.name for f in schema.fields]
    assert "label" not in names
    assert set(cols) <= set(names)
    assert schema.find_field("title").field_id == first_schema.find_field("label").field_id
    assert schema.find_field("n").field_id == first_schema.find_field("n").field_id
    assert isinstance(first_schema.find_field("n").field_type, IntegerType)
    assert isinstance(schema.find_field("n").field_type, LongType)
    assert isinstance(schema.find_field("qty").field_type, StringType)
    assert isinstance(schema.find_field("qty__int").field_type, IntegerType)
    assert schema.find_field("gone").field_id == first_schema.find_field("gone").field_id
    # docs/schema-evolution.md: added fields go before the CDC columns, which stay last.
    assert names[-len(CDC_COLUMNS):] == CDC_COLUMNS, names
    src = source_rows(pg, "items", ["id"])
    folded = fold(rows, ["id"])
    assert set(folded) == set(src)
    for k, s in src.items():
        b = folded[k]
        assert (b["qty__int"] if b["qty__int"] is not None else int(b["qty"])) == s["qty"]
        assert (b["n"], b["title"], b["extra"], b["tag"]) == \
            (s["n"], s["title"], s["extra"], s["tag"]), (b, s)


def test_restart_of_floe_loses_nothing_and_repeats_nothing(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO acc SELECT g, 'v' || g FROM generate_series(1, 5) g")
    run = floe()
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.acc", 5)
    pg.execute("INSERT INTO acc SELECT g, 'v' || g FROM generate_series(6, 10) g")
    wait_rows(run, duckdb_con, "public.acc", 10)
    run.stop()
    before = run.rows(duckdb_con, "public.acc")
    flushed = run.slot_confirmed_flush()
    assert flushed is not None and flushed >= max(r["cdc_commit_lsn"] for r in before)

    # While floe is down.
    pg.execute("INSERT INTO acc SELECT g, 'v' || g FROM generate_series(11, 15) g")
    pg.execute("UPDATE acc SET v = 'changed' WHERE id = 1")
    pg.execute("DELETE FROM acc WHERE id = 2")
    pg.execute("UPDATE acc SET id = 33 WHERE id = 3")
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.acc", 19)
    pg.execute("INSERT INTO acc VALUES (16, 'v16')")
    wait_rows(run, duckdb_con, "public.acc", 20)
    run.stop()
    # A third run with nothing new writes nothing.
    run.start().wait_streaming()
    time.sleep(3)  # several checkpoint intervals
    run.check_alive()
    run.stop()

    rows = stopped_rows(run, duckdb_con, "public.acc")
    assert rows[:10] == before
    assert sorted(events(rows[:5], "id", "v")) == [("r", i, f"v{i}") for i in range(1, 6)]
    assert events(rows[5:], "id", "v") == (
        [("c", i, f"v{i}") for i in range(6, 16)] +
        [("u", 1, "changed"), ("d", 2, None), ("d", 3, None), ("c", 33, "v3"),
         ("c", 16, "v16")])
    assert {k[0]: v["v"] for k, v in fold(rows, ["id"]).items()} == \
        {k[0]: v["v"] for k, v in source_rows(pg, "acc", ["id"]).items()}


def test_postgres_restart_mid_stream_floe_reconnects_and_loses_nothing(
        floe, pg, duckdb_con):
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, v text)")
    run = floe()
    run.start().wait_streaming()
    for i in range(1, 51):
        pg.execute("INSERT INTO acc VALUES (%s, %s)", (i, f"v{i}"))
    run.wait_until(lambda: run.count("public.acc") >= 10, 60, what="first rows landed")
    # A transaction open while the server goes down never commits.
    doomed = pg.connect(autocommit=False)
    doomed.execute("INSERT INTO acc VALUES (999, 'never committed')")
    pg.cluster.restart()
    try:
        doomed.close()
    except psycopg.Error:
        pass
    for i in range(51, 101):
        pg.execute("INSERT INTO acc VALUES (%s, %s)", (i, f"v{i}"))
    pg.execute("UPDATE acc SET v = 'after restart' WHERE id = 1")
    run.wait_until(lambda: run.count("public.acc") >= 101, 90,
                   what="every change made around the Postgres restart in Bronze")
    assert run.running, "floe must survive a Postgres restart"
    run.stop()
    # The test server keeps WAL without bound: said at the start, not again at each
    # reconnect of the same process.
    log = run.log_text()
    assert "reconnecting" in log, run.log_tail()
    assert log.count("max_slot_wal_keep_size is -1") == 1, run.log_tail()

    rows = stopped_rows(run, duckdb_con, "public.acc")
    assert events(rows, "id", "v") == \
        [("c", i, f"v{i}") for i in range(1, 101)] + [("u", 1, "after restart")]


def test_an_error_a_reconnect_cannot_fix_stops_floe_instead_of_looping(
        floe, pg, duckdb_con):
    """One error policy (issue 15, item 3): a Postgres restart is reconnected (test
    above); Bronze metadata floe cannot read fails the same way at every reconnect, so
    `floe run` stops with exit code 1 and the cause instead of retrying for ever with
    backoff. Nothing is lost: the slot stays where it was, and once the file is
    repaired the change made meanwhile reaches Bronze."""
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO acc SELECT g, 'v' || g FROM generate_series(1, 10) g")
    run = floe()
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.acc", 10)
    run.stop()
    confirmed = run.slot_confirmed_flush()
    path = run.metadata_path("public.acc")
    with open(path, "rb") as f:
        good = f.read()
    with open(path, "w") as f:
        f.write("{not json")
    pg.execute("INSERT INTO acc VALUES (11, 'while the metadata was broken')")

    run.start()
    assert run.wait_exit(120) == 1, run.log_tail()
    this_start = run.log_text().rsplit("===== floe run start", 1)[-1]
    assert "table metadata is not valid JSON" in this_start, run.log_tail()
    assert path in this_start, run.log_tail()  # names the file to repair
    assert "reconnecting" not in this_start, run.log_tail()
    assert run.slot_confirmed_flush() == confirmed

    with open(path, "wb") as f:
        f.write(good)
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.acc", 11)
    run.stop()
    rows = stopped_rows(run, duckdb_con, "public.acc")
    assert events(rows[-1:], "id", "v") == [("c", 11, "while the metadata was broken")]
    assert len(rows) == 11


def test_discovery_of_a_table_added_to_the_publication(floe, pg, duckdb_con):
    pg.execute("""
        CREATE TABLE a (id int PRIMARY KEY);
        CREATE TABLE b (id int PRIMARY KEY, v text);
        INSERT INTO a VALUES (1);
        INSERT INTO b VALUES (1, 'one'), (2, 'two'), (3, 'three');
        CREATE PUBLICATION pub FOR TABLE a;
    """)
    run = floe(publication="pub")
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.a", 1)
    pg.execute("INSERT INTO a VALUES (2)")
    wait_rows(run, duckdb_con, "public.a", 2)
    assert not run.exists("public.b")

    pg.execute("ALTER PUBLICATION pub ADD TABLE b")
    pg.execute("INSERT INTO b VALUES (4, 'four')")  # races with floe's discovery
    run.wait_until(
        lambda: {r["id"] for r in run.rows_pyiceberg("public.b")} == {1, 2, 3, 4}, 60,
        what="public.b's existing rows and the racing insert in Bronze within 60 s")
    pg.execute("INSERT INTO b VALUES (5, 'five')")
    pg.execute("UPDATE b SET v = 'uno' WHERE id = 1")
    wait_rows(run, duckdb_con, "public.b", 6)
    run.stop()

    rows = stopped_rows(run, duckdb_con, "public.b")
    assert sorted(events([r for r in rows if r["id"] in (1, 2, 3)], "id", "v",
                         ops="r")) == [("r", 1, "one"), ("r", 2, "two"), ("r", 3, "three")]
    four = [r for r in rows if r["id"] == 4]
    assert len(four) == 1 and four[0]["cdc_op"] in ("r", "c"), four
    assert events(rows[-2:], "id", "v") == [("c", 5, "five"), ("u", 1, "uno")]
    assert len(rows) == 6
    assert {k: v["v"] for k, v in fold(rows, ["id"]).items()} == \
        {k: v["v"] for k, v in source_rows(pg, "b", ["id"]).items()}
    assert events(stopped_rows(run, duckdb_con, "public.a"), "id") == [("r", 1), ("c", 2)]


def test_discovery_of_a_created_table_under_for_all_tables(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE a (id int PRIMARY KEY)")
    run = floe(publication={"name": "allpub", "create": "all_tables"})
    run.start().wait_streaming()
    pg.execute("INSERT INTO a VALUES (1)")
    wait_rows(run, duckdb_con, "public.a", 1)
    pg.execute("CREATE TABLE fresh (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO fresh VALUES (1, 'one'), (2, 'two')")
    in_tx(pg, "CREATE TABLE fresh2 (k text PRIMARY KEY, n int)",
          "INSERT INTO fresh2 VALUES ('x', 1), ('y', 2)")
    pg.execute("INSERT INTO fresh VALUES (3, 'three')")
    run.wait_until(
        lambda: {r["id"] for r in run.rows_pyiceberg("public.fresh")} == {1, 2, 3} and
        {r["k"] for r in run.rows_pyiceberg("public.fresh2")} == {"x", "y"}, 60,
        what="the new tables in Bronze within 60 s, without a restart")
    pg.execute("INSERT INTO fresh VALUES (4, 'four')")
    pg.execute("UPDATE fresh2 SET n = 20 WHERE k = 'y'")
    wait_rows(run, duckdb_con, "public.fresh", 4)
    wait_rows(run, duckdb_con, "public.fresh2", 3)
    assert run.starts == 1 and run.running
    run.stop()

    rows = stopped_rows(run, duckdb_con, "public.fresh")
    assert sorted((r["id"], r["v"]) for r in rows) == \
        [(1, "one"), (2, "two"), (3, "three"), (4, "four")]
    assert all(r["cdc_op"] in ("c", "r") for r in rows)
    assert events(rows[-1:], "id") == [("c", 4)]
    rows = stopped_rows(run, duckdb_con, "public.fresh2")
    assert sorted(events(rows[:2], "k", "n", ops="cr"), key=lambda e: e[1]) in (
        [("c", "x", 1), ("c", "y", 2)], [("r", "x", 1), ("r", "y", 2)])
    assert events(rows[2:], "k", "n") == [("u", "y", 20)]
    assert len(rows) == 3


def test_values_floe_cannot_write_go_to_quarantine_and_the_row_still_lands(
        floe, pg, duckdb_con):
    pg.execute("CREATE TABLE prices (id int PRIMARY KEY, amount numeric(10,2), "
               "at timestamp, note text)")
    run = floe()
    run.start().wait_streaming()
    x1 = in_tx(pg, "INSERT INTO prices VALUES (1, 'NaN', '2024-01-01 00:00', 'nan')")
    x2 = in_tx(pg, "INSERT INTO prices VALUES (2, 1.50, 'infinity', 'inf')")
    in_tx(pg, "INSERT INTO prices VALUES (3, 2.25, '2024-05-06 07:08:09', 'ok')")
    wait_rows(run, duckdb_con, "public.prices", 3)
    run.wait_until(lambda: run.count("quarantine") >= 2, 60, what="2 quarantine rows")
    run.stop()

    rows = stopped_rows(run, duckdb_con, "public.prices")
    assert events(rows, "id", "amount", "at", "note") == [
        ("c", 1, None, dt.datetime(2024, 1, 1), "nan"),
        ("c", 2, Decimal("1.50"), None, "inf"),
        ("c", 3, Decimal("2.25"), dt.datetime(2024, 5, 6, 7, 8, 9), "ok"),
    ]
    q = run.rows(duckdb_con, "quarantine")
    assert len(q) == 2, q
    by_col = {r["column_name"]: r for r in q}
    assert set(by_col) == {"amount", "at"}, q
    nan, inf = by_col["amount"], by_col["at"]
    assert (nan["source_table"], nan["raw_text"], nan["reason"]) == \
        ("public.prices", "NaN", "not_a_number")
    assert (inf["source_table"], inf["raw_text"], inf["reason"]) == \
        ("public.prices", "infinity", "infinite")
    for qrow, brow, x in ((nan, rows[0], x1), (inf, rows[1], x2)):
        assert qrow["cdc_commit_lsn"] == brow["cdc_commit_lsn"], (qrow, brow)
        assert qrow["cdc_source_lsn"] == brow["cdc_source_lsn"], (qrow, brow)
        assert "detail" in qrow


def test_values_the_copy_cannot_write_go_to_quarantine_too(floe, pg, duckdb_con):
    # the same rule for the initial copy (binary COPY decoded into Arrow)
    pg.execute("CREATE TABLE prices (id int PRIMARY KEY, amount numeric(10,2), "
               "at timestamp, tags text[], note text)")
    pg.execute("INSERT INTO prices VALUES (1, 'NaN', '2024-01-01 00:00', '{a,b}', 'nan'), "
               "(2, 1.50, '-infinity', NULL, 'inf'), "
               "(3, 2.25, '2024-05-06 07:08:09', '{}', 'ok')")
    run = floe()
    run.start().wait_streaming()
    wait_rows(run, duckdb_con, "public.prices", 3)
    run.wait_until(lambda: run.count("quarantine") >= 2, 60, what="2 quarantine rows")
    run.stop()
    rows = sorted(stopped_rows(run, duckdb_con, "public.prices"), key=lambda r: r["id"])
    assert [(r["cdc_op"], r["id"], r["amount"], r["at"], r["tags"], r["note"])
            for r in rows] == [
        ("r", 1, None, dt.datetime(2024, 1, 1), ["a", "b"], "nan"),
        ("r", 2, Decimal("1.50"), None, None, "inf"),
        ("r", 3, Decimal("2.25"), dt.datetime(2024, 5, 6, 7, 8, 9), [], "ok"),
    ]
    q = run.rows(duckdb_con, "quarantine")
    by_col = {r["column_name"]: r for r in q}
    assert set(by_col) == {"amount", "at"}, q
    assert (by_col["amount"]["raw_text"], by_col["amount"]["reason"]) == ("NaN", "not_a_number")
    assert (by_col["at"]["raw_text"], by_col["at"]["reason"]) == ("-infinity", "infinite")
    # each quarantined value points at its row: same position (the copy's)
    for col, row in (("amount", rows[0]), ("at", rows[1])):
        assert by_col[col]["cdc_commit_lsn"] == row["cdc_commit_lsn"]
        assert by_col[col]["cdc_seq"] == row["cdc_seq"], (by_col[col], row)


def test_a_missing_warehouse_directory_is_created(floe, pg, duckdb_con):
    """A first run against a fresh path: floe creates the warehouse directory (and
    the SQLite catalog in it) rather than failing."""
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)")
    pg.execute("INSERT INTO t VALUES (1)")
    run = floe(make_warehouse=False)
    assert not run.warehouse.exists()
    run.start().wait_streaming()
    rows = wait_rows(run, duckdb_con, "public.t", 1)
    run.stop()
    assert events(rows, "id") == [("r", 1)]


def test_an_empty_published_table_is_copied_and_then_streamed(floe, pg, duckdb_con):
    """The initial copy of a table with no rows yet (the usual state of a new
    service's table) must not stop floe: it streams, and the first change lands."""
    pg.execute("CREATE TABLE empty_at_start (id int PRIMARY KEY, v text)")
    run = floe()
    run.start().wait_streaming(30)
    x = in_tx(pg, "INSERT INTO empty_at_start VALUES (1, 'first')")
    rows = wait_rows(run, duckdb_con, "public.empty_at_start", 1, timeout=30)
    run.stop()
    rows = stopped_rows(run, duckdb_con, "public.empty_at_start")
    assert [(r["cdc_op"], r["id"], r["v"], r["cdc_source_tx_id"]) for r in rows] == \
        [("c", 1, "first", x)]
