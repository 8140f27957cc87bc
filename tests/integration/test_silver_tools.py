"""`floe silver verify` and `floe silver backfill` end to end, on Bronze built by the
real pipeline (`floe run` on a real PostgreSQL):

* verify passes after `floe run` + `floe silver` (Silver == fold(Bronze) and == the
  source), says "source moved on since watermark" when the source changed after the
  watermark, and exits 1 naming the key once a wrong row is appended to Silver with
  PyIceberg;
* backfill seeds Silver from a Parquet export (pyarrow, `SELECT * FROM t` and
  pg_current_wal_lsn() in one REPEATABLE READ transaction); the merges after it bring
  Silver equal to the source (PyIceberg AND DuckDB); an export older than Bronze's
  first commit is refused with the reason and what to do instead.

The helpers are floerun.py, test_silver.py and oracle.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq

from floerun import floe, lsn_int  # noqa: F401
from oracle import check_silver
from test_silver import silver, silver_ident, wait_bronze

SERVICE = "svc"


def tool(run, *args: str, expect_rc: int = 0) -> str:
    """Runs `floe silver <args>`; returns stdout + stderr."""
    proc = subprocess.run([str(run.floe_bin), "silver", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, cwd=run.base, timeout=300)
    out = proc.stdout.decode(errors="replace")
    with open(run.base / "silver.log", "a") as log:
        log.write(f"===== floe silver {' '.join(args)} -> {proc.returncode}\n{out}")
    assert proc.returncode == expect_rc, \
        f"floe silver {' '.join(args)} exited {proc.returncode}:\n{out}"
    return out


def export(pg, table: str, path: Path) -> str:
    """Writes `SELECT * FROM table` to a Parquet file with pyarrow; returns the
    pg_current_wal_lsn() read in the same REPEATABLE READ transaction."""
    with pg.connect() as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        with conn.transaction():
            lsn = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
            cur = conn.execute(f"SELECT * FROM {table}")
            names = [d.name for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall()]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return lsn


def test_verify_passes_then_names_a_corrupted_key(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, "
               "price numeric(10,2), seen timestamptz, ok boolean, ratio float8, "
               "raw bytea)")
    pg.execute("CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b))")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g % 7, g * 1.25, "
               "'2024-01-01 00:00:00+00'::timestamptz + g * interval '1 minute', "
               "g % 2 = 0, g / 3.0, decode(md5(g::text), 'hex') "
               "FROM generate_series(1, 200) g")
    pg.execute("INSERT INTO pairs SELECT g % 10, 'b' || (g / 10), g FROM "
               "generate_series(1, 40) g")
    run = floe(service=SERVICE).start()
    pg.execute("UPDATE items SET qty = qty + 100, name = NULL WHERE id % 5 = 0")
    pg.execute("DELETE FROM items WHERE id % 9 = 0")
    pg.execute("UPDATE pairs SET v = -v WHERE a = 3")
    wait_bronze(run, pg, "public.items", ["id"])
    wait_bronze(run, pg, "public.pairs", ["a", "b"])
    run.stop()
    silver(run)

    out = tool(run, "verify", str(run.config_path))
    assert "public.items (silver.svc.public.items)" in out, out
    assert out.count("Silver vs fold(Bronze <= watermark): OK") == 2, out
    assert out.count("Silver vs source: OK") == 2, out
    assert "verify: 2 consistent, 0 inconsistent" in out, out
    # `floe verify` is the same check
    proc = subprocess.run([str(run.floe_bin), "verify", str(run.config_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verify: 2 consistent, 0 inconsistent" in proc.stdout + proc.stderr

    # The source moves on and Bronze follows, Silver not yet: expected, exit 0.
    pg.execute("UPDATE items SET qty = 0 WHERE id = 1")
    run.start()
    run.wait_until(lambda: run.has_row("public.items", id=1, qty=0), what="update in Bronze")
    run.stop()
    out = tool(run, "verify", str(run.config_path), "--table", "public.items")
    assert "source moved on since watermark" in out, out
    assert "id=1: values differ between Silver and the source" in out, out
    assert "columns with differences: qty" in out, out
    assert "verify: 1 consistent, 0 inconsistent" in out, out
    silver(run)
    out = tool(run, "verify", str(run.config_path), "--table", "public.items")
    assert "Silver vs source: OK" in out, out

    # A wrong row appended behind floe's back: Silver != fold(Bronze), named by key.
    t = run.catalog().load_table(silver_ident("public.items"))
    good = t.scan().to_arrow()
    bogus = good.slice(0, 1).to_pylist()[0]
    bogus.update(id=424242, name="not from Bronze")
    t.append(pa.Table.from_pylist([bogus], schema=good.schema))
    out = tool(run, "verify", str(run.config_path), expect_rc=1)
    assert "Silver vs fold(Bronze <= watermark): DIFFERENT" in out, out
    assert "id=424242: in Silver, not in the fold of Bronze" in out, out
    assert "verify: 1 consistent, 1 inconsistent" in out, out
    # Only the other table: consistent.
    tool(run, "verify", str(run.config_path), "--table", "public.pairs")
    # The source comparison can be skipped; the Bronze one still fails.
    out = tool(run, "verify", str(run.config_path), "--table", "public.items",
               "--no-source", expect_rc=1)
    assert "Silver vs source" not in out, out


def test_backfill_from_an_export(floe, pg, duckdb_con, tmp_path):
    pg.execute("CREATE TABLE orders (id int PRIMARY KEY, customer text, "
               "amount numeric(10,2), placed timestamptz)")
    pg.execute("INSERT INTO orders SELECT g, 'c' || (g % 13), g * 2.5, "
               "'2024-03-01 12:00:00+00'::timestamptz + g * interval '1 hour' "
               "FROM generate_series(1, 300) g")
    # An export taken before floe run ever started: older than Bronze's history.
    early = tmp_path / "early.parquet"
    early_lsn = export(pg, "orders", early)
    pg.execute("UPDATE orders SET customer = 'gone' WHERE id <= 10")
    pg.execute("DELETE FROM orders WHERE id BETWEEN 11 AND 20")

    run = floe(service=SERVICE).start().wait_streaming()
    # Streamed changes before the export: the export's LSN is past Bronze's start.
    pg.execute("UPDATE orders SET amount = amount + 1 WHERE id % 4 = 0")
    pg.execute("DELETE FROM orders WHERE id % 25 = 0")
    pg.execute("INSERT INTO orders SELECT g, 'new', 1, now() FROM generate_series(301, 320) g")
    wait_bronze(run, pg, "public.orders", ["id"])

    # The nightly export, taken while floe run streams.
    nightly = tmp_path / "nightly.parquet"
    nightly_lsn = export(pg, "orders", nightly)
    # Changes after the export, including to rows the export holds.
    pg.execute("UPDATE orders SET customer = 'after' WHERE id % 10 = 1")
    pg.execute("DELETE FROM orders WHERE id % 7 = 0")
    pg.execute("INSERT INTO orders VALUES (1000, 'late', 9.99, now())")
    pg.execute("UPDATE orders SET id = 2000 WHERE id = 302")
    wait_bronze(run, pg, "public.orders", ["id"])
    run.stop()

    cfg = str(run.config_path)
    # Refused: the early export predates Bronze's first commit.
    out = tool(run, "backfill", cfg, "--table", "public.orders", "--parquet", str(early),
               "--lsn", early_lsn, expect_rc=1)
    assert "from an export at LSN" in out and "older than the start of Bronze's " \
        "history of bronze.svc.public.orders" in out, out
    assert "silently miss them" in out, out
    assert "let `floe silver` build Silver from Bronze's own history" in out, out
    assert not run.catalog().table_exists(silver_ident("public.orders"))

    # Bad arguments are refused with their reason.
    out = tool(run, "backfill", cfg, "--table", "public.orders", "--parquet", str(nightly),
               "--lsn", "yesterday", expect_rc=105)  # CLI11's validation error
    assert "--lsn: yesterday is not an LSN" in out, out
    renamed = tmp_path / "renamed.parquet"
    pq.write_table(pq.read_table(nightly).rename_columns(
        ["id", "client", "amount", "placed"]), renamed)
    out = tool(run, "backfill", cfg, "--table", "public.orders", "--parquet", str(renamed),
               "--lsn", nightly_lsn, expect_rc=1)
    assert "missing from the export: customer" in out, out
    assert "not Bronze row columns: client" in out, out

    # Seeded from the nightly export, then merged from Bronze after its LSN.
    out = tool(run, "backfill", cfg, "--table", "public.orders", "--parquet", str(nightly),
               "--lsn", nightly_lsn)
    assert "seeded from" in out, out
    start = out.split("(Bronze starts at ")[1].split(")")[0]
    assert lsn_int(start) < lsn_int(nightly_lsn), out
    t = run.catalog().load_table(silver_ident("public.orders"))
    summary = t.current_snapshot().summary.additional_properties
    assert summary["floe.bronze-commit-lsn"] == str(lsn_int(nightly_lsn))
    assert t.scan().to_arrow().num_rows == len(pq.read_table(nightly))
    # Again: refused, the table exists.
    out = tool(run, "backfill", cfg, "--table", "public.orders", "--parquet", str(nightly),
               "--lsn", nightly_lsn, expect_rc=1)
    assert "already exists; pass --replace" in out, out

    out = silver(run)
    assert "silver.svc.public.orders merged" in out, out
    check_silver(run, pg, duckdb_con, "public.orders", ["id"])
    out = tool(run, "verify", cfg, "--table", "public.orders")
    assert "Silver vs source: OK" in out, out

    # --replace seeds it again; still refused from the early export.
    tool(run, "backfill", cfg, "--table", "public.orders", "--parquet", str(early),
         "--lsn", early_lsn, "--replace", expect_rc=1)
    tool(run, "backfill", cfg, "--table", "public.orders", "--parquet", str(nightly),
         "--lsn", nightly_lsn, "--replace")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.orders", ["id"])


def test_verify_compares_tables_with_dots_in_their_names_with_the_source(floe, pg):
    """Source tables whose names hold dots and quotes, renamed by naming.tables or
    not: `floe.source.table` (schema.table, unquoted) is ambiguous for them, and
    verify read a wrong source name, did not compare, and called the table
    consistent (found by the break-it pass). A source that moved on while floe was
    stopped must make each of them inconsistent."""
    pg.execute('CREATE TABLE "my.tab" (id int PRIMARY KEY, v int)')
    pg.execute('CREATE SCHEMA "Odd Sch"')
    pg.execute('CREATE TABLE "Odd Sch"."We.ird ""Tab""" (id int PRIMARY KEY, v int)')
    pg.execute('CREATE TABLE "Odd Sch"."a.b" (id int PRIMARY KEY, v int)')
    for t in ('"my.tab"', '"Odd Sch"."We.ird ""Tab"""', '"Odd Sch"."a.b"'):
        pg.execute(f"INSERT INTO {t} SELECT g, g FROM generate_series(1, 5) g")
    naming = ("naming:\n  tables:\n"
              "    '\"Odd Sch\".\"We.ird \"\"Tab\"\"\"':\n"
              "      bronze: bronze.svc.odd.weird\n      silver: silver.svc.odd.weird\n"
              "    'public.\"my.tab\"':\n"
              "      bronze: bronze.svc.pub.mytab\n      silver: silver.svc.pub.mytab\n")
    run = floe(service=SERVICE, extra_yaml=naming).start()
    run.wait_streaming()
    run.wait_until(lambda: all(run.catalog().table_exists(i) for i in (
        ("bronze", SERVICE, "odd", "weird"), ("bronze", SERVICE, "pub", "mytab"),
        ("bronze", SERVICE, "Odd Sch", "a.b"))), what="the three Bronze tables")
    run.stop()
    silver(run)
    out = tool(run, "verify", str(run.config_path))
    assert "verify: 3 consistent, 0 inconsistent" in out, out
    assert out.count("Silver vs source: OK") == 3, out
    for t in ('"my.tab"', '"Odd Sch"."We.ird ""Tab"""', '"Odd Sch"."a.b"'):
        pg.execute(f"UPDATE {t} SET v = 999 WHERE id = 1")
    out = tool(run, "verify", str(run.config_path), expect_rc=1)
    assert "not compared" not in out, out
    assert "verify: 0 consistent, 3 inconsistent" in out, out


