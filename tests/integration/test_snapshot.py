"""floe's initial snapshot against a real PostgreSQL, driven through
tests/tools/snapshot_tool: row counts and checksums equal to what Postgres computes
over the same rows (key-range and ctid chunks, 1 and 2 workers), consistency with the
slot under concurrent writes (snapshot + the slot's changes == the final table, and
the same check catches a snapshot taken without the exported snapshot), odd
identifiers, and an interrupted snapshot reported as incomplete."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time

import psycopg
from psycopg import sql

# The session settings floe pins on its connections, so Postgres renders values here
# exactly as the snapshot's COPY does.
PINNED = ("SET DateStyle = ISO; SET IntervalStyle = postgres; SET TimeZone = 'UTC'; "
          "SET extra_float_digits = 3; SET bytea_output = hex")


def run_snapshot(tool, pg, slot: str, tables: list[list[str]], *extra: str,
                 dsn: str | None = None, timeout: float = 60):
    """Runs snapshot_tool; returns (exit code, JSON lines of stdout, stderr)."""
    proc = subprocess.run(
        [str(tool("snapshot_tool")), "--dsn", dsn or pg.dsn, "--slot", slot,
         "--tables-json", json.dumps(tables), *extra],
        capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc.returncode, lines, proc.stderr


def snapshot_ok(tool, pg, slot, tables, *extra, **kw) -> dict:
    rc, lines, err = run_snapshot(tool, pg, slot, tables, *extra, **kw)
    assert rc == 0, f"snapshot_tool failed ({rc}):\n{lines}\n{err}"
    assert lines[-1]["complete"] is True
    return {"slot": lines[0], "tables": {tuple(l["table"]): l for l in lines[1:-1]},
            "end": lines[-1], "stderr": err}


def text_columns(pg, schema: str, table: str) -> list[str]:
    return [r[0] for r in pg.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum",
        (sql.Identifier(schema, table).as_string(None),))]


def sql_checksum(pg, schema: str, table: str) -> tuple[int, int]:
    """Count and checksum computed by Postgres: the tool's encoding (per column `N`
    for NULL, else byte length, ':', value as the type's output function renders
    it), md5, first 8 bytes as a big-endian integer, summed modulo 2^64."""
    cols = text_columns(pg, schema, table)
    parts = sql.SQL(", ").join(
        sql.SQL("CASE WHEN {c} IS NULL THEN 'N' ELSE octet_length(format('%s', {c}))::text"
                " || ':' || format('%s', {c}) END").format(c=sql.Identifier(c))
        for c in cols)
    q = sql.SQL("SELECT count(*), coalesce(sum(('x' || left(md5(concat({parts})), 16))"
                "::bit(64)::bigint::numeric), 0) FROM {t}").format(
        parts=parts, t=sql.Identifier(schema, table))
    with pg.connect() as conn:
        conn.execute(PINNED)
        count, total = conn.execute(q).fetchone()
    return count, int(total) % (1 << 64)


def assert_matches_postgres(result: dict, pg, schema: str, table: str) -> None:
    got = result["tables"][(schema, table)]
    count, checksum = sql_checksum(pg, schema, table)
    assert (got["rows"], int(got["checksum"])) == (count, checksum), (schema, table)


def test_snapshot_with_one_and_two_workers_matches_postgres(tool, pg):
    pg.execute("""
      CREATE TABLE big (id bigint PRIMARY KEY, name text, amount numeric(12,2),
                        at timestamptz, flag bool, ratio float8, note text);
      INSERT INTO big SELECT g, 'name ' || g, g * 1.25, '2024-01-01'::timestamptz
               + g * interval '1 minute', g % 3 = 0, g / 7.0,
             CASE g % 5 WHEN 0 THEN NULL WHEN 1 THEN E'tab\\there\\nnew line'
                        WHEN 2 THEN E'back\\\\slash \\\\N' WHEN 3 THEN 'ünïcødé €'
                        ELSE '' END
        FROM generate_series(1, 300000) g;
      ANALYZE big;
      CREATE TABLE nopk (x int, y text);
      INSERT INTO nopk SELECT g % 1000, CASE WHEN g % 11 = 0 THEN NULL ELSE md5(g::text) END
        FROM generate_series(1, 60000) g;
      ANALYZE nopk;
      CREATE TABLE empty_t (id int PRIMARY KEY, v text);
      CREATE TABLE one_row (id int PRIMARY KEY, v text);
      INSERT INTO one_row VALUES (7, E'only\\r\\x01row');
    """)
    tables = [["public", "big"], ["public", "nopk"], ["public", "empty_t"],
              ["public", "one_row"]]
    for workers, slot in ((1, "snap_w1"), (2, "snap_w2")):
        res = snapshot_ok(tool, pg, slot, tables, "--workers", str(workers),
                          "--target-rows", "40000", "--target-pages", "60",
                          "--progress-interval-ms", "100")
        for _, t in tables:
            assert_matches_postgres(res, pg, "public", t)
        if workers == 1:
            # One worker reads every table whole: nobody could take a next chunk.
            assert all(t["chunks"] == 1 for t in res["tables"].values())
        else:
            assert res["tables"][("public", "big")]["chunks"] == 8  # key ranges
            assert res["tables"][("public", "nopk")]["chunks"] > 1  # ctid page ranges
        assert res["tables"][("public", "empty_t")]["rows"] == 0
        assert res["tables"][("public", "one_row")]["rows"] == 1
        # The snapshot stands for the slot's consistent point.
        assert res["end"]["consistent_point"] == res["slot"]["consistent_point"]
        assert res["slot"]["snapshot_name"]
        # Not a terminal: one progress line per interval, the last one at 100%.
        lines = [l for l in res["stderr"].splitlines() if l.startswith("snapshot: ")]
        assert lines and "(100%)" in lines[-1] and "360001/360001 rows" in lines[-1], \
            res["stderr"]


# ---------------------------------------------------------------------------
# Consistency with the slot under concurrent writes


class Writer(threading.Thread):
    """Inserts, updates (version + 1) and deletes rows of `acct` in small
    transactions until stopped."""

    def __init__(self, pg, first_id: int):
        super().__init__(daemon=True)
        self.pg = pg
        self.first_id = first_id
        self.stop = threading.Event()
        self.commits = 0
        self.error: Exception | None = None

    def run(self):
        rnd = random.Random(7)
        next_id = self.first_id
        try:
            with self.pg.connect() as conn:
                while not self.stop.is_set():
                    op = rnd.random()
                    with conn.transaction():
                        if op < 0.6:
                            for _ in range(3):
                                conn.execute("UPDATE acct SET val = val + 1, version = "
                                             "version + 1 WHERE id = %s",
                                             (rnd.randrange(1, 20001),))
                        elif op < 0.85:
                            conn.execute("INSERT INTO acct VALUES (%s, 0, 1)", (next_id,))
                            next_id += 1
                        else:
                            conn.execute("DELETE FROM acct WHERE id = %s",
                                         (rnd.randrange(1, 20001),))
                    self.commits += 1
        except Exception as e:  # surfaced by the test
            self.error = e


def stream_changes(tool, pg, slot: str, marker: str) -> list[dict]:
    pg.execute("SELECT pg_logical_emit_message(false, %s, 'end')", (marker,))
    proc = subprocess.run(
        [str(tool("replication_tool")), "--dsn", pg.dsn, "stream", "--slot", slot,
         "--publication", "snap_pub", "--streaming", "off", "--until-message-prefix",
         marker, "--seconds", "30"], capture_output=True, text=True, timeout=60)
    out = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
    assert proc.returncode == 0 and out[-1]["reason"] == "until_message", proc.stdout
    result, current = [], None
    for m in out:
        if m["type"] == "BEGIN":
            current = []
        elif m["type"] == "COMMIT":
            result.extend(current)
            current = None
        elif m["type"] in ("INSERT", "UPDATE", "DELETE", "TRUNCATE") and current is not None:
            current.append(m)
    return result


def replay_problems(snapshot_rows: list[dict], changes: list[dict]) -> tuple[list, dict]:
    """Applies the slot's changes to the snapshot. Returns the problems found (an
    insert of a key the snapshot has = duplicate; an update or delete of a key it
    lacks = gap; an update whose version is not the snapshot's + 1 = the snapshot is
    not the state at the consistent point) and the resulting state."""
    state: dict[int, tuple[int, int]] = {}
    problems = []
    for r in snapshot_rows:
        k = int(r["id"])
        if k in state:
            problems.append(("duplicate row in snapshot", k))
        state[k] = (int(r["val"]), int(r["version"]))
    for c in changes:
        if c["type"] == "INSERT":
            k = int(c["new"]["id"])
            if k in state:
                problems.append(("insert of a key already in the snapshot", k))
            state[k] = (int(c["new"]["val"]), int(c["new"]["version"]))
        elif c["type"] == "UPDATE":
            k = int(c["new"]["id"])
            new = (int(c["new"]["val"]), int(c["new"]["version"]))
            if k not in state:
                problems.append(("update of a key missing from the snapshot", k))
            elif state[k][1] + 1 != new[1]:
                problems.append(("update does not follow the snapshot's version", k))
            state[k] = new
        elif c["type"] == "DELETE":
            k = int(c["old"]["id"])
            if k not in state:
                problems.append(("delete of a key missing from the snapshot", k))
            state.pop(k, None)
        else:
            problems.append(("unexpected change", c["type"]))
    return problems, state


def snapshot_under_writes(tool, pg, tmp_path, slot: str, *extra: str) -> list:
    writer = Writer(pg, first_id=pg.execute("SELECT max(id) + 1 FROM acct")[0][0])
    writer.start()
    try:
        while writer.commits < 50 and writer.is_alive():
            time.sleep(0.01)
        out = tmp_path / f"{slot}.jsonl"
        snapshot_ok(tool, pg, slot, [["public", "acct"]], "--workers", "2",
                    "--target-rows", "2000", "--batch-rows", "500", "--sink-delay-ms", "5",
                    "--jsonl", str(out),
                    *extra)
        time.sleep(0.2)  # writes keep going after the snapshot too
    finally:
        writer.stop.set()
        writer.join()
    assert writer.error is None, writer.error
    rows = [json.loads(l)["row"] for l in out.read_text().splitlines()]
    changes = stream_changes(tool, pg, slot, f"end_{slot}")
    assert changes, "the writer ran during the snapshot, so the slot has changes"
    problems, state = replay_problems(rows, changes)
    if not problems:
        final = {r[0]: (r[1], r[2]) for r in pg.execute("SELECT id, val, version FROM acct")}
        if state != final:
            problems.append(("snapshot + changes != final table",
                             len(set(state.items()) ^ set(final.items()))))
    return problems


def test_snapshot_plus_slot_changes_is_the_final_table_under_concurrent_writes(
        tool, pg, tmp_path):
    pg.execute("""
      CREATE TABLE acct (id int PRIMARY KEY, val int NOT NULL, version int NOT NULL);
      INSERT INTO acct SELECT g, 0, 1 FROM generate_series(1, 20000) g;
      CREATE PUBLICATION snap_pub FOR TABLE acct;
    """)
    assert snapshot_under_writes(tool, pg, tmp_path, "snap_consistent") == []
    # The same check catches a snapshot that is not the slot's: workers taking their
    # own snapshots 300 ms after the slot was created see writes the slot streams too.
    problems = snapshot_under_writes(tool, pg, tmp_path, "snap_unsynced", "--no-export",
                                     "--delay-ms", "300")
    assert problems, "a snapshot newer than the consistent point must be detected"


# ---------------------------------------------------------------------------


def test_odd_identifiers_are_quoted_everywhere(tool, pg, tmp_path):
    schema, keyed, heap = 'Sch "ëma" x', "Tä'ble \"q\" 1", 'nö pk "t"'
    key_col, val_col = 'I d"', "va'l \"ue\" ü"
    with pg.connect() as conn:
        s = sql.Identifier(schema)
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(s))
        conn.execute(sql.SQL("CREATE TABLE {} ({} int PRIMARY KEY, {} text)").format(
            sql.Identifier(schema, keyed), sql.Identifier(key_col), sql.Identifier(val_col)))
        conn.execute(sql.SQL(
            "INSERT INTO {} SELECT g, CASE g % 4 WHEN 0 THEN NULL WHEN 1 THEN "
            "E'a\\tb\\\\c\\nd' WHEN 2 THEN 'ü ' || g ELSE '\\N' END "
            "FROM generate_series(1, 3000) g").format(sql.Identifier(schema, keyed)))
        conn.execute(sql.SQL("CREATE TABLE {} ({} text)").format(
            sql.Identifier(schema, heap), sql.Identifier(val_col)))
        conn.execute(sql.SQL("INSERT INTO {} SELECT repeat('x', g % 50) || ' \"' "
                             "FROM generate_series(1, 3000) g").format(
            sql.Identifier(schema, heap)))
        # A partitioned parent: key ranges over its partitions.
        conn.execute(sql.SQL(
            "CREATE TABLE {p} ({k} int PRIMARY KEY, v text) PARTITION BY RANGE ({k}); "
            "CREATE TABLE {p1} PARTITION OF {p} FOR VALUES FROM (MINVALUE) TO (1500); "
            "CREATE TABLE {p2} PARTITION OF {p} FOR VALUES FROM (1500) TO (MAXVALUE); "
            "INSERT INTO {p} SELECT g, 'p' || g FROM generate_series(1, 3000) g").format(
            p=sql.Identifier(schema, "pärt"), p1=sql.Identifier(schema, "pärt 1"),
            p2=sql.Identifier(schema, "pärt 2"), k=sql.Identifier(key_col)))
    out = tmp_path / "rows.jsonl"
    res = snapshot_ok(tool, pg, "snap_odd", [[schema, keyed], [schema, heap]],
                      "--workers", "2", "--target-rows", "500", "--target-pages", "2",
                      "--jsonl", str(out))
    assert res["tables"][(schema, keyed)]["chunks"] > 1
    assert res["tables"][(schema, heap)]["chunks"] > 1
    assert_matches_postgres(res, pg, schema, keyed)
    assert_matches_postgres(res, pg, schema, heap)
    part = snapshot_ok(tool, pg, "snap_part", [[schema, "pärt"]], "--target-rows", "500")
    assert part["tables"][(schema, "pärt")]["chunks"] > 1
    assert_matches_postgres(part, pg, schema, "pärt")
    got = sorted((tuple(j["table"]), tuple(j["row"].items()))
                 for j in map(json.loads, out.read_text().splitlines()))
    want = sorted(
        [((schema, keyed), ((key_col, str(k)), (val_col, v)))
         for k, v in pg.execute(sql.SQL("SELECT {}, {} FROM {}").format(
             sql.Identifier(key_col), sql.Identifier(val_col),
             sql.Identifier(schema, keyed)))]
        + [((schema, heap), ((val_col, v),))
           for (v,) in pg.execute(sql.SQL("SELECT {} FROM {}").format(
               sql.Identifier(val_col), sql.Identifier(schema, heap)))])
    assert got == want


def test_a_killed_worker_makes_the_snapshot_incomplete(tool, pg):
    pg.execute("""
      CREATE TABLE big (id int PRIMARY KEY, v text);
      INSERT INTO big SELECT g, md5(g::text) FROM generate_series(1, 200000) g;
    """)
    dsn = pg.dsn + " application_name=floe_snap_kill"
    proc = subprocess.Popen(
        [str(tool("snapshot_tool")), "--dsn", dsn, "--slot", "snap_kill", "--tables-json",
         '[["public", "big"]]', "--workers", "2", "--target-rows", "20000",
         "--batch-rows", "1000", "--sink-delay-ms", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        killed = []
        deadline = time.time() + 20
        while not killed and time.time() < deadline:
            killed = pg.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "application_name = 'floe_snap_kill' AND backend_type = 'client backend' "
                "AND query LIKE 'COPY %' LIMIT 1")
            time.sleep(0.05)
        assert killed == [(True,)]
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    lines = [json.loads(l) for l in stdout.splitlines() if l.strip()]
    assert proc.returncode == 4, (stdout, stderr)
    assert lines[-1]["incomplete"] is True
    assert "snapshot incomplete" in lines[-1]["error"]
    # Nothing was reported complete: no table result, no completion line.
    assert not any("complete" in l or "rows" in l for l in lines), lines


def test_a_failing_sink_or_cancel_makes_the_snapshot_incomplete(tool, pg):
    pg.execute("""
      CREATE TABLE t (id int PRIMARY KEY, v text);
      INSERT INTO t SELECT g, g::text FROM generate_series(1, 50000) g;
    """)
    for slot, extra, code in (
            ("snap_sink", ("--sink-fail-after", "3"), "IOError"),
            ("snap_cancel", ("--cancel-after-ms", "300", "--sink-delay-ms", "50"),
             "Cancelled")):
        rc, lines, err = run_snapshot(tool, pg, slot, [["public", "t"]], "--workers", "2",
                                      "--target-rows", "5000", "--batch-rows", "1000",
                                      *extra)
        assert rc == 4, (lines, err)
        assert lines[-1]["incomplete"] is True and lines[-1]["error"].startswith(code), \
            lines[-1]
        assert not any("complete" in l or "rows" in l for l in lines)
