"""Two type gaps of docs/testing.md, end to end on a real PostgreSQL 15 through the
real `floe run` and `floe silver`:

* case 27: a numeric(p,s) column retyped to unconstrained `numeric` (docs/
  type-mapping.md: exact text, a string field; docs/schema-evolution.md: not a
  promotion, so a new field `<column>__string` and a copy again), with values no
  decimal holds (more than 38 digits, NaN, ±Infinity) in the retype's own
  transaction and after it, while floe streams and while it is stopped;
* case 30: columns of user types (an enum, a composite, a domain, a range) that
  are renamed or moved to another schema, and then dropped with their types,
  while floe lags or in the very transaction that changed them: pgoutput still
  describes those changes with the dropped type's OID, which the catalog no longer
  knows.

The oracles are not floe: an audit trigger that records every row change as
PostgreSQL's own text output of the row (`NEW::text`, so it does not care whether
a column's type still exists), which Bronze must equal change for change, and the
source read with psql (each column `::text`), which Silver must equal. Bronze and
Silver are read with PyIceberg and DuckDB; each value read back is rendered the way
PostgreSQL's output function prints it (decimals with their scale, composites and
ranges with PostgreSQL's quoting) and compared as text, so a value's exact digits
and scale count.
"""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from psycopg import sql as psql

from floerun import check_order, compare_events, floe, lsn_int  # noqa: F401
from test_silver import silver, silver_ident
from test_source_faults import bronze_fields, copies, last_copy, silver_types
from test_stream_faults import no_duplicates

SERVICE = "svc"


# ---------------------------------------------------------------------------
# The audit trail: every row change as PostgreSQL prints the row.

AUDIT_SQL = """
CREATE TABLE audit_log (n bigserial PRIMARY KEY,
                        txid bigint NOT NULL DEFAULT pg_current_xact_id()::text::bigint,
                        tbl text NOT NULL, op text NOT NULL, cols text[] NOT NULL,
                        old text, new text);
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- The row's own text output (each column through its type's output function)
  -- and the names of the columns it had then, in attnum order: still readable
  -- after the column or its type is gone.
  INSERT INTO audit_log (tbl, op, cols, old, new) VALUES (TG_TABLE_NAME, TG_OP,
    ARRAY(SELECT attname::text FROM pg_attribute WHERE attrelid = TG_RELID
          AND attnum > 0 AND NOT attisdropped ORDER BY attnum),
    CASE WHEN TG_OP <> 'INSERT' THEN OLD::text END,
    CASE WHEN TG_OP <> 'DELETE' THEN NEW::text END);
  RETURN NULL;
END $$;
"""


def audited(pg, table: str) -> None:
    pg.execute(AUDIT_SQL)
    pg.execute(f"CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON {table} "
               "FOR EACH ROW EXECUTE FUNCTION audit_row()")


def record_fields(text: str) -> list[str | None]:
    """The fields of a row's text output, `(1,"a,b",,"x""y")`: an unquoted empty
    field is NULL, `""` is the empty string, inside quotes `""` is `"` and a
    backslash escapes the next character (PostgreSQL's record_out / record_in)."""
    assert text[0] == "(" and text[-1] == ")", text
    out: list[str | None] = []
    buf: list[str] = []
    quoted = in_quotes = False
    i, body = 0, text[1:-1]
    while i <= len(body):
        ch = body[i] if i < len(body) else None
        if ch is None or (ch == "," and not in_quotes):
            out.append("".join(buf) if buf or quoted else None)
            buf, quoted = [], False
        elif ch == "\\":
            i += 1
            buf.append(body[i])
        elif ch == '"':
            if in_quotes and i + 1 < len(body) and body[i + 1] == '"':
                buf.append('"')
                i += 1
            else:
                in_quotes, quoted = not in_quotes, True
        else:
            buf.append(ch)
        i += 1
    return out


def audit_changes(pg, table: str, cols: list[str], key: str = "id") -> list[tuple]:
    """Every change of `table` the trigger saw, in its order (one session commits
    them one after another, so that is commit order): (op, txid, each of `cols` as
    text, None where the row had no such column any more). A delete carries its key
    only (REPLICA IDENTITY DEFAULT). The tests never update a key."""
    out = []
    for op, txid, names, old, new in pg.execute(
            "SELECT op, txid, cols, old, new FROM audit_log WHERE tbl = %s ORDER BY n",
            (table,)):
        if op == "DELETE":
            values = dict(zip(names, record_fields(old)))
            out.append(("d", txid, tuple(values[c] if c == key else None for c in cols)))
            continue
        values = dict(zip(names, record_fields(new)))
        out.append(("c" if op == "INSERT" else "u", txid,
                    tuple(values.get(c) for c in cols)))
    return out