def test_a_key_the_bucket_transform_cannot_take_is_refused_with_the_fix(floe, pg,
                                                                       duckdb_con):
    """Silver is bucket(N, first key column), and Iceberg's bucket transform takes no
    float, double or boolean. A table keyed on a float8 or a boolean got an
    internal Iceberg error from every `floe silver` pass, and `floe verify` said the
    next pass would build it (break-it finding). Now the pass names the column and
    what to declare instead, `floe verify` fails with the same reason, and a declared
    key whose first column is bucketable builds the table."""
    pg.execute("CREATE TABLE fkey (id float8 PRIMARY KEY, code int NOT NULL UNIQUE);"
               "ALTER TABLE fkey REPLICA IDENTITY FULL;"
               "INSERT INTO fkey SELECT g + 0.5, g FROM generate_series(1, 20) g;"
               "CREATE TABLE bkey (flag boolean PRIMARY KEY, v int);"
               "INSERT INTO bkey VALUES (true, 1), (false, 2)")
    run = floe(service=SERVICE).start()
    wait_bronze(run, pg, "public.fkey", ["id"])
    wait_bronze(run, pg, "public.bkey", ["flag"])
    run.stop()
    out = silver(run, expect_rc=1)
    for table, column, kind in (("fkey", "id", "double"), ("bkey", "flag", "boolean")):
        assert (f"merge key column `{column}` of bronze.svc.public.{table} is a {kind}: "
                "Silver buckets its rows by the first key column") in out, out
        assert not run.catalog().table_exists(silver_ident(f"public.{table}"))
    out = tool(run, "verify", str(run.config_path), "--table", "public.fkey", expect_rc=2)
    assert "Iceberg's bucket transform does not take float, double or boolean" in out, out
    assert "next `floe silver` pass builds it" not in out, out
    # The fix the message gives: a key whose first column the transform takes.
    run.config_path.write_text(run.config_path.read_text() +
                               "silver:\n  keys:\n    public.fkey: [code]\n")
    run.start().wait_streaming()
    run.wait_until(lambda: "floe.source.recopy-pending" not in run.catalog().load_table(
        ("bronze", SERVICE, "public", "fkey")).properties, what="the copy of fkey")
    run.stop()
    out = silver(run, expect_rc=1)  # bkey still fails
    assert run.catalog().table_exists(silver_ident("public.fkey")), out
    check_silver(run, pg, duckdb_con, "public.fkey", ["code"])  # PyIceberg, DuckDB vs psql
    out = tool(run, "verify", str(run.config_path), "--table", "public.fkey")
    assert "Silver vs source: OK" in out, out


