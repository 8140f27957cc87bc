"""The crash test of `floe run` (docs/design.md §3, §6): a mixed insert / update / delete
workload runs in a background thread while floe is SIGKILLed at random moments (at
least 20 times, 0.2-3 s apart, so some kills land inside checkpoint commits) and
restarted each time. Every source change is also recorded by an audit trigger into a
Postgres table that is not in the publication. At the end, for each table, Bronze's
change events (all but the snapshot's `r` rows) must equal the trigger's, exactly and
in commit order: zero missing, zero duplicated. Folding Bronze (latest per key by
(cdc_commit_lsn, cdc_seq)) must equal the source table's current contents."""

from __future__ import annotations

import queue
import os
import random
import threading
import time
import traceback

import psycopg
import pytest

from floerun import check_order, compare_events, floe, fold  # noqa: F401

TABLES = {
    "accounts": {"key": ["id"], "cols": ["id", "name", "balance"]},
    "lines": {"key": ["order_id", "line_no"], "cols": ["order_id", "line_no", "qty", "note"]},
    "docs": {"key": ["id"], "cols": ["id", "body", "n"]},
}

SETUP = """
CREATE TABLE accounts (id int PRIMARY KEY, name text, balance bigint);
CREATE TABLE lines (order_id int, line_no int, qty int, note text,
                    PRIMARY KEY (order_id, line_no));
CREATE TABLE docs (id int PRIMARY KEY, body text, n int);
INSERT INTO accounts SELECT g, 'acct ' || g, g * 10 FROM generate_series(1, 20000) g;
INSERT INTO lines SELECT o, l, o + l, CASE WHEN l = 2 THEN NULL ELSE 'note ' || o END
  FROM generate_series(1, 5000) o, generate_series(1, 3) l;
INSERT INTO docs SELECT d, (SELECT string_agg(md5(random()::text || i || d), '')
                            FROM generate_series(1, 300) i), 0
  FROM generate_series(1, 100) d;
-- The audit trail: every change with its transaction. Created after the initial rows
-- (those reach Bronze as the snapshot's r rows) and not in the publication.
CREATE TABLE audit_log (n bigserial PRIMARY KEY,
                        txid bigint NOT NULL DEFAULT pg_current_xact_id()::text::bigint,
                        tbl text NOT NULL, op text NOT NULL, old jsonb, new jsonb);
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit_log (tbl, op, old, new) VALUES (TG_TABLE_NAME, TG_OP,
    CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
    CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
  RETURN NULL;
END $$;
CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON lines
  FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON docs
  FOR EACH ROW EXECUTE FUNCTION audit_row();
"""
INITIAL = {"accounts": 20000, "lines": 15000, "docs": 100}
BIG_BODY = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 300))"