# ---------------------------------------------------------------------------
# Values read from the lake, printed as PostgreSQL prints them.

RANGE_KEYS = {"lower", "upper", "lower_inclusive", "upper_inclusive", "empty"}


def _quoted(text: str | None) -> str:
    """A field inside a composite's text output, quoted as record_out quotes it."""
    if text is None:
        return ""
    if text == "" or any(c in text for c in '"\\(),') or any(c.isspace() for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'
    return text


def pg_text(v) -> str | None:
    """A value read back from Iceberg as PostgreSQL's output function prints the
    source value: a decimal with its scale (1.50, not 1.5), a struct of a composite
    as `(a,"b,c",)`, a struct of a range as `[1,5)` or `empty`."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and set(v) == RANGE_KEYS:
        if v["empty"]:
            return "empty"
        return ("[" if v["lower_inclusive"] else "(") + (pg_text(v["lower"]) or "") + \
            "," + (pg_text(v["upper"]) or "") + ("]" if v["upper_inclusive"] else ")")
    if isinstance(v, dict):
        return "(" + ",".join(_quoted(pg_text(x)) for x in v.values()) + ")"
    raise TypeError(f"no PostgreSQL text for {v!r}")


def quarantined(run, con) -> list[dict]:
    """The quarantine table's rows (PyIceberg and DuckDB agreeing), [] when floe
    never made one."""
    if not run.catalog().table_exists(run.ident("quarantine")):
        return []
    return run.rows(con, "quarantine")


def bronze_changes(rows: list[dict], fields: dict[str, list[str]],
                   quarantine: list[dict]) -> list[tuple]:
    """Bronze's streamed changes (a copy's `r` rows and its `t` marker left out) as
    (op, txid, each column as text). A column's value is the one non-null value
    among the fields it was ever written to (`fields`), or, when all are null, the
    raw text of a quarantine row naming the column at this change's position (a
    value floe could not hold is null plus a quarantine row, never a silent null)."""
    held = {(q["column_name"], q["cdc_commit_lsn"], q["cdc_source_lsn"]): q["raw_text"]
            for q in quarantine}
    out = []
    for r in rows:
        if r["cdc_op"] == "r" or (r["cdc_op"] == "t" and r["cdc_source_tx_id"] is None):
            continue
        values = []
        for col, names in fields.items():
            present = [r[n] for n in names if r.get(n) is not None]
            assert len(present) <= 1, f"{col} written to two fields in one row: {r}"
            values.append(pg_text(present[0]) if present else
                          held.get((col, r["cdc_commit_lsn"], r["cdc_source_lsn"])))
        out.append((r["cdc_op"], r["cdc_source_tx_id"], tuple(values)))
    return out


def source_text(pg, table: str, key: str = "id") -> dict[str, dict[str, str | None]]:
    """The source table read with psql, each column as its `::text`, by key."""
    with pg.connect() as c:
        empty = psql.SQL("SELECT * FROM {} LIMIT 0").format(psql.Identifier(table))
        names = [d.name for d in c.execute(empty).description]
        cur = c.execute(psql.SQL("SELECT {} FROM {}").format(
            psql.SQL(", ").join(psql.SQL("{}::text").format(psql.Identifier(n))
                                for n in names), psql.Identifier(table)))
        return {r[names.index(key)]: dict(zip(names, r)) for r in cur.fetchall()}


def silver_equals_source(run, pg, con, table: str, key: str = "id") -> None:
    """Silver read by PyIceberg and by DuckDB equals psql, row for row and column
    for column (the same columns, every value printed as PostgreSQL prints it)."""
    want = source_text(pg, table, key)
    t = run.catalog().load_table(silver_ident(f"public.{table}"))
    path = t.metadata_location.removeprefix("file://")
    for reader, rows in {
            "PyIceberg": t.scan().to_arrow().to_pylist(),
            "DuckDB": con.execute("SELECT * FROM iceberg_scan(?)", [path])
                         .fetch_arrow_table().to_pylist()}.items():
        got = {pg_text(r[key]): {c: pg_text(v) for c, v in r.items()
                                 if c != "cdc_commit_lsn"} for r in rows}
        assert len(got) == len(rows), f"{reader}: duplicate keys in Silver {table}"
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        differing = [(k, want[k], got[k]) for k in sorted(want)
                     if k in got and want[k] != got[k]][:3]
        assert not missing and not extra and not differing, (
            f"{reader}: Silver {table} differs from psql: missing keys {missing}, extra "
            f"keys {extra}, differing (key, psql, Silver) {differing}")


# ---------------------------------------------------------------------------
# Waiting for floe, never letting it fail quietly.

def caught_up(run, pg, timeout: float = 60) -> None:
    """Waits until the slot confirmed everything written so far (every change
    committed before this call is in Bronze). Nothing in these tests gives floe a
    reason to reconnect: a `reconnecting` line of this start fails at once with the
    error floe logged (an error it retries forever is a stall, not a recovery)."""
    target = lsn_int(pg.execute("SELECT pg_current_wal_lsn()::text")[0][0])
    deadline = time.monotonic() + timeout
    while True:
        run.check_alive()
        this_start = run.log_text().rsplit("===== floe run start", 1)[-1]
        errors = [line for line in this_start.splitlines() if "reconnecting in" in line]
        assert not errors, (
            f"floe run stalls: it fails on the stream and reconnects instead of "
            f"confirming {target:X} (confirmed: {run.slot_confirmed_flush() or 0:X}):\n"
            + "\n".join(errors[:3]) + "\n" + run.log_tail(30))
        if (run.slot_confirmed_flush() or 0) >= target:
            return
        assert time.monotonic() < deadline, (
            f"timed out after {timeout}s waiting for slot {run.slot} to confirm "
            f"{target:X}\n{run.log_tail()}")
        time.sleep(0.25)


def wait_copies(run, table: str, n: int, timeout: float = 90) -> None:
    """Waits until Bronze holds the `n`-th copy again of the table and that copy
    committed (Bronze drops floe.source.recopy-pending in that commit)."""
    run.wait_until(lambda: copies(run.rows_pyiceberg(table)) == n, timeout,
                   what=f"copy number {n} of {table}")
    run.wait_until(lambda: "floe.source.recopy-pending" not in run.load(table).properties,
                   timeout, what=f"copy number {n} of {table} to commit")


def in_tx(pg, *statements: str) -> int:
    """Runs the statements in one transaction; returns its xid."""
    with pg.connect(autocommit=False) as c:
        xid = c.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()[0]
        for s in statements:
            c.execute(s)
        c.commit()
    return xid


# ---------------------------------------------------------------------------
# Case 27: numeric(p,s) -> unconstrained numeric

def test_numeric_p_s_retyped_to_unconstrained_numeric_keeps_every_value_exact(
        floe, pg, duckdb_con):
    """amount numeric(10,2) becomes unconstrained `numeric` inside a transaction
    that updates rows before the ALTER and, after it, writes values no decimal holds
    (30 significant digits, NaN, ±Infinity, 1e-20, a scale of 5) and deletes, while
    floe streams; fee numeric(12,4) is retyped the same way while floe is stopped,
    and floe is started again. Bronze keeps `amount` (decimal(10,2), values with
    scale 2 only before the retype) and writes the column's later values, as exact
    text, to a new field `amount__string` (likewise fee__string), the table copied
    again after each retype with its `r` rows equal to psql's `::text` at the time.
    Every change equals the audit trigger's text of the row (nothing quarantined,
    nothing rounded); after the restart no third field and no third copy appear.
    `floe silver` equals psql (`::text`, PyIceberg and DuckDB) with `amount` and
    `fee` as strings."""
    table = "public.ledger"
    pg.execute("""
        CREATE TABLE ledger (id int PRIMARY KEY, amount numeric(10,2),
                             fee numeric(12,4), note text);
        INSERT INTO ledger SELECT g, g * 1234.56 + 0.01, g / 7.0, 'n' || g
          FROM generate_series(1, 40) g;
        UPDATE ledger SET amount = -99999999.99, fee = 99999999.9999 WHERE id = 40;
    """)
    audited(pg, "ledger")
    run = floe(service=SERVICE, tables=[table])
    run.start().wait_streaming()
    pg.execute("UPDATE ledger SET amount = 0.10, note = 'streamed' WHERE id = 1")
    caught_up(run, pg)
    before = bronze_fields(run, table)
    assert before["amount"][1] == "decimal(10, 2)" and \
        before["fee"][1] == "decimal(12, 4)", before

    retype = in_tx(
        pg,
        "UPDATE ledger SET amount = amount + 1 WHERE id <= 3",
        "ALTER TABLE ledger ALTER COLUMN amount TYPE numeric",
        "UPDATE ledger SET amount = 12345678901234567890.123456789 WHERE id = 4",
        "UPDATE ledger SET amount = 'NaN' WHERE id = 5",
        "UPDATE ledger SET amount = amount * 1000000000000 WHERE id = 6",
        "INSERT INTO ledger VALUES (101, 'Infinity', 1.5, 'inf'), "
        "(102, '-Infinity', -1.5, '-inf'), (103, 0.000000001, 0, 'tiny'), "
        "(104, -1e-20, 0, 'tinier'), (105, 1.50000, 0, 'scale 5')",
        "UPDATE ledger SET fee = fee + 1 WHERE id = 7",
        "DELETE FROM ledger WHERE id IN (8, 102)")
    caught_up(run, pg)
    wait_copies(run, table, 1)
    f = bronze_fields(run, table)
    assert f["amount"] == before["amount"] and f["fee"] == before["fee"], f
    assert f["amount__string"][1] == "string", f
    copied = {str(r["id"]): pg_text(r["amount__string"])
              for r in last_copy(run.rows(duckdb_con, table))}
    assert copied == {k: v["amount"] for k, v in source_text(pg, "ledger").items()}
    assert copied["4"] == "12345678901234567890.123456789" and copied["5"] == "NaN" \
        and copied["105"] == "1.50000" and copied["104"] == "-0.00000000000000000001"

    pg.execute("UPDATE ledger SET amount = '-0.5' WHERE id = 11")
    pg.execute("INSERT INTO ledger VALUES (106, 1e30, 2.5, 'big')")
    caught_up(run, pg)
    silver(run)
    assert silver_types(run, table) == {
        "id": "int", "amount": "string", "fee": "decimal(12, 4)", "note": "string",
        "cdc_commit_lsn": "long"}, silver_types(run, table)
    silver_equals_source(run, pg, duckdb_con, "ledger")

    # Stopped: changes, and fee retyped the same way between them; then started.
    run.stop()
    pg.execute("UPDATE ledger SET amount = '-Infinity' WHERE id = 9")
    pg.execute("UPDATE ledger SET amount = 42 WHERE id = 101")
    in_tx(pg,
          "UPDATE ledger SET fee = fee * 2 WHERE id = 12",
          "ALTER TABLE ledger ALTER COLUMN fee TYPE numeric",
          "UPDATE ledger SET fee = 'NaN', amount = 'NaN' WHERE id = 10",
          "UPDATE ledger SET fee = 1.234567890123456789 WHERE id = 13",
          "INSERT INTO ledger VALUES (107, '-Infinity', 'Infinity', 'both')")
    run.start()
    run.wait_streaming()
    caught_up(run, pg)
    wait_copies(run, table, 2)
    pg.execute("UPDATE ledger SET amount = 'NaN', fee = -0.000 WHERE id = 14")
    pg.execute("DELETE FROM ledger WHERE id = 103")
    caught_up(run, pg)
    silver(run)
    assert silver_types(run, table) == {
        "id": "int", "amount": "string", "fee": "string", "note": "string",
        "cdc_commit_lsn": "long"}, silver_types(run, table)
    silver_equals_source(run, pg, duckdb_con, "ledger")
    run.stop()

    rows = run.rows(duckdb_con, table)
    check_order(table, rows)
    run.check_commit_lsn(table, rows)
    no_duplicates(run, duckdb_con, table)
    f = bronze_fields(run, table)
    assert set(f) - set(before) == {"amount__string", "fee__string"}, f
    assert f["fee__string"][1] == "string", f
    assert copies(rows) == 2
    # Decimal values (scale 2) only before the ALTER: from the retype's own
    # transaction only its first three updates.
    retype_lsn = {r["cdc_commit_lsn"] for r in rows if r["cdc_source_tx_id"] == retype}
    assert len(retype_lsn) == 1, retype_lsn
    late = [(r["cdc_op"], r["id"]) for r in rows if r["amount"] is not None and
            r["cdc_commit_lsn"] >= min(retype_lsn)]
    assert sorted(late) == [("u", 1), ("u", 2), ("u", 3)], late
    assert all(r["amount"].as_tuple().exponent == -2 for r in rows
               if r["amount"] is not None)
    # Nothing was a value floe could not hold.
    assert quarantined(run, duckdb_con) == []
    cols = ["id", "amount", "fee", "note"]
    compare_events("Bronze ledger vs the audit trigger",
                   audit_changes(pg, "ledger", cols),
                   bronze_changes(rows, {"id": ["id"],
                                         "amount": ["amount", "amount__string"],
                                         "fee": ["fee", "fee__string"],
                                         "note": ["note"]}, []))


# ---------------------------------------------------------------------------
# Case 30: columns whose user type is renamed, moved, or gone when floe decodes

USER_TYPES = """
    CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
    CREATE TYPE item AS (name text, qty int);
    CREATE DOMAIN posint AS int CHECK (VALUE > 0);
    CREATE TYPE span AS RANGE (subtype = int4);
    CREATE TABLE gear (id int PRIMARY KEY, v int, m mood, it item, p posint, s span);
    INSERT INTO gear SELECT g, g, 'ok', ROW('n' || g, g)::item, g, span(g, g + 10)
      FROM generate_series(1, 20) g;
