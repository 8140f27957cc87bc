"""Faults of the change stream, end to end (docs/testing.md cases 5, 6, 8, 18, 19
and 20): two `floe run` on one slot or one Bronze, SIGKILL inside a transaction of
hundreds of thousands of rows, multi-insert WAL records (COPY), streamed
transactions with savepoints, rollbacks and interleaving, and logical messages
across a restart that replays what Bronze holds.

Every test runs the real `floe` binary against a real PostgreSQL 15 and checks
Bronze (PyIceberg and DuckDB, which must agree) against an oracle that is not floe:
an audit trigger that records every row change with its transaction, the source
rows read with psql, and the WAL itself read with pg_walinspect (commit records
give each transaction's commit LSN and the commit order; MULTI_INSERT records the
change LSN many rows share)."""

from __future__ import annotations

import collections
import itertools
import os
import random
import threading
import time
import traceback

import psycopg
import pytest

from floerun import FloeRun, check_order, compare_events, floe, fold, lsn_int  # noqa: F401
from pgcluster import contrib_or_skip

@pytest.fixture(autouse=True)
def floe_tmpdir(tmp_path, monkeypatch):
    """floe's TMPDIR, where it spills streamed transactions: a SIGKILLed floe leaves
    its spill directory behind, so keep those in the test's own directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


# ---------------------------------------------------------------------------
# The audit trail: every row change with its (top-level) transaction, in a table
# that is not published.

AUDIT_SQL = """
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
"""


def audited(pg, *tables: str) -> None:
    """Creates the audit table and an AFTER ROW trigger on each table. (An AFTER
    trigger leaves COPY its multi-insert; a BEFORE trigger would not.)"""
    pg.execute(AUDIT_SQL)
    for t in tables:
        pg.execute(f"CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON {t} "
                   "FOR EACH ROW EXECUTE FUNCTION audit_row()")


def text(v):
    return None if v is None else str(v)


def audit_events(pg, spec: dict[str, dict], tx_order: list[int] | None = None
                 ) -> list[tuple]:
    """What Bronze must hold, from the audit trail: (table, op, txid, values as
    text) per change. Transactions in `tx_order` (commit order) when given, else in
    the trail's order (right when one session commits them one after another);
    within a transaction, the trail's order. Deletes carry the key only (REPLICA
    IDENTITY DEFAULT); an update of the key is a delete and an insert."""
    by_tx: dict[int, list[tuple]] = collections.defaultdict(list)
    order: list[int] = []
    with pg.connect() as conn:
        cur = conn.execute("SELECT tbl, op, txid, old, new FROM audit_log ORDER BY n")
        for tbl, op, txid, old, new in cur:
            if tbl not in spec:
                continue
            cols, keys = spec[tbl]["cols"], spec[tbl]["key"]
            full = tuple(text(new[c]) for c in cols) if new is not None else None
            key_only = tuple(text(old[c]) if c in keys else None for c in cols) \
                if old is not None else None
            out = by_tx[txid]
            if txid not in order:
                order.append(txid)
            if op == "INSERT":
                out.append((tbl, "c", txid, full))
            elif op == "DELETE":
                out.append((tbl, "d", txid, key_only))
            elif any(old[k] != new[k] for k in keys):
                out.append((tbl, "d", txid, key_only))
                out.append((tbl, "c", txid, full))
            else:
                out.append((tbl, "u", txid, full))
    if tx_order is not None:
        assert set(tx_order) >= set(order), \
            f"audited transactions without a commit: {set(order) - set(tx_order)}"
        order = [x for x in tx_order if x in by_tx]
    return [e for x in order for e in by_tx[x]]


def bronze_events(tbl: str, rows: list[dict], cols: list[str]) -> list[tuple]:
    return [(tbl, r["cdc_op"], r["cdc_source_tx_id"], tuple(text(r[c]) for c in cols))
            for r in rows if r["cdc_op"] != "r"]


def compare(what: str, expected: list, got: list) -> None:
    compare_events(what, expected, got)


def source_state(pg, table: str, cols: list[str], key: list[str]) -> dict:
    with pg.connect() as conn:
        cur = conn.execute(f"SELECT {', '.join(cols)} FROM {table}")
        return {tuple(text(r[cols.index(k)]) for k in key): tuple(text(v) for v in r)
                for r in cur}


def folded_state(rows: list[dict], cols: list[str], key: list[str]) -> dict:
    return {tuple(text(v) for v in k): tuple(text(v[c]) for c in cols)
            for k, v in fold(rows, key).items()}


# ---------------------------------------------------------------------------
# The WAL, read with pg_walinspect: an oracle for commit LSNs and commit order
# that does not go through logical decoding.

def walinspect(pg) -> None:
    contrib_or_skip(pg, "CREATE EXTENSION IF NOT EXISTS pg_walinspect", "pg_walinspect")


def wal_lsn(pg) -> str:
    return pg.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]


def wal_commits(pg, start: str, end: str) -> list[tuple[int, int]]:
    """(xid, LSN of the COMMIT record) of every transaction that committed between
    the two WAL positions, in commit order."""
    rows = pg.execute(
        "SELECT xid::text::bigint, start_lsn::text FROM pg_get_wal_records_info(%s, %s) "
        "WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%%' "
        "ORDER BY start_lsn", (start, end))
    return [(x, lsn_int(lsn)) for x, lsn in rows]


def xid32(x: int) -> int:
    return x & 0xFFFFFFFF


# ---------------------------------------------------------------------------
# Shared helpers

def wait_flushed(run, pg, timeout: float = 120) -> None:
    """Waits until floe's slot confirmed everything written so far: every change
    committed before this call is in Bronze."""
    target = lsn_int(pg.execute("SELECT pg_current_wal_lsn()::text")[0][0])
    run.wait_until(lambda: (run.slot_confirmed_flush() or 0) >= target, timeout=timeout,
                   what=f"slot {run.slot} to confirm {target:X}", interval=0.25)


def twin(floe, first: FloeRun, slot: str | None = None) -> FloeRun:
    """A second pipeline with `first`'s pipeline file (its warehouse, its service,
    its slot unless `slot` is given), a log of its own."""
    other = floe(make_warehouse=False)
    config = first.config_path.read_text()
    if slot is not None:
        config = config.replace(f"slot: {first.slot}\n", f"slot: {slot}\n")
        other.slot = slot
    else:
        other.slot = first.slot
    other.config_path.write_text(config)
    other.warehouse = first.warehouse
    other.service = first.service
    return other


def stream_stats(pg, slot: str) -> tuple[int, int]:
    """(stream_txns, stream_bytes) of the slot in pg_stat_replication_slots: how many
    transactions the server streamed before they ended."""
    rows = pg.execute("SELECT stream_txns, stream_bytes FROM pg_stat_replication_slots "
                      "WHERE slot_name = %s", (slot,))
    return (rows[0][0], rows[0][1]) if rows else (0, 0)


def xid_of(conn) -> int:
    return conn.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]


def no_duplicates(run, con, table: str) -> None:
    """Every (cdc_commit_lsn, cdc_seq) once, for PyIceberg and for DuckDB: a change
    written twice shows here before any row comparison."""
    t = run.arrow_pyiceberg(table)
    pairs = collections.Counter(zip(t.column("cdc_commit_lsn").to_pylist(),
                                    t.column("cdc_seq").to_pylist()))
    twice = sorted(p for p, n in pairs.items() if n > 1)
    assert not twice, (f"{table} (PyIceberg): {t.num_rows} rows, "
                       f"{t.num_rows - len(pairs)} of them repeat a (cdc_commit_lsn, "
                       f"cdc_seq), e.g. {twice[:5]}")
    n, distinct = con.execute(
        "SELECT count(*), count(DISTINCT (cdc_commit_lsn, cdc_seq)) FROM iceberg_scan(?)",
        [run.metadata_path(table)]).fetchone()
    assert n == distinct == t.num_rows, (table, "DuckDB", n, distinct, t.num_rows)


def marker(pg, run, table: str = "acc", timeout: float = 120) -> None:
    """One last audited insert; once Bronze shows it, everything committed before is
    in Bronze too."""
    pg.execute(f"INSERT INTO {table} (id, v, n) VALUES (-1, 'marker', 0)")
    run.wait_until(lambda: run.has_row(f"public.{table}", id=-1), timeout,
                   what=f"the marker in Bronze {table}", interval=0.5)


# ---------------------------------------------------------------------------
# Case 6: SIGKILL inside a transaction of hundreds of thousands of rows

# CI writes 200,000 rows; `make test-long` the full 1,000,000 of the checklist.
BIG_ROWS = int(os.environ.get("FLOE_BIG_TX_ROWS", "200000"))


def data_files(run, table: str) -> set[str]:
    """Parquet files on disk under the Bronze table's data directory (committed or
    not)."""
    d = run.warehouse.joinpath("bronze", run.service, *table.split("."), "data")
    return {str(p) for p in d.rglob("*.parquet")} if d.exists() else set()


def live_files(run, table: str) -> set[str]:
    """Data files the table's current snapshot references (PyIceberg)."""
    try:
        t = run.load(table)
    except Exception:
        return set()
    return {task.file.file_path.removeprefix("file://") for task in t.scan().plan_files()}