class Workload(threading.Thread):
    """One session, sequential transactions: the audit_log order is commit order."""

    def __init__(self, dsn: str, seed: int):
        super().__init__(daemon=True)
        self.dsn = dsn
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.commits = 0
        self.rollbacks = 0
        self.accounts = set(range(1, 20001))
        self.lines = {(o, l) for o in range(1, 5001) for l in range(1, 4)}
        self.docs = set(range(1, 101))
        self.next_account = 100000
        self.next_doc = 1000
        # Transactions of the test's own, run and committed by this session between
        # two of its own (so that the audit trail's order stays commit order).
        self.inject: queue.Queue = queue.Queue()

    def run(self):
        try:
            with psycopg.connect(self.dsn, autocommit=False) as conn:
                while not self.stop_event.is_set():
                    while not self.inject.empty():
                        self.inject.get()(conn)
                        conn.commit()
                    self.transaction(conn)
                    time.sleep(self.rng.uniform(0, 0.004))
        except Exception:
            self.error = traceback.format_exc()

    def transaction(self, conn):
        rng = self.rng
        accounts, lines, docs = set(self.accounts), set(self.lines), set(self.docs)
        next_account, next_doc = self.next_account, self.next_doc
        for _ in range(rng.randint(1, 4)):
            kind = rng.choices(
                ["acc_ins", "acc_upd", "acc_del", "acc_key", "line_ins", "line_upd",
                 "line_del", "line_key", "doc_ins", "doc_touch", "doc_body", "doc_del"],
                [10, 14, 5, 3, 10, 12, 5, 3, 2, 5, 2, 1])[0]
            if kind == "acc_ins":
                next_account += 1
                conn.execute("INSERT INTO accounts VALUES (%s, %s, %s)",
                             (next_account, f"new {next_account} 'q' \"dq\" é",
                              rng.randint(-10**12, 10**12)))
                accounts.add(next_account)
            elif kind == "acc_upd" and accounts:
                i = rng.choice(tuple(accounts))
                conn.execute("UPDATE accounts SET balance = balance + %s, name = %s "
                             "WHERE id = %s", (rng.randint(-100, 100),
                                               rng.choice(["x", "y", None, "zz"]), i))
            elif kind == "acc_del" and accounts:
                i = rng.choice(tuple(accounts))
                conn.execute("DELETE FROM accounts WHERE id = %s", (i,))
                accounts.discard(i)
            elif kind == "acc_key" and accounts:
                i = rng.choice(tuple(accounts))
                next_account += 1
                conn.execute("UPDATE accounts SET id = %s WHERE id = %s", (next_account, i))
                accounts.discard(i)
                accounts.add(next_account)
            elif kind == "line_ins":
                k = (rng.randint(1, 8000), rng.randint(1, 30))
                if k not in lines:
                    conn.execute("INSERT INTO lines VALUES (%s, %s, %s, %s)",
                                 (*k, rng.randint(0, 1000), rng.choice([None, "n", "ñ"])))
                    lines.add(k)
            elif kind == "line_upd" and lines:
                k = rng.choice(tuple(lines))
                conn.execute("UPDATE lines SET qty = qty + 1, note = %s "
                             "WHERE order_id = %s AND line_no = %s",
                             (rng.choice([None, "upd", "x'y"]), *k))
            elif kind == "line_del" and lines:
                k = rng.choice(tuple(lines))
                conn.execute("DELETE FROM lines WHERE order_id = %s AND line_no = %s", k)
                lines.discard(k)
            elif kind == "line_key" and lines:
                k = rng.choice(tuple(lines))
                new = (k[0], rng.randint(31, 10**6))
                if new not in lines:
                    conn.execute("UPDATE lines SET line_no = %s "
                                 "WHERE order_id = %s AND line_no = %s", (new[1], *k))
                    lines.discard(k)
                    lines.add(new)
            elif kind == "doc_ins":
                next_doc += 1
                conn.execute(f"INSERT INTO docs VALUES (%s, {BIG_BODY}, 0)", (next_doc,))
                docs.add(next_doc)
            elif kind == "doc_touch" and docs:
                # Leaves the TOASTed body alone: cdc_unchanged = [body].
                conn.execute("UPDATE docs SET n = n + 1 WHERE id = %s",
                             (rng.choice(tuple(docs)),))
            elif kind == "doc_body" and docs:
                conn.execute(f"UPDATE docs SET body = {BIG_BODY}, n = n + 1 WHERE id = %s",
                             (rng.choice(tuple(docs)),))
            elif kind == "doc_del" and docs:
                i = rng.choice(tuple(docs))
                conn.execute("DELETE FROM docs WHERE id = %s", (i,))
                docs.discard(i)
        if rng.random() < 0.08:
            conn.rollback()
            self.rollbacks += 1
            return
        conn.commit()
        self.commits += 1
        self.accounts, self.lines, self.docs = accounts, lines, docs
        self.next_account, self.next_doc = next_account, next_doc


def text(v):
    return None if v is None else str(v)


def expected_events(pg) -> list[tuple]:
    """Every change the audit trail recorded, in commit order, as Bronze must hold
    it: (table, op, txid, values, unchanged)."""
    out = []
    with pg.connect() as conn:
        cur = conn.execute("SELECT tbl, op, txid, old, new FROM audit_log ORDER BY n")
        for tbl, op, txid, old, new in cur:
            cols, keys = TABLES[tbl]["cols"], TABLES[tbl]["key"]
            full = tuple(text(new[c]) for c in cols) if new is not None else None
            key_only = tuple(text(old[c]) if c in keys else None for c in cols) \
                if old is not None else None
            if op == "INSERT":
                out.append((tbl, "c", txid, full, None))
            elif op == "DELETE":
                out.append((tbl, "d", txid, key_only, None))
            elif any(old[k] != new[k] for k in keys):
                out.append((tbl, "d", txid, key_only, None))
                out.append((tbl, "c", txid, full, None))
            elif tbl == "docs" and old["body"] == new["body"]:
                values = tuple(None if c == "body" else text(new[c]) for c in cols)
                out.append((tbl, "u", txid, values, ("body",)))
            else:
                out.append((tbl, "u", txid, full, None))
    return out


def bronze_events(tbl: str, rows: list[dict]) -> list[tuple]:
    cols = TABLES[tbl]["cols"]
    return [(tbl, r["cdc_op"], r["cdc_source_tx_id"], tuple(text(r[c]) for c in cols),
             tuple(r["cdc_unchanged"]) if r["cdc_unchanged"] is not None else None)
            for r in rows if r["cdc_op"] != "r"]


def compare(what: str, expected: list, got: list) -> None:
    def short(e):
        return None if e is None else (e[0], e[1], e[2],
                                       tuple((v[:20] + "...") if v and len(v) > 20 else v
                                             for v in e[3]), e[4])
    compare_events(what, expected, got, short)


