"""Several catalogs in one pipeline (issue 17, item 3; docs/configuration.md, "Several
catalogs"): `catalogs:` names a second catalog, an Iceberg REST catalog (restserver.py)
whose files live in their own bucket on a moto S3 server, beside the main SQLite
catalog on a local warehouse; `routes:` sends the `hr` schema there, except one table
a narrower rule keeps in the main catalog.

* each table is in the catalog its route names and in no other: the main SQLite
  catalog read alone by PyIceberg does not know the routed tables, the REST catalog
  read alone does not know the others, and no file of a routed table is on local
  disk (nor a file of another table in the bucket);
* `floe run`, `floe silver`, `floe silver verify` and `floe status` work across both;
  Bronze and Silver of every table equal the source, read through each catalog on its
  own (PyIceberg) and by DuckDB;
* the second catalog's token and the S3 secret are in no log, output, `validate
  --print`, catalog file or metadata object;
* the crash test of test_run_crash.py (22 SIGKILLs under a mixed workload whose
  transactions span tables of both catalogs; audit trigger): zero missing, zero
  duplicated; and kills placed right after one table's commit (a failpoint), so one
  catalog holds a checkpoint the other may not: the same."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from floerun import floe, fold  # noqa: F401
from oracle import check_silver, source_rows
from restserver import RestCatalogServer
from s3server import SECRET_KEY, S3Server
from test_maintenance import maint
from test_silver import silver, wait_bronze

BUCKET = "pii"
WAREHOUSE = f"s3://{BUCKET}/lake"
TOKEN = "pii-catalog-token-never-logged-93d2"


@pytest.fixture
def s3(tmp_path):
    server = S3Server(tmp_path)
    server.make_bucket(BUCKET)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def rest(tmp_path, s3):
    server = RestCatalogServer(tmp_path / "rest", s3, WAREHOUSE, token=TOKEN)
    try:
        yield server
    finally:
        server.stop()


class RoutedCatalog:
    """The test's readers' view of a routed pipeline: each table loaded from the catalog
    `routed(identifier)` says holds it (PyIceberg catalogs, each opened on its own)."""

    def __init__(self, main, other, routed):
        self.main, self.other, self.routed = main, other, routed

    def _of(self, ident):
        return self.other if self.routed(tuple(ident)) else self.main

    def load_table(self, ident):
        return self._of(ident).load_table(ident)

    def table_exists(self, ident) -> bool:
        return self._of(ident).table_exists(ident)


def main_catalog(base: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("floe", uri=f"sqlite:///{base}/main-catalog.db",
                      warehouse=f"file://{base}/main-wh")


def routed_pipeline(tmp_path, s3, rest, routes: str, routed) -> dict:
    """floe(**...) arguments: the main catalog (SQLite, local warehouse) and `pii` (the
    REST catalog on s3://pii), with `routes`; `routed(identifier)` says which tables
    the test's readers find in `pii`."""
    base = tmp_path / "main"
    base.mkdir()
    return dict(
        warehouse_uri=f"file://{base}/main-wh",
        catalog_yaml=f"catalog:\n  path: {base}/main-catalog.db\n",
        catalog_factory=lambda: RoutedCatalog(main_catalog(base), rest.pyiceberg_catalog(),
                                              routed),
        extra_yaml=(s3.floe_yaml()
                    + "catalogs:\n  pii:\n    catalog:\n      type: rest\n"
                    f"      uri: {rest.uri}\n      token: {TOKEN}\n"
                    f"    warehouse: {WAREHOUSE}\n"
                    + routes))


def cli(run, *args: str, expect_rc: int = 0, stderr=subprocess.STDOUT) -> str:
    proc = subprocess.run([str(run.floe_bin), *args], stdout=subprocess.PIPE,
                          stderr=stderr, cwd=run.base, timeout=300)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == expect_rc, f"floe {' '.join(args)} exited " \
        f"{proc.returncode}:\n{out}"
    return out


TABLES = {"hr.salaries": ["id"], "hr.public_directory": ["id"],
          "public.orders": ["id", "line"]}


def test_two_schemas_in_two_catalogs_each_read_on_its_own(floe, pg, duckdb_con, s3, rest,
                                                         tmp_path):
    con = duckdb_con
    s3.duckdb_secret(con)
    pg.execute("CREATE SCHEMA hr")
    pg.execute("CREATE TABLE hr.salaries (id int PRIMARY KEY, name text, "
               "amount numeric(12,2), note text)")
    pg.execute("ALTER TABLE hr.salaries ALTER COLUMN note SET STORAGE EXTERNAL")
    pg.execute("CREATE TABLE hr.public_directory (id int PRIMARY KEY, name text)")
    pg.execute("CREATE TABLE public.orders (id int, line int, qty int, "
               "PRIMARY KEY (id, line))")
    pg.execute("INSERT INTO hr.salaries SELECT g, 'emp ' || g, g * 100.5, "
               "repeat(md5(g::text), 200) FROM generate_series(1, 200) g")
    pg.execute("INSERT INTO hr.public_directory SELECT g, 'emp ' || g "
               "FROM generate_series(1, 50) g")
    pg.execute("INSERT INTO public.orders SELECT g / 3, g % 3, g FROM "
               "generate_series(1, 300) g")
    routes = ("routes:\n"
              "  - tables: [hr.public_directory]\n    catalog: main\n"
              "  - tables: [\"hr.*\", \"legacy.*\"]\n    catalog: pii\n")

    def routed(ident) -> bool:
        return ident[2:] == ("hr", "salaries")

    run = floe(**routed_pipeline(tmp_path, s3, rest, routes, routed)).start()
    run.wait_streaming()
    # Transactions across both catalogs, a TOAST value left unchanged, a key change.
    with pg.connect(autocommit=False) as conn:
        conn.execute("UPDATE hr.salaries SET amount = amount + 1 WHERE id % 5 = 0")
        conn.execute("UPDATE public.orders SET qty = -qty WHERE id % 7 = 0")
        conn.execute("DELETE FROM hr.public_directory WHERE id > 45")
        conn.commit()
    with pg.connect(autocommit=False) as conn:
        conn.execute("UPDATE hr.salaries SET id = id + 1000 WHERE id <= 3")
        conn.execute("DELETE FROM hr.salaries WHERE id BETWEEN 10 AND 20")
        conn.execute("INSERT INTO public.orders VALUES (500, 0, 1), (500, 1, 2)")
        conn.execute("SELECT pg_logical_emit_message(true, 'audit', 'who did what')")
        conn.commit()
    for table, key in TABLES.items():
        wait_bronze(run, pg, table, key)
    run.wait_until(lambda: run.exists("pg_logical_messages"), 60,
                   what="the audit table")
    # A pattern no published table matches is said (a likely typo).
    assert "routes: `legacy.*` (to catalog pii) matches no table" in run.log_text()
    assert "`hr.*`" not in run.log_text()
    run.stop()

    # Each catalog on its own: the routed table in pii only, the others in main only.
    main, pii = main_catalog(tmp_path / "main"), rest.pyiceberg_catalog()
    for table in TABLES:
        ident = ("bronze", "svc", *table.split("."))
        in_pii = routed(ident)
        assert pii.table_exists(ident) == in_pii, table
        assert main.table_exists(ident) == (not in_pii), table
    # floe's own tables and state stay in the main catalog.
    assert main.table_exists(("bronze", "svc", "pg_logical_messages"))
    assert "floe.confirmed-lsn" in main.load_namespace_properties(("bronze", "svc"))
    if ("bronze", "svc") in pii.list_namespaces(("bronze",)):
        assert "floe.confirmed-lsn" not in pii.load_namespace_properties(("bronze", "svc"))
    assert not pii.table_exists(("bronze", "svc", "pg_logical_messages"))
    # Files: the routed table's in the bucket only, the others' on local disk only.
    local = [str(p) for p in (tmp_path / "main" / "main-wh").rglob("*") if p.is_file()]
    assert not [p for p in local if "salaries" in p], local[:5]
    assert [p for p in local if "orders" in p] and [p for p in local if "directory" in p]
    keys = list(s3.keys(BUCKET))
    assert keys and all(k.startswith("lake/") for k in keys), keys[:5]
    assert not [k for k in keys if "orders" in k or "directory" in k], keys[:5]
    assert [k for k in keys if "salaries" in k]

    out = silver(run)
    out += silver(run)  # a second pass merges nothing new
    for table, key in TABLES.items():
        check_silver(run, pg, con, table, key)
    silver_ident = ("silver", "svc", "hr", "salaries")
    assert pii.table_exists(silver_ident) and not main.table_exists(silver_ident)
    assert main.table_exists(("silver", "svc", "public", "orders"))
    assert not pii.table_exists(("silver", "svc", "public", "orders"))

    # Maintenance across both catalogs: expiry deletes in the bucket and on disk, and
    # every table still reads equal to the source.
    local_before = {p for p in (tmp_path / "main" / "main-wh").rglob("*") if p.is_file()}
    for command in (["compact"], ["expire", "--older-than", "0s", "--retain-last", "1"],
                    ["remove-orphans"]):
        done = maint(run, *command)
        assert "0 failed" in done, done
        out += done
    local_after = {p for p in (tmp_path / "main" / "main-wh").rglob("*") if p.is_file()}
    assert local_before - local_after, "expire deleted nothing on disk"
    assert set(keys) - set(s3.keys(BUCKET)), "expire deleted nothing in the bucket"
    for table, key in TABLES.items():
        check_silver(run, pg, con, table, key)

    verified = cli(run, "silver", "verify", str(run.config_path))
    assert verified.count("Silver vs source: OK") == 3, verified
    out += verified
    status = cli(run, "status", str(run.config_path), "--json", stderr=subprocess.DEVNULL)
    doc = json.loads(status)
    assert sorted(t["source_table"] for t in doc["tables"]) == sorted(TABLES), doc
    for t in doc["tables"]:
        assert t["error"] is None and t["silver"]["exists"] is True, t
        assert t["catalog"] == ("pii" if t["source_table"] == "hr.salaries" else "main"), t
    printed = cli(run, "validate", "--print", str(run.config_path))
    assert "pii:" in printed and "routes:" in printed, printed

    # Secrets: nowhere floe writes.
    texts = [out, status, printed, run.log_text(), (run.base / "silver.log").read_text()]
    texts += [p.read_bytes().decode(errors="replace")
              for p in (tmp_path / "main").rglob("*") if p.is_file()]
    client = s3.client()
    texts += [client.get_object(Bucket=BUCKET, Key=k)["Body"].read().decode(
        errors="replace") for k in s3.keys(BUCKET) if k.endswith((".json", ".avro"))]
    for text in texts:
        assert TOKEN not in text and SECRET_KEY not in text


def test_crash_test_across_two_catalogs(floe, pg, duckdb_con, s3, rest, tmp_path):
    """test_run_crash.py's crash test with two of its three tables (the composite key
    and the TOAST one) routed to the REST catalog on S3 and one in the main SQLite
    catalog: its transactions span both catalogs, and 22 SIGKILLs land anywhere,
    between one catalog's commit and the other's included. Bronze checked against an
    audit trigger: zero missing, zero duplicated."""
    from test_run_crash import crash_test

    s3.duckdb_secret(duckdb_con)
    routes = "routes:\n  - tables: [public.lines, public.docs]\n    catalog: pii\n"

    def routed(ident) -> bool:
        return ident[2:] in (("public", "lines"), ("public", "docs"))

    crash_test(floe, pg, duckdb_con, kills_wanted=22,
               **routed_pipeline(tmp_path, s3, rest, routes, routed))
    main = main_catalog(tmp_path / "main")
    assert main.table_exists(("bronze", "svc", "public", "accounts"))
    assert not main.table_exists(("bronze", "svc", "public", "lines"))
    assert rest.pyiceberg_catalog().table_exists(("bronze", "svc", "public", "docs"))


def test_kills_after_one_catalogs_commit_lose_and_repeat_nothing(
        floe, pg, duckdb_con, s3, rest, tmp_path):
    """A checkpoint commits each table in its own catalog: floe SIGKILLs itself right
    after one table's commit (the failpoint checkpoint.after-table-commit, at its
    2nd, 3rd, 5th and 7th hit of a start), with the crash test's tables split between
    the main SQLite catalog and the REST catalog on S3 and its transactions spanning
    both, so one catalog holds a checkpoint the other may not. floe confirms a
    position only once every catalog committed it: after each restart Bronze equals
    the audit trail, zero missing, zero duplicated."""
    from test_failpoints import kills_at, start_copied

    s3.duckdb_secret(duckdb_con)
    routes = "routes:\n  - tables: [public.lines, public.docs]\n    catalog: pii\n"

    def routed(ident) -> bool:
        return ident[2:] in (("public", "lines"), ("public", "docs"))

    run = start_copied(floe, pg, **routed_pipeline(tmp_path, s3, rest, routes, routed))
    point = "checkpoint.after-table-commit"
    kills_at(run, pg, duckdb_con, [(point, hit) for hit in (2, 3, 5, 7)], seed=23)


def test_a_route_that_moves_a_table_away_and_back_copies_it_again(
        floe, pg, duckdb_con, s3, rest, tmp_path):
    """`hr.salaries` is routed to pii (under its own Bronze namespace), then, by a
    changed route, to main (a new Bronze table there, copied whole), then back to pii,
    whose Bronze table missed the changes made meanwhile: it is copied again there
    (not appended to as if nothing happened), Bronze's fold and Silver equal the
    source, and the Bronze table left in main is neither listed by `floe status` nor
    merged into Silver."""
    con = duckdb_con
    s3.duckdb_secret(con)
    pg.execute("CREATE SCHEMA hr")
    pg.execute("CREATE TABLE hr.salaries (id int PRIMARY KEY, amount int)")
    pg.execute("INSERT INTO hr.salaries SELECT g, g FROM generate_series(1, 100) g")
    to_pii = ("routes:\n  - tables: [\"hr.*\"]\n    catalog: pii\n"
              "    bronze_namespace: bronze_pii\n")
    elsewhere = ("routes:\n  - tables: [\"nosuch.*\"]\n    catalog: pii\n"
                 "    bronze_namespace: bronze_pii\n")
    routed = {"pii": True}

    def in_pii(ident) -> bool:
        return routed["pii"] and ident[2:] == ("hr", "salaries")

    args = routed_pipeline(tmp_path, s3, rest, to_pii, in_pii)
    run = floe(**args)
    config = run.config_path.read_text()

    def changes(first: int) -> None:
        pg.execute(f"UPDATE hr.salaries SET amount = amount + {first} WHERE id % 3 = 0")
        pg.execute(f"DELETE FROM hr.salaries WHERE id BETWEEN {first} AND {first + 4}")
        pg.execute(f"INSERT INTO hr.salaries VALUES ({1000 + first}, 1)")

    run.start().wait_streaming()
    changes(10)
    run.wait_until(lambda: run.catalog().table_exists(
        ("bronze_pii", "svc", "hr", "salaries")), 60, what="the pii Bronze table")
    run._catalog = None
    run.stop()

    # Routed elsewhere: main gets a Bronze table of its own, copied whole.
    run.config_path.write_text(config.replace(to_pii, elsewhere))
    routed["pii"] = False
    run._catalog = None
    run.start().wait_streaming()
    changes(30)
    wait_bronze(run, pg, "hr.salaries", ["id"])
    run.stop()

    # Back to pii: its Bronze table missed changes(30), so it is copied again.
    run.config_path.write_text(config)
    routed["pii"] = True
    run._catalog = None
    run.start().wait_streaming()
    changes(50)
    pii = rest.pyiceberg_catalog()

    def pii_bronze_caught_up() -> bool:
        rows = pii.load_table(("bronze_pii", "svc", "hr", "salaries")).scan().to_arrow()
        state = fold(rows.to_pylist(), ["id"])
        want = {(r["id"],): r for r in source_rows(pg, "hr.salaries")}
        return {k: {c: v[c] for c in ("id", "amount")} for k, v in state.items()} == want
    run.wait_until(pii_bronze_caught_up, 90, what="pii's Bronze to fold to the source")
    run.stop()
    assert "routed back to pii" in run.log_text()

    status = json.loads(cli(run, "status", str(run.config_path), "--json",
                            stderr=subprocess.DEVNULL))
    assert [t["source_table"] for t in status["tables"]] == ["hr.salaries"], status
    out = silver(run)
    assert "bronze.svc.hr.salaries" not in out, out
    check_silver(run, pg, con, "hr.salaries", ["id"])
    # The table main was given meanwhile is still there (floe moves nothing).
    assert main_catalog(tmp_path / "main").table_exists(("bronze", "svc", "hr", "salaries"))