"""
GEAR_COLS = ["id", "v", "m", "it", "p", "s"]
USER_COLS = ["m", "it", "p", "s"]


def gear_fields(run) -> dict[str, list[str]]:
    """Each source column of gear and the Bronze fields it may have been written to:
    its own, and any `<column>__<type>` floe added for it."""
    names = [f.name for f in run.load("public.gear").schema().fields]
    return {c: [n for n in names if n == c or n.startswith(c + "__")] for c in GEAR_COLS}


@pytest.mark.parametrize("dropped", ["later_while_stopped", "same_transaction"])
def test_columns_of_user_types_renamed_moved_or_dropped_before_floe_decodes_them(
        floe, pg, duckdb_con, dropped):
    """A table with an enum, a composite (with a text field), a domain and a
    user-defined range column. First, while floe is stopped, rows change, the enum
    and the domain are renamed (ALTER TYPE/DOMAIN ... RENAME) and the composite and
    the range are moved to another schema (ALTER TYPE ... SET SCHEMA), and rows
    change again; floe is started and must stream all of it as before (the type
    OIDs are the same). Then the columns and their types are dropped before floe
    decodes the changes that used them, so that pgoutput describes those changes
    with type OIDs the catalog no longer knows:
    `later_while_stopped`: floe is stopped, the four columns change, a later
    transaction drops the columns and the types, more changes follow, and floe is
    started again; `same_transaction`: while floe streams, one transaction changes
    the enum, drops its column and DROP TYPE; then floe is restarted (it has not
    seen the table since) and one transaction changes the other three, drops them
    and their types. pgoutput sends each value as its type's text output, so the
    docs' rule applies (type-mapping.md: a value is never dropped silently; a type
    floe cannot map is its text): floe must keep streaming (no error, no
    reconnect loop), Bronze must hold every change the audit trigger recorded, each
    user-typed value as its text (in its field, a `<column>__<type>` field, or null
    with a quarantine row holding the text), and if floe diverts a value the log
    must name the table and the column. `floe silver` then equals psql (PyIceberg
    and DuckDB), after the renames with the four columns printed as PostgreSQL
    prints them, and at the end without them."""
    table = "public.gear"
    pg.execute(USER_TYPES)
    audited(pg, "gear")
    run = floe(service=SERVICE, tables=[table])
    run.start().wait_streaming()
    pg.execute("UPDATE gear SET m = 'sad', it = ROW('a,b', 1), p = 99, s = '[1,5]' "
               "WHERE id = 1")
    caught_up(run, pg)
    silver(run)
    silver_equals_source(run, pg, duckdb_con, "gear")

    # Renamed and moved while floe is stopped, with changes before and after.
    run.stop()
    pg.execute("UPDATE gear SET m = 'happy', it = ROW('x \"y\"', NULL), p = 7, "
               "s = 'empty', v = -v WHERE id = 2")
    pg.execute("""
        ALTER TYPE mood RENAME TO feeling;
        ALTER DOMAIN posint RENAME TO positive;
        CREATE SCHEMA other;
        ALTER TYPE item SET SCHEMA other;
        ALTER TYPE span SET SCHEMA other;
    """)
    pg.execute("INSERT INTO gear VALUES (21, 21, 'sad', ROW('', 0), 1, '(,3)')")
    pg.execute("UPDATE gear SET m = 'ok', it = ROW(NULL, 5), p = 3, s = '[2,)' "
               "WHERE id = 3")
    pg.execute("DELETE FROM gear WHERE id = 4")
    run.start()
    run.wait_streaming()
    pg.execute("UPDATE gear SET m = 'sad', it = ROW('after', 8) WHERE id = 5")
    caught_up(run, pg)
    silver(run)
    silver_equals_source(run, pg, duckdb_con, "gear")

    drop_all = ("ALTER TABLE gear DROP COLUMN m, DROP COLUMN it, DROP COLUMN p, "
                "DROP COLUMN s; DROP TYPE feeling; DROP TYPE other.item; "
                "DROP DOMAIN positive; DROP TYPE other.span")
    if dropped == "later_while_stopped":
        run.stop()
        pg.execute("UPDATE gear SET m = 'happy', it = ROW('gone', 6), p = 6, "
                   "s = '[6,7)', v = v + 100 WHERE id IN (6, 7)")
        pg.execute("INSERT INTO gear VALUES (22, 22, 'sad', ROW('new, gone', 22), 22, "
                   "'[22,23]')")
        pg.execute("DELETE FROM gear WHERE id = 8")
        pg.execute(drop_all)
        pg.execute("UPDATE gear SET v = v + 1000 WHERE id IN (6, 9)")
        pg.execute("INSERT INTO gear VALUES (23, 23)")
        run.start()
        run.wait_streaming()
    else:
        in_tx(pg,
              "UPDATE gear SET m = 'happy', v = v + 100 WHERE id IN (6, 7)",
              "INSERT INTO gear VALUES (22, 22, 'sad', ROW('a', 1), 2, '[3,4)')",
              "ALTER TABLE gear DROP COLUMN m",
              "DROP TYPE feeling",
              "UPDATE gear SET v = v + 1000 WHERE id = 6",
              "DELETE FROM gear WHERE id = 8")
        caught_up(run, pg)
        # Restarted: floe has not seen gear described since.
        run.stop()
        run.start()
        run.wait_streaming()
        in_tx(pg,
              "UPDATE gear SET it = ROW('gone, too', 9), p = 9, s = '[9,10)' "
              "WHERE id IN (9, 10)",
              "INSERT INTO gear VALUES (23, 23, ROW('(new)', 23), 23, '[23,24]')",
              "ALTER TABLE gear DROP COLUMN it, DROP COLUMN p, DROP COLUMN s",
              "DROP TYPE other.item", "DROP DOMAIN positive", "DROP TYPE other.span",
              "UPDATE gear SET v = -1 WHERE id IN (9, 23)",
              "DELETE FROM gear WHERE id = 10")
    pg.execute("UPDATE gear SET v = v * 2 WHERE id IN (11, 12)")
    pg.execute("INSERT INTO gear VALUES (24, 24)")
    caught_up(run, pg)
    silver(run)
    silver_equals_source(run, pg, duckdb_con, "gear")
    assert set(next(iter(source_text(pg, "gear").values()))) == {"id", "v"}
    run.stop()

    rows = run.rows(duckdb_con, table)
    check_order(table, rows)
    run.check_commit_lsn(table, rows)
    no_duplicates(run, duckdb_con, table)
    quarantine = quarantined(run, duckdb_con)
    fields = gear_fields(run)
    compare_events(f"Bronze gear vs the audit trigger ({dropped})",
                   audit_changes(pg, "gear", GEAR_COLS),
                   bronze_changes(rows, fields, quarantine))
    # A value floe diverted (to quarantine, or to a field of another type) is said
    # so in the log, naming the table and the column.
    log = run.log_text().splitlines()
    for col in USER_COLS:
        diverted = len(fields[col]) > 1 or any(q["column_name"] == col for q in quarantine)
        if diverted:
            assert any("gear" in line and col in line for line in log
                       if " warning " in line or " error " in line), \
                (col, fields[col], [q for q in quarantine if q["column_name"] == col])