def check_against_audit(run, pg, duckdb_con) -> None:
    """Writes one last audited transaction over the three tables, waits until Bronze
    shows it, stops floe, and checks Bronze against the audit trail: per table, its
    change events (PyIceberg and DuckDB agreeing) equal the trigger's exactly and in
    commit order, each initial row is one `r`, the fold equals the source (psql); and
    across tables (cdc_commit_lsn, cdc_seq) orders every change as it happened."""
    # Once each table shows its marker, everything before it in commit order is there.
    with pg.connect(autocommit=False) as conn:
        conn.execute("INSERT INTO accounts VALUES (-1, 'marker', 0)")
        conn.execute("INSERT INTO lines VALUES (-1, -1, 0, 'marker')")
        conn.execute("INSERT INTO docs VALUES (-1, 'marker', 0)")
        conn.commit()
    for tbl, key in (("accounts", {"id": -1}), ("lines", {"order_id": -1}),
                     ("docs", {"id": -1})):
        run.wait_until(lambda: run.has_row(f"public.{tbl}", **key), 120,
                       what=f"the final marker in Bronze {tbl}", interval=0.5)
    run.stop()

    expected = expected_events(pg)
    all_got = []
    for tbl, spec in TABLES.items():
        rows = run.rows(duckdb_con, f"public.{tbl}")  # PyIceberg and DuckDB agree
        check_order(tbl, rows)
        run.check_commit_lsn(f"public.{tbl}", rows)
        # The snapshot: every initial row exactly once, despite the kills.
        snap_keys = [tuple(r[k] for k in spec["key"]) for r in rows if r["cdc_op"] == "r"]
        assert len(snap_keys) == INITIAL[tbl] == len(set(snap_keys)), \
            (tbl, len(snap_keys), len(set(snap_keys)))
        got = bronze_events(tbl, rows)
        compare(f"public.{tbl}", [e for e in expected if e[0] == tbl], got)
        all_got.extend(zip(((r["cdc_commit_lsn"], r["cdc_seq"]) for r in rows
                            if r["cdc_op"] != "r"), got))
        # Folding Bronze gives the source table as it is now.
        folded = {k: tuple(text(v[c]) for c in spec["cols"])
                  for k, v in fold(rows, spec["key"]).items()}
        with pg.connect() as conn:
            cur = conn.execute(f"SELECT {', '.join(spec['cols'])} FROM {tbl}")
            source = {tuple(r[spec["cols"].index(k)] for k in spec["key"]):
                      tuple(text(v) for v in r) for r in cur}
        assert folded.keys() == source.keys(), (
            tbl, len(folded.keys() - source.keys()), len(source.keys() - folded.keys()))
        bad = [k for k in source if folded[k] != source[k]]
        assert not bad, (tbl, len(bad), bad[:3])
    # Across tables, (cdc_commit_lsn, cdc_seq) orders every change of a transaction
    # as it happened.
    compare("all tables", expected, [e for _, e in sorted(all_got)])


@pytest.mark.every_version
def test_sigkill_at_random_moments_loses_nothing_and_duplicates_nothing(
        floe, pg, duckdb_con):
    crash_test(floe, pg, duckdb_con, kills_wanted=22)


def crash_test(floe, pg, duckdb_con, kills_wanted: int, **pipeline) -> None:
    """The crash test on a pipeline made by floe(**pipeline) (test_s3_warehouse.py
    runs it on an object-store warehouse)."""
    started = time.monotonic()
    pg.execute(SETUP)
    run = floe(tables=["public.accounts", "public.lines", "public.docs"], interval="500ms",
               **pipeline)
    rng = random.Random(20240601)
    kills = 0

    # The first kill may land during the initial snapshot.
    run.start()
    time.sleep(rng.uniform(0.2, 1.5))
    run.check_alive()
    run.kill()
    kills += 1
    run.start()
    for tbl, n in INITIAL.items():
        run.wait_until(lambda: run.count(f"public.{tbl}") >= n, 90,
                       what=f"the initial snapshot of {tbl} ({n} rows)")

    # `make soak-crash` runs the same for an hour with a kill every 30-60 s
    # (docs/testing.md, case 7); CI runs `kills_wanted` kills 0.2-3 s apart.
    seconds = float(os.environ.get("FLOE_CRASH_SECONDS", "0"))
    low, high = (float(x) for x in
                 os.environ.get("FLOE_CRASH_KILL_INTERVAL", "0.2-3.0").split("-"))
    workload = Workload(pg.dsn, seed=7)
    workload.start()
    try:
        while (time.monotonic() - started < seconds) if seconds else kills < kills_wanted:
            time.sleep(rng.uniform(low, high))
            run.check_alive()  # floe must not die on its own
            assert workload.error is None, workload.error
            run.kill()
            kills += 1
            time.sleep(rng.uniform(0, 0.2))
            run.start()
    finally:
        workload.stop_event.set()
        workload.join(30)
    assert workload.error is None, workload.error
    assert workload.commits > 500, workload.commits

    check_against_audit(run, pg, duckdb_con)
    assert kills >= 20
    expected = expected_events(pg)
    elapsed = time.monotonic() - started
    print(f"{kills} kills, {workload.commits} commits, {workload.rollbacks} rollbacks, "
          f"{len(expected)} events, {elapsed:.0f}s")
