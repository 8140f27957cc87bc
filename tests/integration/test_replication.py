"""floe's replication connection against a real PostgreSQL: slot and publication
management, START_REPLICATION, the pgoutput decoder on a live stream, streaming of
large transactions, and flow control (confirmed_flush_lsn moves to exactly what was
acknowledged). Driven through tests/tools/replication_tool."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg
import pytest

from pgcluster import contrib_or_skip, pg_version

# The session settings floe pins on its connections: the values Postgres renders in
# such a session are what the decoded stream must carry.
PINNED = ("SET DateStyle = ISO; SET IntervalStyle = postgres; SET TimeZone = 'UTC'; "
          "SET extra_float_digits = 3; SET bytea_output = hex")


def run_tool(tool, *args: str, check: bool = True, timeout: float = 90) -> list[dict]:
    proc = subprocess.run([str(tool("replication_tool")), *args], capture_output=True,
                          text=True, timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if check and proc.returncode != 0:
        raise AssertionError(f"replication_tool {args[2:4]} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return lines


def setup(tool, pg, slot: str, publication: str, *extra: str) -> dict:
    return run_tool(tool, "--dsn", pg.dsn, "setup", "--slot", slot, "--publication",
                    publication, *extra)[0]


def stream(tool, pg, slot: str, publication: str, until: str, *extra: str) -> list[dict]:
    """Streams until the non-transactional logical message with prefix `until`."""
    out = run_tool(tool, "--dsn", pg.dsn, "stream", "--slot", slot, "--publication",
                   publication, "--until-message-prefix", until, "--seconds", "60",
                   *extra)
    assert out[0]["type"] == "START"
    assert out[-1]["type"] == "END"
    assert out[-1]["reason"] == "until_message", out[-1]
    return out


def end_marker(pg, prefix: str) -> None:
    pg.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (prefix,))


def rendered(pg, sql: str, params=None) -> list[dict]:
    """Rows as {column: text} the way Postgres renders them in a pinned session."""
    with pg.connect() as conn:
        conn.execute(PINNED)
        cur = conn.execute(sql, params)
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def changes(out: list[dict]) -> list[dict]:
    """The committed data changes, in commit order, with streamed transactions
    assembled: Stream Commit applies a streamed xid's changes, Stream Abort drops
    them."""
    data_types = {"INSERT", "UPDATE", "DELETE", "TRUNCATE", "MESSAGE"}
    result: list[dict] = []
    current: list[dict] | None = None
    streamed: dict[int, list[dict]] = {}
    for m in out:
        t = m["type"]
        if t == "BEGIN":
            current = []
        elif t == "COMMIT":
            result.extend(current or [])
            current = None
        elif t in data_types:
            if "xid" in m and current is None:
                streamed.setdefault(m["xid"], []).append(m)
            elif current is not None:
                current.append(m)
            elif t == "MESSAGE" and not m["transactional"]:
                result.append(m)
        elif t == "STREAM COMMIT":
            result.extend(streamed.pop(m["xid"], []))
        elif t == "STREAM ABORT":
            streamed.pop(m["subxid"], None)
            if m["subxid"] == m["xid"]:
                streamed.pop(m["xid"], None)
    return result


def slot_state(pg, slot: str) -> dict:
    row = pg.execute("SELECT confirmed_flush_lsn::text, active FROM pg_replication_slots "
                     "WHERE slot_name = %s", (slot,))
    return {"confirmed_flush_lsn": row[0][0], "active": row[0][1]}


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)




TABLE_DDL = """
CREATE TABLE items (
  id int PRIMARY KEY,
  name text,
  amount numeric(10,2),
  at timestamptz,
  ratio float8,
  blob bytea,
  flag bool,
  doc jsonb,
  tags int[],
  span interval
)"""
COLUMNS = "id, name, amount, at, ratio, blob, flag, doc, tags, span"
# format('%s', v) renders with the type's output function (v::text would not: a
# boolean casts to 'true' but is output as 't').
TEXT_COLUMNS = ", ".join(f"CASE WHEN {c} IS NOT NULL THEN format('%s', {c}) END AS {c}"
                         for c in COLUMNS.split(", "))


def test_info_reports_the_server_and_its_protocol(tool, pg):
    info = run_tool(tool, "--dsn", pg.dsn, "info")[0]
    assert info["server_version"] // 10000 == pg_version()
    # pgoutput's protocol: 3 on 15, 4 (parallel streaming) from 16.
    assert info["max_proto_version"] == (3 if pg_version() == 15 else 4)
    assert info["dbname"] == pg.name
    assert lsn_int(info["xlogpos"]) > 0
    assert info["system_id"] == pg.execute(
        "SELECT system_identifier::text FROM pg_control_system()")[0][0]


def test_setup_creates_the_publication_and_slot_then_reuses_them(tool, pg):
    pg.execute("CREATE TABLE a (id int PRIMARY KEY)")
    first = setup(tool, pg, "floe_slot", "floe_pub", "--create-publication",
                  "--tables-json", '[["public", "a"]]', "--export-snapshot")
    assert first["publication"] == {"created": True, "all_tables": False}
    assert first["slot"]["created"] is True
    assert first["slot"]["plugin"] == "pgoutput"
    assert first["slot"]["database"] == pg.name
    assert first["slot"]["snapshot_name"]
    assert first["slot"]["consistent_point"] == first["slot"]["confirmed_flush_lsn"]
    assert pg.execute("SELECT schemaname, tablename FROM pg_publication_tables "
                      "WHERE pubname = 'floe_pub'") == [("public", "a")]

    again = setup(tool, pg, "floe_slot", "floe_pub", "--create-publication")
    assert again["publication"]["created"] is False
    assert again["slot"]["created"] is False
    assert again["slot"]["confirmed_flush_lsn"] == first["slot"]["confirmed_flush_lsn"]

    all_pub = setup(tool, pg, "floe_slot", "floe_all", "--create-publication",
                    "--all-tables")
    assert all_pub["publication"] == {"created": True, "all_tables": True}


def test_setup_refuses_a_missing_publication_a_foreign_plugin_and_bad_names(tool, pg):
    err = run_tool(tool, "--dsn", pg.dsn, "setup", "--slot", "s1", "--publication",
                   "nope", check=False)[0]["error"]
    assert 'publication "nope" does not exist' in err

    pg.execute("CREATE PUBLICATION p FOR ALL TABLES")
    contrib_or_skip(pg, "SELECT pg_create_logical_replication_slot('td_slot', "
                    "'test_decoding')", "test_decoding")
    err = run_tool(tool, "--dsn", pg.dsn, "setup", "--slot", "td_slot", "--publication",
                   "p", check=False)[0]["error"]
    assert 'uses output plugin "test_decoding"' in err and "pgoutput" in err

    err = run_tool(tool, "--dsn", pg.dsn, "setup", "--slot", 'Bad"Slot', "--publication",
                   "p", check=False)[0]["error"]
    assert "only lower-case letters, digits and underscores" in err


def test_slot_of_another_database_is_refused(tool, pg, pg_cluster):
    pg.execute("CREATE PUBLICATION p FOR ALL TABLES")
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')",
                      (f"other_db_{pg.name}",))
    try:
        err = run_tool(tool, "--dsn", pg.dsn, "setup", "--slot", f"other_db_{pg.name}",
                       "--publication", "p", check=False)[0]["error"]
        assert 'belongs to database "postgres"' in err
    finally:
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_drop_replication_slot(%s)", (f"other_db_{pg.name}",))


def test_inserts_updates_deletes_truncate_and_messages_decode_as_postgres_renders(
        tool, pg):
    pg.execute(TABLE_DDL)
    setup(tool, pg, "s", "pub", "--create-publication", "--tables-json",
          '[["public", "items"]]')

    expected: list[dict] = []
    pg.execute(f"INSERT INTO items ({COLUMNS}) VALUES "
               "(1, 'one', 12.5, '2024-02-29 13:14:15.123456+02', 0.1, '\\x00ff10', "
               " true, '{\"k\": [1, 2]}', '{1,2,NULL}', '1 day 02:03:04'), "
               "(2, 'two ''quoted'' ü', -0.01, 'infinity', 1e300, '', false, 'null', "
               " '{}', '-1 mons'), "
               "(3, NULL, NULL, NULL, 'NaN', NULL, NULL, NULL, NULL, NULL)")
    for row in rendered(pg, f"SELECT {TEXT_COLUMNS} FROM items ORDER BY id"):
        expected.append({"type": "INSERT", "new": row})

    pg.execute("UPDATE items SET name = 'uno', ratio = 2.5 WHERE id = 1")
    expected.append({"type": "UPDATE", "new": rendered(
        pg, f"SELECT {TEXT_COLUMNS} FROM items WHERE id = 1")[0]})
    # Changing the key sends the old key.
    pg.execute("UPDATE items SET id = 20 WHERE id = 2")
    expected.append({"type": "UPDATE", "old": {"id": "2", **{
        c: None for c in COLUMNS.split(", ")[1:]}}, "new": rendered(
        pg, f"SELECT {TEXT_COLUMNS} FROM items WHERE id = 20")[0]})
    pg.execute("DELETE FROM items WHERE id = 3")
    expected.append({"type": "DELETE", "old": {"id": "3", **{
        c: None for c in COLUMNS.split(", ")[1:]}}})
    with pg.connect() as conn:
        with conn.transaction():
            conn.execute("INSERT INTO items (id, name) VALUES (4, 'four')")
            conn.execute("SELECT pg_logical_emit_message(true, 'floe.audit', 'in tx')")
    expected.append({"type": "INSERT", "new": rendered(
        pg, f"SELECT {TEXT_COLUMNS} FROM items WHERE id = 4")[0]})
    expected.append({"type": "MESSAGE", "prefix": "floe.audit", "content": "in tx",
                     "transactional": True})
    pg.execute("SELECT pg_logical_emit_message(false, 'floe.note', 'outside')")
    expected.append({"type": "MESSAGE", "prefix": "floe.note", "content": "outside",
                     "transactional": False})
    pg.execute("TRUNCATE items")
    expected.append({"type": "TRUNCATE", "relations": ["public.items"]})
    end_marker(pg, "end1")
    expected.append({"type": "MESSAGE", "prefix": "end1", "content": "end",
                     "transactional": False})

    out = stream(tool, pg, "s", "pub", "end1")
    got = changes(out)
    assert len(got) == len(expected), json.dumps(got, indent=1)
    for g, e in zip(got, expected):
        for key, value in e.items():
            assert g[key] == value, (key, g, e)
        if g["type"] in ("INSERT", "UPDATE", "DELETE"):
            assert g["relation"] == "public.items"

    relation = next(m for m in out if m["type"] == "RELATION")
    assert relation["namespace"] == "public" and relation["name"] == "items"
    assert [c["name"] for c in relation["columns"]] == COLUMNS.split(", ")
    assert [c["attnum"] for c in relation["columns"]] == list(range(1, 11))
    assert relation["primary_key"] == ["id"]
    assert [c["key"] for c in relation["columns"]] == [True] + [False] * 9
    oids = dict(pg.execute("SELECT attname::text, atttypid::int FROM pg_attribute "
                           "WHERE attrelid = 'items'::regclass AND attnum > 0"))
    assert {c["name"]: c["type_oid"] for c in relation["columns"]} == oids
    # Transactions are framed: every BEGIN has its COMMIT, LSNs ascend.
    commits = [m for m in out if m["type"] == "COMMIT"]
    assert len(commits) == len([m for m in out if m["type"] == "BEGIN"]) == 6
    ends = [lsn_int(c["end_lsn"]) for c in commits]
    assert ends == sorted(ends)


def test_schema_changes_are_classified_by_attnum(tool, pg):
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, a text, b int)")
    setup(tool, pg, "s", "pub", "--create-publication", "--tables-json",
          '[["public", "t"]]')
    # One stream stays open while the DDL happens step by step, so each Relation
    # message is completed from the catalog as it was when the change was made.
    proc = subprocess.Popen(
        [str(tool("replication_tool")), "--dsn", pg.dsn, "stream", "--slot", "s",
         "--publication", "pub", "--until-message-prefix", "end", "--seconds", "60"],
        stdout=subprocess.PIPE, text=True)
    out: list[dict] = []

    def read_until_insert(id_: str) -> None:
        for line in proc.stdout:
            out.append(json.loads(line))
            if out[-1]["type"] == "INSERT" and out[-1]["new"]["id"] == id_:
                return
        raise AssertionError(f"stream ended before insert {id_}: {out}")

    try:
        steps = [
            (None, "INSERT INTO t VALUES (1, 'x', 1)"),
            ("ALTER TABLE t RENAME COLUMN a TO a2", "INSERT INTO t VALUES (2, 'y', 2)"),
            ("ALTER TABLE t ADD COLUMN c date",
             "INSERT INTO t VALUES (3, 'z', 3, '2024-01-02')"),
            ("ALTER TABLE t DROP COLUMN b", "INSERT INTO t VALUES (4, 'w', '2024-01-03')"),
            ("ALTER TABLE t ALTER COLUMN c TYPE timestamp",
             "INSERT INTO t VALUES (5, 'v', '2024-01-04 05:06')"),
        ]
        for i, (ddl, insert) in enumerate(steps, start=1):
            if ddl:
                pg.execute(ddl)
            pg.execute(insert)
            read_until_insert(str(i))
        end_marker(pg, "end")
        for line in proc.stdout:
            out.append(json.loads(line))
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out[-1]["type"] == "END" and out[-1]["reason"] == "until_message"
    relations = [m for m in out if m["type"] == "RELATION"]
    assert [r["change"] for r in relations] == ["new"] + ["changed"] * 4
    assert [c["attnum"] for c in relations[0]["columns"]] == [1, 2, 3]
    diffs = [r["diff"] for r in relations[1:]]
    assert diffs[0] == [{"kind": "renamed", "before": "a", "after": "a2"}]
    assert diffs[1] == [{"kind": "added", "before": "", "after": "c"}]
    assert diffs[2] == [{"kind": "dropped", "before": "b", "after": ""}]
    assert diffs[3] == [{"kind": "retyped", "before": "c", "after": "c"}]
    assert [c["attnum"] for c in relations[-1]["columns"]] == [1, 2, 4]
    inserts = [m["new"] for m in changes(out) if m["type"] == "INSERT"]
    assert inserts[3] == {"id": "4", "a2": "w", "c": "2024-01-03"}
    assert inserts[4] == {"id": "5", "a2": "v", "c": "2024-01-04 05:06:00"}


def test_acknowledged_position_becomes_confirmed_flush_and_is_not_resent(tool, pg):
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)")
    setup(tool, pg, "s", "pub", "--create-publication", "--tables-json",
          '[["public", "t"]]')
    pg.execute("INSERT INTO t VALUES (1)")
    pg.execute("INSERT INTO t VALUES (2)")
    end_marker(pg, "end1")

    # Without --ack nothing is confirmed and a restart resends everything.
    before = slot_state(pg, "s")["confirmed_flush_lsn"]
    first = stream(tool, pg, "s", "pub", "end1")
    assert first[-1]["acked"] == "0/00000000"
    assert slot_state(pg, "s")["confirmed_flush_lsn"] == before
    again = stream(tool, pg, "s", "pub", "end1")
    assert ([m["new"] for m in changes(again) if m["type"] == "INSERT"] ==
            [m["new"] for m in changes(first) if m["type"] == "INSERT"] ==
            [{"id": "1"}, {"id": "2"}])

    # With --ack the slot confirms exactly the last commit's end LSN.
    acked_run = stream(tool, pg, "s", "pub", "end1", "--ack")
    last_commit = [m for m in acked_run if m["type"] == "COMMIT"][-1]
    assert acked_run[-1]["acked"] == last_commit["end_lsn"]
    assert acked_run[-1]["sent_flush"] == last_commit["end_lsn"]
    state = slot_state(pg, "s")
    assert lsn_int(state["confirmed_flush_lsn"]) == lsn_int(last_commit["end_lsn"])
    assert state["active"] is False

    pg.execute("INSERT INTO t VALUES (3)")
    end_marker(pg, "end2")
    after = stream(tool, pg, "s", "pub", "end2", "--ack")
    assert [m["new"] for m in changes(after) if m["type"] == "INSERT"] == [{"id": "3"}]
    # A start position below the confirmed one does not bring old changes back.
    pg.execute("INSERT INTO t VALUES (4)")
    end_marker(pg, "end3")
    rewound = stream(tool, pg, "s", "pub", "end3", "--start", "0/1")
    assert [m["new"] for m in changes(rewound) if m["type"] == "INSERT"] == [{"id": "4"}]


def test_large_transactions_stream_and_rolled_back_ones_leave_no_rows(
        tool, pg, small_decoding_memory):
    pg.execute("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    setup(tool, pg, "s", "pub", "--create-publication", "--tables-json",
          '[["public", "big"]]')
    pg.execute("INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g")
    with pg.connect(autocommit=False) as conn:
        conn.execute("INSERT INTO big SELECT g, repeat('y', 200) "
                     "FROM generate_series(5001, 8000) g")
        conn.rollback()
    pg.execute("INSERT INTO big VALUES (9000, 'small')")
    end_marker(pg, "end")

    out = stream(tool, pg, "s", "pub", "end", "--streaming", "on")
    types = [m["type"] for m in out]
    assert "STREAM START" in types and "STREAM STOP" in types
    assert "STREAM COMMIT" in types
    # PostgreSQL 18 no longer streams a large transaction it knows was rolled back
    # (nothing of it is sent); before, it streams and then aborts it.
    assert ("STREAM ABORT" in types) == (pg_version() < 18), types
    got = [m for m in changes(out) if m["type"] == "INSERT"]
    ids = [int(m["new"]["id"]) for m in got]
    assert ids == list(range(1, 3001)) + [9000]
    assert all(m["new"]["pad"] == "x" * 200 for m in got[:3000])
    # Streamed changes carry their transaction's xid.
    commit = next(m for m in out if m["type"] == "STREAM COMMIT")
    streamed_inserts = [m for m in out if m["type"] == "INSERT" and "xid" in m]
    assert {m["xid"] for m in streamed_inserts} >= {commit["xid"]}


def test_without_streaming_large_transactions_arrive_whole(tool, pg,
                                                          small_decoding_memory):
    pg.execute("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    setup(tool, pg, "s", "pub", "--create-publication", "--tables-json",
          '[["public", "big"]]')
    pg.execute("INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")
    end_marker(pg, "end")
    out = stream(tool, pg, "s", "pub", "end", "--streaming", "off")
    assert "STREAM START" not in [m["type"] for m in out]
    assert len([m for m in changes(out) if m["type"] == "INSERT"]) == 2000


QUOTED_SCHEMA = 'Sch\u00e9ma "X"'
QUOTED_TABLE = "My \"Quoted\" T\u00e4ble, it's"
QUOTED_PUB = "pub \"\u00fc\" 'x', y"


def test_quoted_spaced_and_unicode_identifiers_work(tool, pg):
    with pg.connect() as conn:
        conn.execute(psycopg.sql.SQL("CREATE SCHEMA {}").format(
            psycopg.sql.Identifier(QUOTED_SCHEMA)))
        conn.execute(psycopg.sql.SQL(
            "CREATE TABLE {}.{} ({} int PRIMARY KEY, {} text)").format(
            psycopg.sql.Identifier(QUOTED_SCHEMA), psycopg.sql.Identifier(QUOTED_TABLE),
            psycopg.sql.Identifier("Id \u00df"), psycopg.sql.Identifier('v"al')))
    tables = json.dumps([[QUOTED_SCHEMA, QUOTED_TABLE]])
    result = setup(tool, pg, "quoted_slot", QUOTED_PUB, "--create-publication",
                   "--tables-json", tables)
    assert result["publication"]["created"] is True
    assert pg.execute("SELECT pubname FROM pg_publication") == [(QUOTED_PUB,)]
    assert pg.execute("SELECT schemaname::text, tablename::text FROM pg_publication_tables") \
        == [(QUOTED_SCHEMA, QUOTED_TABLE)]
    with pg.connect() as conn:
        conn.execute(psycopg.sql.SQL("INSERT INTO {}.{} VALUES (1, 'h\u00e9llo \"q\"')")
                     .format(psycopg.sql.Identifier(QUOTED_SCHEMA),
                             psycopg.sql.Identifier(QUOTED_TABLE)))
    end_marker(pg, "end")
    out = stream(tool, pg, "quoted_slot", QUOTED_PUB, "end")
    relation = next(m for m in out if m["type"] == "RELATION")
    assert relation["namespace"] == QUOTED_SCHEMA
    assert relation["name"] == QUOTED_TABLE
    assert relation["primary_key"] == ["Id \u00df"]
    inserts = [m for m in changes(out) if m["type"] == "INSERT"]
    assert inserts == [{**inserts[0], "new": {"Id \u00df": "1",
                                              'v"al': 'h\u00e9llo "q"'}}]
    assert inserts[0]["relation"] == f"{QUOTED_SCHEMA}.{QUOTED_TABLE}"


def test_status_updates_keep_an_idle_stream_alive_past_wal_sender_timeout(tool, pg):
    pg.execute("ALTER SYSTEM SET wal_sender_timeout = '2s'")
    pg.execute("SELECT pg_reload_conf()")
    try:
        pg.execute("CREATE TABLE t (id int PRIMARY KEY)")
        setup(tool, pg, "s", "pub", "--create-publication", "--tables-json",
              '[["public", "t"]]')
        out = run_tool(tool, "--dsn", pg.dsn, "stream", "--slot", "s", "--publication",
                       "pub", "--seconds", "5", "--status-interval-ms", "500")
        assert out[-1] == {**out[-1], "type": "END", "reason": "timeout"}
    finally:
        pg.execute("ALTER SYSTEM RESET wal_sender_timeout")
        pg.execute("SELECT pg_reload_conf()")


def test_connection_errors_never_contain_the_password(tool, pg, pg_cluster):
    secret = "S3cr3t-Pa55word"
    role = f"pw_{pg.name}"
    hba = Path(pg.execute("SHOW hba_file")[0][0])
    original = hba.read_text()
    pg.execute(f'CREATE ROLE "{role}" LOGIN REPLICATION PASSWORD \'right-one\'')
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + original)
    pg.execute("SELECT pg_reload_conf()")
    try:
        wrong = (f"host=127.0.0.1 port={pg_cluster.port} dbname={pg.name} user={role} "
                 f"password={secret}")
        for cmd in (["info"], ["slot", "--slot", "x"]):
            proc = subprocess.run([str(tool("replication_tool")), "--dsn", wrong, *cmd],
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 3
            assert "password authentication failed" in proc.stdout
            assert secret not in proc.stdout + proc.stderr
        # The same role with its right password gets through.
        ok = wrong.replace(secret, "right-one")
        assert run_tool(tool, "--dsn", ok, "info")[0]["dbname"] == pg.name
    finally:
        hba.write_text(original)
        pg.execute("SELECT pg_reload_conf()")
        pg.execute(f'DROP ROLE IF EXISTS "{role}"')

    for dsn in (f"postgresql://floe:{secret}@127.0.0.1:1/db?connect_timeout=5",
                f"host=127.0.0.1 port=1 user=floe password={secret} connect_timeout=5",
                f"postgresql://floe:{secret}@[::1/broken"):
        proc = subprocess.run([str(tool("replication_tool")), "--dsn", dsn, "info"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 3
        assert secret not in proc.stdout + proc.stderr
        assert json.loads(proc.stdout)["error"]


def test_the_relation_cache_reads_the_catalog_as_of_the_decoded_transaction(tool, pg):
    """The walsender can send a transaction before other sessions see it committed
    (its commit record is in the WAL a moment before the transaction leaves the
    process array; for as long as a synchronous standby takes, under synchronous
    replication). A catalog read in that moment saw the columns before the
    transaction's renames: floe run bound a swap of two names by name (the wrong
    values under each name in Bronze) and copied the table again. Here a rename's
    transaction stays open while the cache's lookup for it runs: the lookup waits for
    it, then reads the renamed columns."""
    pg.execute("CREATE TABLE rc (id int PRIMARY KEY, x text, y text)")
    oid = str(pg.execute("SELECT 'rc'::regclass::oid")[0][0])
    with pg.connect(autocommit=False) as c:
        c.execute("ALTER TABLE rc RENAME COLUMN x TO tmp")
        c.execute("ALTER TABLE rc RENAME COLUMN y TO x")
        c.execute("ALTER TABLE rc RENAME COLUMN tmp TO y")
        xid = str(c.execute("SELECT pg_current_xact_id()::text::bigint "
                            "& 4294967295").fetchone()[0])
        lookup = subprocess.Popen(
            [str(tool("replication_tool")), "--dsn", pg.dsn, "columns", "--relation",
             oid, "--after-xid", xid, "--wait-ms", "60000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            lookup.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        assert lookup.poll() is None, "the lookup did not wait for the transaction"
        c.commit()
    out, err = lookup.communicate(timeout=60)
    assert lookup.returncode == 0, err
    assert json.loads(out)["columns"] == ["id", "y", "x"]
    # Without a transaction to wait for (and for one long visible) it reads at once.
    assert run_tool(tool, "--dsn", pg.dsn, "columns", "--relation", oid)[0] == \
        {"columns": ["id", "y", "x"]}
    assert run_tool(tool, "--dsn", pg.dsn, "columns", "--relation", oid,
                    "--after-xid", xid, "--wait-ms", "0")[0] == \
        {"columns": ["id", "y", "x"]}
    # A transaction that never becomes visible (here: one not yet begun) is waited for
    # no longer than the bound: the catalog as it is.
    future = str((int(pg.execute("SELECT pg_current_xact_id()::text::bigint")[0][0])
                  + 1000) & 0xFFFFFFFF)
    assert run_tool(tool, "--dsn", pg.dsn, "columns", "--relation", oid,
                    "--after-xid", future, "--wait-ms", "300")[0] == \
        {"columns": ["id", "y", "x"]}
