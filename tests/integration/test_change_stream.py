"""floe's change stream against a real PostgreSQL: committed transactions in commit
order, as per-table batches with their CDC metadata, checked against an audit table
that a trigger fills with every change; key-changing updates, unchanged TOAST values,
interleaved transactions, large streamed transactions (spilled to disk, bounded
memory, rolled back ones yielding nothing) and restarts that skip what the consumer
already has. Driven through tests/tools/stream_tool (slot and publication set up by
tests/tools/replication_tool)."""

from __future__ import annotations

import json
import os
import subprocess
import time

import psycopg
import pytest


def run(tool, name: str, *args: str, timeout: float = 120) -> list[dict]:
    proc = subprocess.run([str(tool(name)), *args], capture_output=True, text=True,
                          timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-4000:]}")
    return lines


def setup(tool, pg, tables: list[str]) -> None:
    run(tool, "replication_tool", "--dsn", pg.dsn, "setup", "--slot", "s",
        "--publication", "pub", "--create-publication", "--tables-json",
        json.dumps([["public", t] for t in tables]))


def stream(tool, pg, until: str, *extra: str) -> list[dict]:
    """Runs the change stream until the non-transactional message `until`."""
    out = run(tool, "stream_tool", "--dsn", pg.dsn, "--slot", "s", "--publication", "pub",
              "--until-message-prefix", until, "--seconds", "90", *extra)
    assert out[0]["type"] == "START"
    assert out[-1]["type"] == "END", out[-1]
    assert out[-1]["reason"] == "until_message", out[-1]
    return out


def end_marker(pg, prefix: str) -> None:
    pg.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (prefix,))


def rows(out: list[dict]) -> list[dict]:
    return [m for m in out if m["type"] == "row"]


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def text(v):
    return None if v is None else str(v)


AUDIT_DDL = """
CREATE TABLE audit (n bigserial PRIMARY KEY, tbl text, op text, old jsonb, new jsonb);
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit (tbl, op, old, new) VALUES (TG_TABLE_NAME, TG_OP,
    CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
    CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
  RETURN NULL;
END $$;
CREATE TABLE accounts (id int PRIMARY KEY, name text, balance bigint);
CREATE TABLE lines (order_id int, line_no int, qty int, note text,
                    PRIMARY KEY (order_id, line_no));
CREATE TRIGGER a AFTER INSERT OR UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER l AFTER INSERT OR UPDATE OR DELETE ON lines
  FOR EACH ROW EXECUTE FUNCTION audit_row();
"""

KEYS = {"accounts": ["id"], "lines": ["order_id", "line_no"]}
COLUMNS = {"accounts": ["id", "name", "balance"],
           "lines": ["order_id", "line_no", "qty", "note"]}


def expected_from_audit(pg) -> list[tuple]:
    """What the stream must deliver, derived from the audit table alone: one entry per
    change (a key-changing update as delete + insert), in commit order (the workload
    commits from one session, so audit order is commit order)."""
    out = []
    for tbl, op, old, new in pg.execute("SELECT tbl, op, old, new FROM audit ORDER BY n"):
        cols, keys = COLUMNS[tbl], KEYS[tbl]
        full = lambda r: {c: text(r[c]) for c in cols}
        key_only = lambda r: {c: (text(r[c]) if c in keys else None) for c in cols}
        if op == "INSERT":
            out.append((tbl, "c", full(new)))
        elif op == "DELETE":
            out.append((tbl, "d", key_only(old)))
        elif any(old[k] != new[k] for k in keys):
            out.append((tbl, "d", key_only(old)))
            out.append((tbl, "c", full(new)))
        else:
            out.append((tbl, "u", full(new)))
    return out