def rows_of_tx(run, table: str, xid: int) -> int:
    from pyiceberg.expressions import EqualTo
    try:
        t = run.load(table)
    except Exception:
        return 0
    return t.scan(row_filter=EqualTo("cdc_source_tx_id", xid),
                  selected_fields=("cdc_seq",)).to_arrow().num_rows


def kill_while_writing(run, table: str, xid: int, timeout: float = 120) -> int:
    """Waits until floe has written Parquet files of `table` that no snapshot
    references yet (rows of the transaction being received), SIGKILLs it, and
    checks the kill came before the transaction's commit. Returns how many such
    files were left behind."""
    before = data_files(run, table)

    def writing():
        new = data_files(run, table) - before
        return new if new and any(os.path.getsize(f) > 0 for f in new) else None
    run.wait_until(writing, timeout, what=f"floe writing Parquet files of {table}",
                   interval=0.05)
    run.kill()
    assert rows_of_tx(run, table, xid) == 0, \
        "the kill came too late: the transaction was already committed"
    orphans = data_files(run, table) - live_files(run, table)
    assert orphans, "no file of the transaction was left behind by the kill"
    return len(orphans)


def test_sigkill_inside_a_big_transaction_spanning_checkpoints_lands_it_once(
        floe, pg, duckdb_con):
    """A 200,000-row transaction (inserts, then updates and deletes of some of its
    rows) is received and written to Parquet over several checkpoint intervals;
    floe is SIGKILLed twice while writing it (files on disk, nothing committed),
    then once more after it landed with its slot set back to before it (as a kill
    between the commit and the flush leaves it), so the server sends it a fourth
    time. It must land exactly once: one xid, one commit LSN (the WAL's commit
    record, pg_walinspect), every (cdc_commit_lsn, cdc_seq) distinct and cdc_seq
    0..n-1; the c rows equal the inserted rows and the fold equals the source rows
    (psql), for PyIceberg and DuckDB."""
    walinspect(pg)
    pg.execute("CREATE TABLE big (id int PRIMARY KEY, v text, n bigint)")
    pg.execute("CREATE TABLE small (id int PRIMARY KEY, v text)")
    run = floe(tables=["public.big", "public.small"], interval="200ms")
    run.start().wait_streaming()
    pg.execute("INSERT INTO big VALUES (0, 'before', 0)")
    pg.execute("INSERT INTO small VALUES (1, 'before')")
    wait_flushed(run, pg)
    # A slot that stays where floe is now, to send the big transaction again later.
    pg.execute("SELECT pg_copy_logical_replication_slot(%s, 'floe_behind')", (run.slot,))
    start = wal_lsn(pg)
    with pg.connect(autocommit=False) as conn:
        x = xid_of(conn)
        conn.execute("INSERT INTO big SELECT g, md5(g::text), g * 3 "
                     f"FROM generate_series(1, {BIG_ROWS}) g")
        conn.execute("UPDATE big SET n = -n, v = upper(v) WHERE id % 1000 = 7")
        conn.execute("DELETE FROM big WHERE id % 1000 = 9")
        conn.commit()
    pg.execute("INSERT INTO small VALUES (2, 'after')")
    end = wal_lsn(pg)

    left = kill_while_writing(run, "public.big", x)
    print("streamed:", stream_stats(pg, run.slot))
    run.start()
    left += kill_while_writing(run, "public.big", x)
    run.start()
    run.wait_until(lambda: run.has_row("public.small", id=2), 180,
                   what="the transaction after the big one", interval=0.5)
    # Bronze holds it; the slot is set back to before it.
    run.kill()
    pg.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
    pg.execute("SELECT pg_copy_logical_replication_slot('floe_behind', %s)", (run.slot,))
    pg.execute("SELECT pg_drop_replication_slot('floe_behind')")
    commit_of = dict(wal_commits(pg, start, end))
    assert run.slot_confirmed_flush() < commit_of[xid32(x)]
    run.start().wait_streaming()
    pg.execute("INSERT INTO small VALUES (3, 'last')")
    run.wait_until(lambda: run.has_row("public.small", id=3), 180,
                   what="the last small row", interval=0.5)
    run.stop()
    # The server did decode and send the big transaction again (the new slot's
    # counters start at zero).
    sent = pg.execute("SELECT total_txns, total_bytes FROM pg_stat_replication_slots "
                      "WHERE slot_name = %s", (run.slot,))[0]
    print(f"{left} files left behind by the kills; sent again: {sent}")
    assert sent[0] >= 3 and sent[1] > BIG_ROWS * 50, sent

    n_upd = BIG_ROWS // 1000
    n_del = BIG_ROWS // 1000
    n = BIG_ROWS + n_upd + n_del
    md = run.metadata_path("public.big")
    got = duckdb_con.execute("""
        SELECT count(*), count(DISTINCT (cdc_commit_lsn, cdc_seq)),
               min(cdc_seq), max(cdc_seq), count(DISTINCT cdc_commit_lsn),
               min(cdc_commit_lsn), count(*) FILTER (WHERE cdc_op = 'c'),
               count(*) FILTER (WHERE cdc_op = 'u'), count(*) FILTER (WHERE cdc_op = 'd')
        FROM iceberg_scan(?) WHERE cdc_source_tx_id = ?""", [md, x]).fetchone()
    assert got == (n, n, 0, n - 1, 1, commit_of[xid32(x)], BIG_ROWS, n_upd, n_del), got
    no_duplicates(run, duckdb_con, "public.big")
    assert duckdb_con.execute("SELECT count(*) FROM iceberg_scan(?)", [md]).fetchone()[0] \
        == n + 1

    t = run.arrow_pyiceberg("public.big")
    mine = [r for r in t.to_pylist() if r["cdc_source_tx_id"] == x]
    assert len(mine) == n
    assert [r["cdc_seq"] for r in mine] == list(range(n))
    assert {r["cdc_commit_lsn"] for r in mine} == {commit_of[xid32(x)]}
    # The inserts, row for row, as PostgreSQL computes them.
    with pg.connect() as conn:
        inserted = conn.execute(f"SELECT g, md5(g::text), g * 3 FROM generate_series(1, "
                                f"{BIG_ROWS}) g").fetchall()
        now = {r[0]: r for r in conn.execute("SELECT id, v, n FROM big").fetchall()}
    assert [(r["id"], r["v"], r["n"]) for r in mine if r["cdc_op"] == "c"] == inserted
    folded = {k[0]: (k[0], v["v"], v["n"]) for k, v in fold(t.to_pylist(), ["id"]).items()}
    assert folded == now
    small = run.rows(duckdb_con, "public.small")
    assert [(r["cdc_op"], r["id"], r["v"]) for r in small] == [
        ("c", 1, "before"), ("c", 2, "after"), ("c", 3, "last")]