def test_a_key_column_whose_name_bronze_holds_otherwise_is_verified(floe, pg):
    """A primary-key column named "a.b" lands in Bronze's field `a_b` (and a real
    column `a_b` in `a_b__string`): Silver merged it, but `floe verify` looked for
    the key by its source name among Bronze's fields and could never verify the
    table (break-it finding). Verify maps the key through the column bindings."""
    pg.execute('CREATE TABLE dotted ("a.b" int PRIMARY KEY, a_b text, v int);'
               "INSERT INTO dotted SELECT g, 'x' || g, g FROM generate_series(1, 30) g")
    run = floe(service=SERVICE).start()
    pg.execute('UPDATE dotted SET v = -v WHERE "a.b" <= 5')
    pg.execute('DELETE FROM dotted WHERE "a.b" = 30')
    run.wait_until(lambda: run.has_row("public.dotted", v=-5), what="the update in Bronze")
    run.stop()
    silver(run)
    out = tool(run, "verify", str(run.config_path), "--table", "public.dotted")
    assert "Silver vs fold(Bronze <= watermark): OK" in out, out
    assert "Silver vs source: OK" in out, out


def test_backfill_of_a_table_with_a_column_named_like_floes_row_numbers(
        floe, pg, duckdb_con, tmp_path):
    # floe numbers the export's rows in a column of its own while it holds them; a
    # source column of that name must keep its values (it came out null) and a
    # duplicate key must still be found (the check read the wrong column).
    pg.execute('CREATE TABLE t (id int PRIMARY KEY, "__floe_export_row" bigint, '
               '"__floe_export_row_" text)')
    pg.execute("INSERT INTO t SELECT g, g * 7, 'v' || g FROM generate_series(1, 500) g")
    run = floe(service=SERVICE).start().wait_streaming()
    wait_bronze(run, pg, "public.t", ["id"])
    exported = tmp_path / "t.parquet"
    lsn = export(pg, "t", exported)
    pg.execute('UPDATE t SET "__floe_export_row" = -1 WHERE id % 9 = 0')
    wait_bronze(run, pg, "public.t", ["id"])
    run.stop()
    cfg = str(run.config_path)

    doubled = tmp_path / "doubled.parquet"
    rows = pq.read_table(exported)
    pq.write_table(pa.concat_tables([rows, rows.slice(17, 1)]), doubled)
    out = tool(run, "backfill", cfg, "--table", "public.t", "--parquet", str(doubled),
               "--lsn", lsn, expect_rc=1)
    assert "the export holds rows 18 and 501 with the same key" in out, out

    tool(run, "backfill", cfg, "--table", "public.t", "--parquet", str(exported),
         "--lsn", lsn)
    silver(run)
    check_silver(run, pg, duckdb_con, "public.t", ["id"])