def test_mixed_workload_arrives_once_in_commit_order_as_the_audit_trail_says(tool, pg):
    with pg.connect() as conn:
        conn.execute(AUDIT_DDL)
    setup(tool, pg, ["accounts", "lines"])
    with pg.connect(autocommit=False) as conn:
        for i in range(1, 41):
            conn.execute("INSERT INTO accounts VALUES (%s, %s, %s)", (i, f"acct {i}", i * 10))
            conn.execute("INSERT INTO lines VALUES (%s, 1, %s, 'first'), (%s, 2, 1, NULL)",
                         (i, i, i))
            if i % 3 == 0:
                conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = %s",
                             (i - 1,))
                conn.execute("UPDATE lines SET qty = qty * 2, note = 'x''y \"z\"' "
                             "WHERE order_id = %s", (i - 2,))
            if i % 5 == 0:
                conn.execute("DELETE FROM lines WHERE order_id = %s AND line_no = 2",
                             (i - 4,))
                conn.execute("DELETE FROM accounts WHERE id = %s", (i - 3,))
            if i % 7 == 0:
                # A key change on the composite key and on the simple one.
                conn.execute("UPDATE lines SET line_no = 9 WHERE order_id = %s "
                             "AND line_no = 1", (i,))
                conn.execute("UPDATE accounts SET id = id + 1000 WHERE id = %s", (i,))
            if i % 11 == 0:
                conn.execute("INSERT INTO accounts VALUES (5000 + %s, 'rolled back', 0)",
                             (i,))
                conn.rollback()
            else:
                conn.commit()
    end_marker(pg, "end")

    out = stream(tool, pg, "end")
    delivered = rows(out)
    # Transactions arrive in commit order; inside one, rows are grouped per table and
    # cdc_seq gives the order of the changes across tables.
    commit_lsns = [r["commit_lsn"] for r in delivered]
    assert commit_lsns == sorted(commit_lsns)
    for table in ("public.accounts", "public.lines"):
        pairs = [(r["commit_lsn"], r["seq"]) for r in delivered if r["table"] == table]
        assert pairs == sorted(pairs)
    ordered = sorted(delivered, key=lambda r: (r["commit_lsn"], r["seq"]))
    got = [(r["table"].split(".")[1], r["op"], r["values"]) for r in ordered]
    assert got == expected_from_audit(pg)

    # Exactly once: (commit LSN, seq) unique, seq consecutive inside a transaction,
    # each transaction framed by begin/commit with its rows' commit LSN and xid.
    pairs = [(r["commit_lsn"], r["seq"]) for r in delivered]
    assert len(set(pairs)) == len(pairs)
    commits = [m for m in out if m["type"] == "commit"]
    assert len(commits) == 40 - 3  # three transactions rolled back
    for c in commits:
        seqs = [r["seq"] for r in delivered if r["commit_lsn"] == lsn_int(c["commit_lsn"])]
        assert sorted(seqs) == list(range(len(seqs)))
        assert all(r["xid"] == c["xid"] for r in delivered
                   if r["commit_lsn"] == lsn_int(c["commit_lsn"]))
    assert all(r["unchanged"] is None for r in delivered)
    relations = [m for m in out if m["type"] == "relation"]
    assert {m["table"] for m in relations} == {"public.accounts", "public.lines"}
    first_row = {}
    for i, m in enumerate(out):
        if m["type"] == "row":
            first_row.setdefault(m["table"], i)
    for m in relations:
        assert out.index(m) < first_row[m["table"]]
    lines_rel = next(m for m in relations if m["table"] == "public.lines")
    assert lines_rel["primary_key"] == ["order_id", "line_no"]
    assert [c["name"] for c in lines_rel["columns"]][-7:] == [
        "cdc_op", "cdc_ts", "cdc_source_lsn", "cdc_source_tx_id", "cdc_commit_lsn",
        "cdc_seq", "cdc_unchanged"]


def test_key_changing_update_is_a_delete_of_the_old_key_then_an_insert(tool, pg):
    pg.execute("CREATE TABLE lines (order_id int, line_no int, qty int, "
               "PRIMARY KEY (order_id, line_no))")
    pg.execute("INSERT INTO lines VALUES (1, 1, 5)")
    setup(tool, pg, ["lines"])
    pg.execute("UPDATE lines SET line_no = 2, qty = 6 WHERE order_id = 1")
    pg.execute("UPDATE lines SET qty = 7 WHERE order_id = 1")
    end_marker(pg, "end")
    got = rows(stream(tool, pg, "end"))
    assert [(r["op"], r["seq"], r["values"]) for r in got] == [
        ("d", 0, {"order_id": "1", "line_no": "1", "qty": None}),
        ("c", 1, {"order_id": "1", "line_no": "2", "qty": "6"}),
        ("u", 0, {"order_id": "1", "line_no": "2", "qty": "7"}),
    ]
    assert got[0]["source_lsn"] == got[1]["source_lsn"]
    assert got[0]["commit_lsn"] == got[1]["commit_lsn"] < got[2]["commit_lsn"]


def test_update_that_leaves_a_toasted_value_alone_lists_it_as_unchanged(tool, pg):
    pg.execute("CREATE TABLE docs (id int PRIMARY KEY, body text, n int)")
    # Incompressible, well over the TOAST threshold: stored out of line.
    pg.execute("INSERT INTO docs SELECT 1, string_agg(md5(random()::text), '') , 1 "
               "FROM generate_series(1, 2000)")
    setup(tool, pg, ["docs"])
    pg.execute("UPDATE docs SET n = 2")
    pg.execute("UPDATE docs SET body = 'short', n = 3")
    end_marker(pg, "end")
    got = rows(stream(tool, pg, "end"))
    assert [(r["op"], r["values"], r["unchanged"]) for r in got] == [
        ("u", {"id": "1", "body": None, "n": "2"}, ["body"]),
        ("u", {"id": "1", "body": "short", "n": "3"}, None),
    ]