# ---------------------------------------------------------------------------
# Case 8: many rows sharing one change LSN (COPY's multi-insert records),
# interleaved with other sessions

ITEMS = {"items": {"key": ["id"], "cols": ["id", "grp", "v"]}}


def copy_rows(conn, rows) -> None:
    with conn.cursor().copy("COPY items (id, grp, v) FROM STDIN") as cp:
        for r in rows:
            cp.write_row(r)


def multi_inserts(pg, start: str, end: str, relfilenode: int) -> dict[int, int]:
    """LSN -> tuple count of every MULTI_INSERT record on the relation between the
    two WAL positions (pg_walinspect; PostgreSQL 15 describes one as
    'N tuples flags 0x..', 16 and later as 'ntuples: N, flags: 0x..')."""
    import re
    out = {}
    for lsn, desc in pg.execute(
            "SELECT start_lsn::text, description FROM pg_get_wal_records_info(%s, %s) "
            "WHERE resource_manager = 'Heap2' AND record_type LIKE 'MULTI_INSERT%%' "
            "AND block_ref ~ %s", (start, end, rf"rel \d+/\d+/{relfilenode}( |$)")):
        m = re.search(r"(\d+) tuples|ntuples: (\d+)", desc)
        assert m, desc
        out[lsn_int(lsn)] = int(m.group(1) or m.group(2))
    return out


def test_copy_multi_insert_rows_share_a_change_lsn_and_land_as_the_audit_trail_says(
        floe, pg, duckdb_con):
    """COPY FROM STDIN writes multi-insert WAL records: many rows, one change LSN.
    Four sessions: A copies, B inserts, copies and updates and commits first, A
    copies again, updates rows of both and deletes, C and D copy at the same time
    from two threads (their records may interleave in the WAL); A commits last.
    Bronze (PyIceberg and DuckDB) must equal the audit trigger's changes, the
    transactions in the WAL's commit order, each with the commit LSN of its COMMIT
    record; and the copied rows' cdc_source_lsn values must be exactly the
    MULTI_INSERT records of the table, each holding as many Bronze rows as the
    record has tuples (pg_walinspect)."""
    walinspect(pg)
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, grp int, v text)")
    audited(pg, "items")
    run = floe(tables=["public.items"])
    run.start().wait_streaming()
    relfilenode = pg.execute("SELECT pg_relation_filenode('items')")[0][0]
    start = wal_lsn(pg)

    def rows(lo, hi, grp):
        return [(i, grp, f"{grp}:{i} \t'\"\\ é") for i in range(lo, hi)]

    copies: dict[int, str] = {}
    with pg.connect(autocommit=False) as a, pg.connect(autocommit=False) as b:
        xa, xb = xid_of(a), xid_of(b)
        copy_rows(a, rows(1, 3001, 1))
        b.execute("INSERT INTO items VALUES (10001, 2, 'b single'), (10002, 2, 'b two')")
        copy_rows(b, rows(20001, 22001, 2))
        b.execute("UPDATE items SET v = 'b updated' WHERE id % 100 = 1 AND grp = 2")
        b.commit()
        copy_rows(a, rows(3001, 5001, 1))
        a.execute("UPDATE items SET v = 'a updated ' || id WHERE id % 250 = 0")
        a.execute("DELETE FROM items WHERE id % 333 = 0")

        # C and D copy at the same time, each in a thread of its own.
        errors = []

        def copier(lo, hi, grp):
            try:
                with pg.connect(autocommit=False) as c:
                    copies[xid_of(c)] = f"copier {grp}"
                    copy_rows(c, rows(lo, hi, grp))
                    c.commit()
            except Exception:
                errors.append(traceback.format_exc())
        threads = [threading.Thread(target=copier, args=(40001 + k * 10000,
                                                         48001 + k * 10000, 3 + k))
                   for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        a.execute("UPDATE items SET grp = -grp WHERE id IN (3000, 20002, 40001, 50001)")
        a.commit()
    pg.execute("INSERT INTO items VALUES (-1, 0, 'marker')")
    end = wal_lsn(pg)
    run.wait_until(lambda: run.has_row("public.items", id=-1), 120,
                   what="the marker in Bronze", interval=0.5)
    run.stop()

    commits = wal_commits(pg, start, end)
    commit_lsn = dict(commits)
    no_duplicates(run, duckdb_con, "public.items")
    rows_ = run.rows(duckdb_con, "public.items")
    check_order("public.items", rows_)
    cols = ITEMS["items"]["cols"]
    full_xids = {xid32(r["cdc_source_tx_id"]): r["cdc_source_tx_id"] for r in rows_}
    order = [full_xids.get(x, x) for x, _ in commits]
    compare("public.items", audit_events(pg, ITEMS, tx_order=order),
            bronze_events("items", rows_, cols))
    for r in rows_:
        assert r["cdc_commit_lsn"] == commit_lsn[xid32(r["cdc_source_tx_id"])], r
    by_tx = collections.defaultdict(list)
    for r in rows_:
        by_tx[r["cdc_source_tx_id"]].append(r["cdc_seq"])
    assert all(seqs == list(range(len(seqs))) for seqs in by_tx.values())
    # B committed before A, though A started first.
    assert commit_lsn[xid32(xb)] < commit_lsn[xid32(xa)]
    assert len(copies) == 2 and all(x in by_tx for x in copies)

    # The copied rows and the MULTI_INSERT records: the same LSNs, and at each as
    # many rows as the record has tuples.
    records = multi_inserts(pg, start, end, relfilenode)
    copied = collections.Counter(
        r["cdc_source_lsn"] for r in rows_
        if r["cdc_op"] == "c" and r["id"] not in (10001, 10002, -1))
    assert copied == collections.Counter(records), (
        f"{len(copied)} change LSNs in Bronze, {len(records)} MULTI_INSERT records; "
        f"e.g. Bronze {sorted(copied.items())[:3]}, WAL {sorted(records.items())[:3]}")
    assert sum(copied.values()) == 3000 + 2000 + 2000 + 2 * 8000
    assert max(copied.values()) > 50, max(copied.values())
    # Whether the two threads' records interleaved depends on the scheduler: shown,
    # not asserted (A's and B's statements interleave in any case).
    lsns = {x: sorted(r["cdc_source_lsn"] for r in rows_ if r["cdc_source_tx_id"] == x)
            for x in copies}
    (x1, l1), (x2, l2) = lsns.items()
    print(f"copier WAL ranges: {l1[0]:X}..{l1[-1]:X} and {l2[0]:X}..{l2[-1]:X}")


# ---------------------------------------------------------------------------
# Cases 18 and 19: streamed transactions (logical_decoding_work_mem at its 64 kB
# minimum, so the server sends a transaction's changes while it is still open)

STR = {"st": {"key": ["id"], "cols": ["id", "v", "n"]}}


def insert_range(conn, lo: int, hi: int, tag: str) -> None:
    conn.execute("INSERT INTO st SELECT g, %s::text || ':' || g || repeat('.', 80), g "
                 "FROM generate_series(%s::int, %s::int) g", (tag, lo, hi))


def wait_streamed(run, pg, since_bytes: int, more: int, what: str) -> int:
    """Waits until the server has streamed at least `more` bytes of open
    transactions since `since_bytes` (pg_stat_replication_slots): the changes made
    so far were sent to floe before their transaction ended."""
    def grown():
        b = stream_stats(pg, run.slot)[1]
        return b if b >= since_bytes + more else None
    return run.wait_until(grown, 120, what=what, interval=0.1)


def check_st(run, pg, con, tx_order=None) -> list[dict]:
    no_duplicates(run, con, "public.st")
    rows = run.rows(con, "public.st")
    check_order("public.st", rows)
    run.check_commit_lsn("public.st", rows)
    cols, key = STR["st"]["cols"], STR["st"]["key"]
    compare("public.st", audit_events(pg, STR, tx_order=tx_order),
            bronze_events("st", rows, cols))
    assert folded_state(rows, cols, key) == source_state(pg, "st", cols, key)
    return rows


def spill_bytes(tmp, xid: int) -> int:
    """Bytes of floe's spill files of transaction `xid` under `tmp` (its TMPDIR)."""
    return sum(p.stat().st_size for p in tmp.glob(f"floe-spill-*/xid-{xid}.spill"))


def test_a_streamed_transaction_with_rolled_back_savepoints_keeps_only_what_survived(
        small_decoding_memory, floe, pg, duckdb_con, floe_tmpdir):
    """A streamed transaction of ~30,000 changes with savepoints: one rolled back
    after its inserts, updates and deletes were streamed to floe (the slot's
    stream_bytes grew past them before ROLLBACK TO), one released with a nested one
    rolled back inside it; and a second streamed transaction rolled back whole.
    floe is SIGKILLed in the middle of the first, while it is open (its spill file
    holds what was streamed, the rolled-back savepoint included), and restarted:
    the server streams it again from its start. Bronze (PyIceberg and DuckDB)
    equals the audit trigger: exactly the surviving changes in order. A
    transactional message in the rolled-back savepoint never reaches
    pg_logical_messages; the one outside it does, once."""
    tmp = floe_tmpdir
    pg.execute("CREATE TABLE st (id int PRIMARY KEY, v text, n int)")
    audited(pg, "st")
    run = floe(tables=["public.st"])
    run.start().wait_streaming()
    base_txns, base = stream_stats(pg, run.slot)
    with pg.connect(autocommit=False) as c:
        x1 = xid_of(c)
        insert_range(c, 1, 10000, "kept")
        c.execute("SELECT pg_logical_emit_message(true, 'st', 'kept message')")
        c.execute("SAVEPOINT s1")
        insert_range(c, 10001, 20000, "gone")
        c.execute("UPDATE st SET n = -n WHERE id <= 5000")
        c.execute("DELETE FROM st WHERE id BETWEEN 100 AND 199")
        c.execute("SELECT pg_logical_emit_message(true, 'st', 'rolled back message')")
        b = wait_streamed(run, pg, base, 15000 * 80,
                          "the savepoint's changes to be streamed")
        c.execute("ROLLBACK TO SAVEPOINT s1")
        insert_range(c, 20001, 25000, "kept")
        b = wait_streamed(run, pg, b, 5000 * 80, "the rows after ROLLBACK TO")
        run.wait_until(lambda: spill_bytes(tmp, x1) > 20000 * 80, 60,
                       what="floe to spill the open transaction")
        run.kill()
        run.start()
        c.execute("SAVEPOINT s2")
        insert_range(c, 30001, 35000, "released")
        c.execute("SAVEPOINT s3")
        insert_range(c, 40001, 45000, "nested")
        c.execute("UPDATE st SET v = 'nested' WHERE id % 7 = 0")
        b = wait_streamed(run, pg, b, 5000 * 80, "the nested savepoint to be streamed")
        c.execute("ROLLBACK TO SAVEPOINT s3")
        c.execute("RELEASE SAVEPOINT s2")
        c.execute("UPDATE st SET n = n + 1000000 WHERE id % 1000 = 0")
        c.execute("DELETE FROM st WHERE id % 1000 = 1")
        c.commit()
        x2 = xid_of(c)
        insert_range(c, 100001, 120000, "aborted")
        c.execute("SAVEPOINT s4")
        c.execute("UPDATE st SET v = 'aborted' WHERE id <= 10000")
        wait_streamed(run, pg, b, 25000 * 80, "the aborted transaction to be streamed")
        c.rollback()
    marker(pg, run, "st")
    run.stop()
    txns = stream_stats(pg, run.slot)[0] - base_txns
    assert txns >= 2, f"{txns} transactions streamed"
    print("spill files left:", {str(p.relative_to(tmp)): p.stat().st_size
                                for p in tmp.rglob("*") if p.is_file()})

    rows = check_st(run, pg, duckdb_con)
    assert {r["cdc_source_tx_id"] for r in rows} - {x1} == {
        r["cdc_source_tx_id"] for r in rows if r["id"] == -1}
    assert x2 not in {r["cdc_source_tx_id"] for r in rows}
    ids = {r["id"] for r in rows if r["cdc_op"] == "c"}
    assert ids == set(range(1, 10001)) | set(range(20001, 25001)) | \
        set(range(30001, 35001)) | {-1}
    assert not any(r["v"] and r["v"].startswith(("gone", "nested", "aborted"))
                   for r in rows)
    msgs = run.rows(duckdb_con, "pg_logical_messages")
    assert [(m["prefix"], m["content"], m["cdc_source_tx_id"]) for m in msgs
            if m["prefix"] == "st"] == [("st", "kept message", x1)]


def test_two_streamed_transactions_interleaved_land_in_commit_order(
        small_decoding_memory, floe, pg, duckdb_con):
    """Two sessions each run a transaction far over logical_decoding_work_mem, in
    alternating steps, so the server streams blocks of both while both are open
    (stream_txns grows by 2 before either commits). Round 1: the later one commits
    first; round 2: the earlier one does. Bronze (PyIceberg and DuckDB) equals the
    audit trigger with the transactions in the WAL's commit order, each row carrying
    the LSN of its transaction's COMMIT record (pg_walinspect)."""
    walinspect(pg)
    pg.execute("CREATE TABLE st (id int PRIMARY KEY, v text, n int)")
    audited(pg, "st")
    run = floe(tables=["public.st"])
    run.start().wait_streaming()
    start = wal_lsn(pg)
    xs = []
    for rnd, later_first in ((1, True), (2, False)):
        base_txns, b = stream_stats(pg, run.slot)
        with pg.connect(autocommit=False) as a, pg.connect(autocommit=False) as bb:
            xa, xb = xid_of(a), xid_of(bb)
            off = rnd * 1_000_000
            for step in range(3):
                insert_range(a, off + step * 4000 + 1, off + step * 4000 + 4000,
                             f"a{rnd}")
                b = wait_streamed(run, pg, b, 4000 * 80, f"round {rnd}: a's step {step}")
                insert_range(bb, off + 500_000 + step * 4000 + 1,
                             off + 500_000 + step * 4000 + 4000, f"b{rnd}")
                b = wait_streamed(run, pg, b, 4000 * 80, f"round {rnd}: b's step {step}")
            a.execute("UPDATE st SET n = -n WHERE id %% 10 = 0 AND id BETWEEN %s AND %s",
                      (off, off + 499_999))
            bb.execute("DELETE FROM st WHERE id %% 10 = 5 AND id > %s", (off + 500_000,))
            run.wait_until(lambda: stream_stats(pg, run.slot)[0] >= base_txns + 2, 60,
                           what=f"round {rnd}: both transactions streamed while open")
            first, second = (bb, a) if later_first else (a, bb)
            first.commit()
            second.commit()
        xs.append((xa, xb))
    marker(pg, run, "st")
    end = wal_lsn(pg)
    run.stop()

    commits = wal_commits(pg, start, end)
    commit_lsn = dict(commits)
    (xa1, xb1), (xa2, xb2) = xs
    assert commit_lsn[xid32(xb1)] < commit_lsn[xid32(xa1)]
    assert commit_lsn[xid32(xa2)] < commit_lsn[xid32(xb2)]
    full = {xid32(x): x for pair in xs for x in pair}
    rows = check_st(run, pg, duckdb_con,
                    tx_order=[full.get(x, x) for x, _ in commits])
    for r in rows:
        assert r["cdc_commit_lsn"] == commit_lsn[xid32(r["cdc_source_tx_id"])], r
    got = [x for x, _ in itertools.groupby(r["cdc_source_tx_id"] for r in rows)]
    assert got[:4] == [xb1, xa1, xa2, xb2], got


# ---------------------------------------------------------------------------
# Case 20: logical messages, rolled back or not, across SIGKILLs and a replay

MSG = {"msg": {"key": ["id"], "cols": ["id", "v"]}}


def emit(conn, transactional: bool, prefix: str, content: str) -> int:
    """pg_logical_emit_message; returns the message's LSN as PostgreSQL reports it."""
    return lsn_int(conn.execute("SELECT pg_logical_emit_message(%s, %s, %s)::text",
                                (transactional, prefix, content)).fetchone()[0])


def message_batch(pg, i: int, expected: list[tuple]) -> None:
    """One round of messages. Kept: a transactional one in a committed transaction
    (beside a row), non-transactional ones inside that transaction, inside a rolled
    back one and on their own, and a transactional one in a transaction that touches
    no table. Never kept: a transactional one in a rolled-back savepoint, and one in
    a rolled-back transaction. `expected` gets (prefix, content, transactional, LSN,
    xid of a transactional one)."""
    with pg.connect(autocommit=False) as c:
        x = xid_of(c)
        c.execute("INSERT INTO msg VALUES (%s, %s)", (i, f"row {i}"))
        expected.append(("audit", f"tx {i}", True, emit(c, True, "audit", f"tx {i}"), x))
        c.execute("SAVEPOINT s")
        emit(c, True, "audit", f"rolled back savepoint {i}")
        c.execute("INSERT INTO msg VALUES (%s, 'rolled back savepoint')", (-i - 1,))
        c.execute("ROLLBACK TO SAVEPOINT s")
        content = f"non-transactional in committed {i}"
        expected.append(("note", content, False, emit(c, False, "note", content), None))
        c.commit()
    with pg.connect(autocommit=False) as c:
        c.execute("INSERT INTO msg VALUES (%s, 'rolled back')", (-i - 100_000,))
        emit(c, True, "audit", f"rolled back {i}")
        content = f"non-transactional in rolled back {i}"
        expected.append(("note", content, False, emit(c, False, "note", content), None))
        c.rollback()
    with pg.connect(autocommit=False) as c:
        x = xid_of(c)
        content = f"message only {i}"
        expected.append(("audit", content, True, emit(c, True, "audit", content), x))
        c.commit()
    with pg.connect() as c:
        content = f"standalone {i}"
        expected.append(("note", content, False, emit(c, False, "note", content), None))


def test_logical_messages_land_once_across_sigkills_and_a_replayed_slot(
        floe, pg, duckdb_con):
    """Rounds of messages (message_batch) while floe is SIGKILLed: once after the
    first rounds all landed, with its slot then set back to before them (as a kill
    between a checkpoint's commit and its flush leaves it: the server sends them
    all again, slot position checked with psql), and then at random moments between
    rounds. pg_logical_messages (PyIceberg and DuckDB) must hold exactly the
    expected messages, each once: the LSN PostgreSQL returned for it, transactional
    ones with their transaction's xid and the LSN of its COMMIT record
    (pg_walinspect), non-transactional ones, even from a rolled-back transaction,
    with no commit LSN; none from a rolled-back transaction or savepoint. The
    table's rows equal the audit trigger's."""
    walinspect(pg)
    pg.execute("CREATE TABLE msg (id int PRIMARY KEY, v text)")
    audited(pg, "msg")
    run = floe(tables=["public.msg"])
    run.start().wait_streaming()
    wait_flushed(run, pg)
    pg.execute("SELECT pg_copy_logical_replication_slot(%s, 'floe_behind')", (run.slot,))
    start = wal_lsn(pg)
    expected: list[tuple] = []

    def ours(m):
        return m["prefix"] in ("audit", "note")

    def landed():
        return run.pyiceberg_count_where("pg_logical_messages", ours) >= len(expected)

    for i in range(4):
        message_batch(pg, i, expected)
    run.wait_until(landed, 60, what="the first rounds' messages in Bronze")
    run.kill()
    pg.execute("SELECT pg_drop_replication_slot(%s)", (run.slot,))
    pg.execute("SELECT pg_copy_logical_replication_slot('floe_behind', %s)", (run.slot,))
    pg.execute("SELECT pg_drop_replication_slot('floe_behind')")
    assert run.slot_confirmed_flush() < min(e[3] for e in expected)
    run.start()
    # The server sends the first rounds' 8 committed transactions again (the new
    # slot's counters start at zero).
    run.wait_until(lambda: pg.execute(
        "SELECT total_txns FROM pg_stat_replication_slots WHERE slot_name = %s",
        (run.slot,))[0][0] >= 8, 60, what="the first rounds sent again")

    rng = random.Random(20)
    for i in range(4, 16):
        message_batch(pg, i, expected)
        if i % 3 == 0:
            time.sleep(rng.uniform(0, 0.6))
            run.kill()
            run.start()
    run.wait_streaming()
    with pg.connect(autocommit=False) as c:
        x = xid_of(c)
        expected.append(("audit", "last", True, emit(c, True, "audit", "last"), x))
        c.commit()
    run.wait_until(lambda: run.has_row("pg_logical_messages", content="last"), 120,
                   what="the last message in Bronze", interval=0.5)
    end = wal_lsn(pg)
    run.stop()

    commit_lsn = dict(wal_commits(pg, start, end))
    msgs = [m for m in run.rows(duckdb_con, "pg_logical_messages") if ours(m)]
    got = sorted((m["prefix"], m["content"], m["transactional"], m["cdc_source_lsn"],
                  m["cdc_source_tx_id"] if m["transactional"] else None) for m in msgs)
    compare("pg_logical_messages", sorted(expected), got)
    for m in msgs:
        if m["transactional"]:
            assert m["cdc_commit_lsn"] == commit_lsn[xid32(m["cdc_source_tx_id"])], m
        else:
            assert m["cdc_commit_lsn"] is None, m
        assert m["content_bytes"] == m["content"].encode()
    no_duplicates_msgs = collections.Counter(m["cdc_source_lsn"] for m in msgs)
    assert max(no_duplicates_msgs.values()) == 1
    assert not any("rolled back savepoint" in m["content"] or
                   m["content"].startswith("rolled back") for m in msgs)

    no_duplicates(run, duckdb_con, "public.msg")
    rows = run.rows(duckdb_con, "public.msg")
    check_order("public.msg", rows)
    compare("public.msg", audit_events(pg, MSG), bronze_events("msg", rows, ["id", "v"]))
    assert folded_state(rows, ["id", "v"], ["id"]) == source_state(pg, "msg", ["id", "v"],
                                                                   ["id"])


# ---------------------------------------------------------------------------
# Case 5: two engines on one slot or one warehouse (last in the file: two of its
# tests fail until floe refuses a second engine, and `-x` should not hide the rest)

class Workload(threading.Thread):
    """Random inserts, updates, key changes and deletes on `acc`, one transaction
    after another from one session (so the audit trail's order is commit order);
    some transactions roll back."""

    def __init__(self, dsn: str, seed: int, keys: set[int]):
        super().__init__(daemon=True)
        self.dsn = dsn
        self.rng = random.Random(seed)
        self.keys = set(keys)
        self.next_key = 1_000_000
        self.stop_event = threading.Event()
        self.error: str | None = None
        self.commits = 0

    def run(self):
        try:
            with psycopg.connect(self.dsn, autocommit=False) as conn:
                while not self.stop_event.is_set():
                    self.transaction(conn)
                    time.sleep(self.rng.uniform(0, 0.01))
        except Exception:
            self.error = traceback.format_exc()

    def transaction(self, conn):
        rng = self.rng
        keys, next_key = set(self.keys), self.next_key
        for _ in range(rng.randint(1, 4)):
            kind = rng.choices(["ins", "upd", "del", "key"], [5, 6, 2, 1])[0]
            if kind == "ins" or not keys:
                next_key += 1
                conn.execute("INSERT INTO acc VALUES (%s, %s, %s)",
                             (next_key, f"v{next_key} 'q'", rng.randint(-10**9, 10**9)))
                keys.add(next_key)
                continue
            k = rng.choice(tuple(keys))
            if kind == "upd":
                conn.execute("UPDATE acc SET n = n + %s, v = %s WHERE id = %s",
                             (rng.randint(1, 100), rng.choice(["x", None, "é"]), k))
            elif kind == "del":
                conn.execute("DELETE FROM acc WHERE id = %s", (k,))
                keys.discard(k)
            else:
                next_key += 1
                conn.execute("UPDATE acc SET id = %s WHERE id = %s", (next_key, k))
                keys.discard(k)
                keys.add(next_key)
        if rng.random() < 0.1:
            conn.rollback()
            return
        conn.commit()
        self.commits += 1
        self.keys, self.next_key = keys, next_key

    def finish(self):
        self.stop_event.set()
        self.join(30)
        assert self.error is None, self.error


ACC = {"acc": {"key": ["id"], "cols": ["id", "v", "n"]}}
ACC_INITIAL = 3000


def make_acc(pg, initial: int = ACC_INITIAL) -> None:
    pg.execute("CREATE TABLE acc (id int PRIMARY KEY, v text, n bigint)")
    pg.execute("INSERT INTO acc SELECT g, 'v' || g, g "
               f"FROM generate_series(1, {initial}) g")
    audited(pg, "acc")  # after the initial rows: those reach Bronze as r rows


def check_acc(run, pg, con, initial: int = ACC_INITIAL) -> list[dict]:
    """Bronze acc, read by PyIceberg and DuckDB: no change twice, every initial row
    once as `r`, the change events exactly the audit trail's in commit order, and
    the fold the source's rows."""
    no_duplicates(run, con, "public.acc")
    rows = run.rows(con, "public.acc")
    snap = collections.Counter(r["cdc_commit_lsn"] for r in rows if r["cdc_op"] == "r")
    keys = {r["id"] for r in rows if r["cdc_op"] == "r"}
    assert sum(snap.values()) == len(keys) == initial, \
        (f"{sum(snap.values())} r rows for {len(keys)} keys; {initial} rows were "
         f"copied (r rows per commit LSN: {sorted(snap.items())})")
    check_order("public.acc", rows)
    run.check_commit_lsn("public.acc", rows)
    cols, key = ACC["acc"]["cols"], ACC["acc"]["key"]
    compare("public.acc", audit_events(pg, ACC), bronze_events("acc", rows, cols))
    assert folded_state(rows, cols, key) == source_state(pg, "acc", cols, key)
    return rows


def test_a_second_floe_run_on_the_same_slot_waits_and_duplicates_nothing(
        floe, pg, duckdb_con):
    """A second `floe run` of the same pipeline file (same slot, same warehouse)
    while the first streams: PostgreSQL lets one walsender hold the slot, so the
    second must keep out (retrying) and write nothing; once the first is SIGKILLed
    it takes over. Bronze equals the audit trail: nothing lost, nothing twice."""
    make_acc(pg)
    first = floe(tables=["public.acc"])
    first.start().wait_streaming()
    first.wait_until(lambda: first.count("public.acc") >= ACC_INITIAL, 60,
                     what="the initial copy")
    workload = Workload(pg.dsn, seed=5, keys=set(range(1, ACC_INITIAL + 1)))
    workload.start()
    second = twin(floe, first)
    second.start()
    # The second finds the service's run in progress (its lock on the source), says
    # so, and retries.
    busy = "is using this source"
    second.wait_until(lambda: second.log_text().count(busy) >= 2, 60,
                      what="the second floe run to be refused twice")
    first.check_alive()
    assert "streaming slot" not in second.log_text()
    active = pg.execute("SELECT count(*) FROM pg_stat_replication r JOIN "
                        "pg_replication_slots s ON s.active_pid = r.pid "
                        "WHERE s.slot_name = %s", (first.slot,))[0][0]
    assert active == 1
    first.kill()
    second.wait_streaming(timeout=120)
    time.sleep(2)  # the workload goes on, now through the second
    workload.finish()
    assert workload.commits > 50, workload.commits
    marker(pg, second)
    second.stop()
    check_acc(second, pg, duckdb_con)


EXTRA = {"extra": {"key": ["id"], "cols": ["id", "v"]}}


@pytest.mark.parametrize("first_notices", [False, True],
                         ids=["waiting-one-starts-first", "running-one-notices-first"])
def test_a_table_published_while_a_second_floe_run_waits_is_copied_once(
        floe, pg, duckdb_con, first_notices):
    """While a second `floe run` of the same pipeline file waits for the slot (it
    retries its start-up, which copies the published tables Bronze lacks), a table
    of 50,000 rows joins the publication. Either the waiting one's retry comes
    first, or (a change to the table right after it is published) the running one
    notices it at once and backfills it while the other retries. Changes to the
    table go on through both, then the first is SIGKILLed and the second streams.
    Each key must have one `r` row, the table's changes must equal the audit
    trigger's and its fold the source (psql); acc's changes the audit trail."""
    make_acc(pg)
    n_extra = 50_000
    pg.execute("CREATE TABLE extra (id int PRIMARY KEY, v text)")
    pg.execute(f"INSERT INTO extra SELECT g, 'e' || g FROM generate_series(1, {n_extra}) g")
    pg.execute("CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON extra "
               "FOR EACH ROW EXECUTE FUNCTION audit_row()")
    pg.execute("CREATE PUBLICATION floe_pub FOR TABLE acc")
    first = floe(publication="floe_pub")
    first.start().wait_streaming()
    first.wait_until(lambda: first.count("public.acc") >= ACC_INITIAL, 60,
                     what="the initial copy")
    second = twin(floe, first)
    second.start()
    busy = "is using this source"
    second.wait_until(lambda: second.log_text().count(busy) >= 2, 60,
                      what="the second floe run to be refused twice")
    pg.execute("ALTER PUBLICATION floe_pub ADD TABLE extra")
    if first_notices:
        pg.execute("INSERT INTO extra VALUES (-2, 'right after')")
    refused = second.log_text().count(busy)
    second.wait_until(lambda: second.log_text().count(busy) > refused, 60,
                      what="the second floe run to try its start-up again")
    for i in range(5):
        pg.execute("UPDATE extra SET v = 'changed' || %s WHERE id %% 997 = %s", (i, i))
        pg.execute("DELETE FROM extra WHERE id %% 1009 = %s", (i,))
        pg.execute("INSERT INTO extra VALUES (%s, 'new')", (n_extra + 1 + i,))
        time.sleep(0.5)
    first.wait_until(lambda: first.has_row("public.extra", id=n_extra + 5), 90,
                     what="the first floe run to stream extra's changes")
    first.check_alive()
    first.kill()
    second.wait_streaming(timeout=120)
    pg.execute("UPDATE extra SET v = 'after' WHERE id % 1000 = 0")
    marker(pg, second)
    pg.execute("INSERT INTO extra VALUES (-1, 'marker')")
    second.wait_until(lambda: second.has_row("public.extra", id=-1), 120,
                      what="the marker in Bronze extra", interval=0.5)
    second.stop()
    print("copied / backfilled extra:",
          [(r.log_text().count("copied public.extra"),
            r.log_text().count("backfilled public.extra")) for r in (first, second)])
    check_acc(second, pg, duckdb_con)
    no_duplicates(second, duckdb_con, "public.extra")
    rows = second.rows(duckdb_con, "public.extra")
    snap = collections.Counter(r["cdc_commit_lsn"] for r in rows if r["cdc_op"] == "r")
    keys = collections.Counter(r["id"] for r in rows if r["cdc_op"] == "r")
    twice = sorted(k for k, n in keys.items() if n > 1)
    assert not twice, (f"{sum(keys.values())} r rows for {len(keys)} keys of "
                       f"public.extra; {len(twice)} keys have more than one, e.g. "
                       f"{twice[:5]} ({len(snap)} commits hold r rows)")
    assert folded_state(rows, ["id", "v"], ["id"]) == \
        source_state(pg, "extra", ["id", "v"], ["id"])
    # The changes after the table joined: each once, as the audit trail says (a
    # key's r row may come after its streamed changes, running.md; those are
    # compared by the fold above).
    compare("public.extra", audit_events(pg, EXTRA),
            bronze_events("extra", rows, ["id", "v"]))


COPY_INITIAL = 100_000


def test_a_second_floe_run_started_during_the_initial_copy_copies_nothing(
        floe, pg, duckdb_con):
    """A second `floe run` of one pipeline file started while the first is making
    its initial copy of a 100,000-row table (its log says `copying`; the slot exists
    but nobody streams from it yet). The second may wait or be refused; the table
    must be copied once (one `r` row per key, PyIceberg and DuckDB), and the
    changes that follow must equal the audit trail."""
    make_acc(pg, COPY_INITIAL)
    pg.execute("CREATE PUBLICATION floe_pub FOR TABLE acc")
    first = floe(publication="floe_pub")
    second = twin(floe, first)
    first.start()
    first.wait_until(lambda: "copying 1 table(s)" in first.log_text(), 60,
                     what="the first floe run to start its copy", interval=0.02)
    second.start()

    def streaming():
        return [r for r in (first, second) if "streaming slot" in r.log_text()]
    leaders = first.wait_until(streaming, 90, what="one of the two to stream",
                               require_running=False)
    assert len(leaders) == 1, "both stream from one slot"
    leader = leaders[0]
    leader.check_alive()
    workload = Workload(pg.dsn, seed=55, keys=set(range(1, COPY_INITIAL + 1)))
    workload.start()
    time.sleep(3)
    workload.finish()
    marker(pg, leader)
    for run in (first, second):
        if run.running:
            run.stop()
        else:
            print(f"{run.log_path} exited by itself: {run.proc.returncode}")
    check_acc(leader, pg, duckdb_con, COPY_INITIAL)


def test_a_second_pipeline_with_its_own_slot_on_the_same_bronze_tables(
        floe, pg, duckdb_con):
    """A second pipeline file that differs from the first only in its slot (same
    warehouse, same service, so the same Bronze tables), started while the first
    streams under a workload: it waits (the service's run holds its lock on the
    source) and writes nothing; once the first stops, it refuses to feed the Bronze
    another slot fed, and exits naming both slots. Bronze holds every change of the
    audit trail exactly once."""
    make_acc(pg)
    first = floe(tables=["public.acc"])
    first.start().wait_streaming()
    first.wait_until(lambda: first.count("public.acc") >= ACC_INITIAL, 60,
                     what="the initial copy")
    workload = Workload(pg.dsn, seed=6, keys=set(range(1, ACC_INITIAL + 1)))
    workload.start()
    second = twin(floe, first, slot="floe_other")
    second.start()
    second.wait_until(lambda: "is using this source" in second.log_text(), 60,
                      what="the second pipeline to wait for the first")
    time.sleep(3)  # both up while the workload runs
    workload.finish()
    assert workload.commits > 50, workload.commits
    marker(pg, first)
    first.stop()
    second.wait_until(lambda: not second.running, 90, require_running=False,
                      what="the second pipeline to refuse the other slot's Bronze")
    assert second.proc.returncode != 0
    assert 'was fed from replication slot "' + first.slot + '"' in second.log_text()
    assert "streaming slot floe_other" not in second.log_text()
    check_acc(first, pg, duckdb_con)