def test_interleaved_transactions_arrive_in_commit_order(tool, pg):
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, who text)")
    setup(tool, pg, ["t"])
    with pg.connect(autocommit=False) as a, pg.connect(autocommit=False) as b:
        a.execute("INSERT INTO t VALUES (1, 'a')")
        b.execute("INSERT INTO t VALUES (2, 'b')")
        a.execute("INSERT INTO t VALUES (3, 'a')")
        b.execute("INSERT INTO t VALUES (4, 'b')")
        b.commit()  # started later, commits first
        a.execute("INSERT INTO t VALUES (5, 'a')")
        a.commit()
    end_marker(pg, "end")
    out = stream(tool, pg, "end")
    got = rows(out)
    assert [(r["values"]["id"], r["seq"]) for r in got] == [
        ("2", 0), ("4", 1), ("1", 0), ("3", 1), ("5", 2)]
    commits = [m for m in out if m["type"] == "commit"]
    assert len(commits) == 2
    assert lsn_int(commits[0]["commit_lsn"]) < lsn_int(commits[1]["commit_lsn"])
    assert got[0]["xid"] == commits[0]["xid"] and got[2]["xid"] == commits[1]["xid"]
    # The later-started transaction has the larger xid but commits first.
    assert commits[0]["xid"] > commits[1]["xid"]




LARGE_ROWS = 300_000


def test_large_streamed_transaction_is_spilled_with_bounded_memory_and_rollback_yields_nothing(
        tool, pg, small_decoding_memory, tmp_path):
    pg.execute("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    setup(tool, pg, ["big"])
    spill = tmp_path / "spill"
    proc = subprocess.Popen(
        [str(tool("stream_tool")), "--dsn", pg.dsn, "--slot", "s", "--publication", "pub",
         "--until-message-prefix", "end", "--seconds", "90", "--summary", "--spill-dir",
         str(spill)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # A transaction streamed while still in progress, spilled, then rolled back.
        with pg.connect(autocommit=False) as conn:
            conn.execute("INSERT INTO big SELECT g, repeat('y', 100) "
                         "FROM generate_series(1000001, 1100000) g")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                files = list(spill.glob("*.spill")) if spill.exists() else []
                if files and files[0].stat().st_size > 1_000_000:
                    break
                time.sleep(0.1)
            else:
                pytest.fail("the open transaction was not streamed into a spill file")
            conn.rollback()
        pg.execute("INSERT INTO big SELECT g, repeat('x', 100) "
                   f"FROM generate_series(1, {LARGE_ROWS}) g")
        pg.execute("INSERT INTO big VALUES (0, 'small')")
        end_marker(pg, "end")
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stdout[-4000:] + stderr[-4000:]
    out = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    end = out[-1]
    assert end["type"] == "END" and end["reason"] == "until_message", end
    print(f"\nchange stream: {LARGE_ROWS} streamed rows, peak RSS "
          f"{end['peak_rss_kb'] / 1024:.1f} MB, spilled {end['spilled_bytes']} bytes "
          f"(peak {end['peak_spill_bytes']})")
    assert end["peak_rss_kb"] < 512 * 1024
    assert end["streamed_transactions"] == 1
    assert end["streamed_aborts"] >= 1
    assert end["spilled_bytes"] > LARGE_ROWS * 100
    assert end["open_spills"] == 0 and os.listdir(spill) == []

    begins = [m for m in out if m["type"] == "begin"]
    assert [b["streamed"] for b in begins] == [True, False]
    batches = [m for m in out if m["type"] == "batch"]
    big = [b for b in batches if b["xid"] == begins[0]["xid"]]
    assert sum(b["rows"] for b in big) == LARGE_ROWS
    assert all(b["ops"] == {"c": b["rows"]} for b in big)
    # Consecutive seq across the bounded batches.
    assert [(b["first_seq"], b["last_seq"]) for b in big] == [
        (s, min(s + 65536, LARGE_ROWS) - 1) for s in range(0, LARGE_ROWS, 65536)]
    # The rolled-back transaction delivered nothing.
    assert sum(b["rows"] for b in batches) == LARGE_ROWS + 1
    assert end["transactions"] == 2


def test_restart_with_start_after_delivers_nothing_already_acknowledged(tool, pg):
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)")
    setup(tool, pg, ["t"])
    pg.execute("INSERT INTO t VALUES (1)")
    pg.execute("INSERT INTO t VALUES (2)")
    end_marker(pg, "end1")
    # The consumer made both durable but crashed before acknowledging them.
    first = stream(tool, pg, "end1")
    assert [r["values"]["id"] for r in rows(first)] == ["1", "2"]
    durable = [m for m in first if m["type"] == "commit"][-1]["commit_lsn"]

    pg.execute("INSERT INTO t VALUES (3)")
    end_marker(pg, "end2")
    # On restart the server resends all three; the two the consumer has are skipped.
    second = stream(tool, pg, "end2", "--start-after", durable, "--ack")
    assert [r["values"]["id"] for r in rows(second)] == ["3"]
    assert second[-1]["skipped"] == 2
    last = [m for m in second if m["type"] == "commit"][-1]
    assert second[-1]["acked"] == last["end_lsn"]

    # Acknowledged now: the slot does not send it again, even without start_after.
    pg.execute("INSERT INTO t VALUES (4)")
    end_marker(pg, "end3")
    third = stream(tool, pg, "end3")
    assert [r["values"]["id"] for r in rows(third)] == ["4"]
    assert third[-1]["skipped"] == 0
