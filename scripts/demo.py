"""floe demo: a throwaway PostgreSQL, a small shop schema, a live workload, and
`floe run --duration 30s` landing it in Iceberg under build/demo/; then what landed,
read through DuckDB; then `floe silver` (the Silver replicas, shown beside the source
tables) and `floe verify`'s verdict. Run by scripts/demo (make demo). The Postgres is
removed on exit, Ctrl-C included; the warehouse stays for you to explore.

FLOE_DEMO_S3=1 puts the warehouse on a local S3 server (moto, from the virtualenv)
instead of build/demo/warehouse; the S3 server is stopped on exit too.
FLOE_DEMO_REST=1 does that and keeps the tables in Apache Iceberg's own REST catalog
server (assembled by scripts/bootstrap) instead of the SQLite catalog.
FLOE_DEMO_DIR puts what build/demo/ holds elsewhere (tests/integration/test_demo.py)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))

import psycopg  # noqa: E402

from pgcluster import PgCluster  # noqa: E402

DEMO = Path(os.environ.get("FLOE_DEMO_DIR", REPO / "build" / "demo")).resolve()
WAREHOUSE = DEMO / "warehouse"
SERVICE = "shop"
DURATION = int(os.environ.get("FLOE_DEMO_SECONDS", "30"))
ON_REST = os.environ.get("FLOE_DEMO_REST", "0") == "1"
ON_S3 = ON_REST or os.environ.get("FLOE_DEMO_S3", "0") == "1"
CATALOG_DB = DEMO / "catalog.db" if ON_S3 else WAREHOUSE / "catalog.db"
S3 = None  # the local S3 server (s3server.S3Server) when ON_S3
REST = None  # the REST catalog server (restserver.RestCatalogServer) when ON_REST

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text,
                        tier text DEFAULT 'standard');
CREATE TABLE orders (id bigserial PRIMARY KEY,
                     customer_id int NOT NULL REFERENCES customers,
                     amount numeric(10,2) NOT NULL, status text NOT NULL,
                     created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO customers (id, name, email)
  SELECT g, 'customer ' || g, 'c' || g || '@example.com' FROM generate_series(1, 20) g;
INSERT INTO orders (customer_id, amount, status)
  SELECT 1 + g % 20, (g * 7.25)::numeric(10,2), 'new' FROM generate_series(1, 50) g;
"""

AUDIT = ("SELECT pg_logical_emit_message(true, 'audit', json_build_object("
         "'user', %s::text, 'table', %s::text, 'action', %s::text)::text)")


def shown(path: Path) -> Path:
    """`path` relative to the repository when it is in it."""
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def say(msg: str = "") -> None:
    print(msg, flush=True)


def step(msg: str) -> None:
    say(f"\n\033[1m== {msg}\033[0m")


class Interrupted(Exception):
    pass


def on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def workload(dsn: str, seconds: float) -> dict[str, int]:
    """Inserts, updates and deletes on orders and customers, an ADD COLUMN half-way,
    and audited writes (pg_logical_emit_message in the same transaction)."""
    rng = random.Random(42)
    counts = {"insert": 0, "update": 0, "delete": 0, "audited": 0}
    users = ["alice", "bob", "carol"]
    start = time.monotonic()
    added_column = False
    last_report = start
    with psycopg.connect(dsn, autocommit=False) as conn:
        while (now := time.monotonic()) - start < seconds:
            elapsed = now - start
            if not added_column and elapsed > seconds / 2:
                conn.execute("ALTER TABLE customers ADD COLUMN country text")
                conn.execute("UPDATE customers SET country = 'NL' WHERE id <= 5")
                conn.commit()
                added_column = True
                counts["update"] += 5
                say(f"  [{elapsed:4.1f}s] ALTER TABLE customers ADD COLUMN country text "
                    f"(and set it for 5 customers)")
                continue
            action = rng.choices(["insert", "update", "delete", "audited", "customer"],
                                 [5, 4, 1, 2, 1])[0]
            if action == "insert":
                conn.execute("INSERT INTO orders (customer_id, amount, status) "
                             "VALUES (%s, %s, 'new')",
                             (rng.randint(1, 20), round(rng.uniform(5, 500), 2)))
                counts["insert"] += 1
            elif action == "update":
                cur = conn.execute("UPDATE orders SET status = %s WHERE id = "
                                   "(SELECT id FROM orders ORDER BY random() LIMIT 1)",
                                   (rng.choice(["paid", "shipped", "returned"]),))
                counts["update"] += cur.rowcount
            elif action == "delete":
                cur = conn.execute("DELETE FROM orders WHERE id = (SELECT id FROM orders "
                                   "WHERE status = 'returned' LIMIT 1)")
                counts["delete"] += cur.rowcount
            elif action == "audited":
                user = rng.choice(users)
                conn.execute(AUDIT, (user, "public.orders", "refund"))
                cur = conn.execute("UPDATE orders SET status = 'refunded', amount = 0 "
                                   "WHERE id = (SELECT id FROM orders WHERE status = 'paid' "
                                   "ORDER BY random() LIMIT 1) RETURNING id")
                row = cur.fetchone()
                counts["audited"] += 1
                if row and counts["audited"] <= 5:
                    say(f"  [{elapsed:4.1f}s] audited: {user} refunded order {row[0]}")
            else:
                if added_column:
                    conn.execute("UPDATE customers SET tier = 'gold', country = %s "
                                 "WHERE id = %s", (rng.choice(["DE", "FR", "US"]),
                                                   rng.randint(1, 20)))
                else:
                    conn.execute("UPDATE customers SET tier = 'gold' WHERE id = %s",
                                 (rng.randint(1, 20),))
                counts["update"] += 1
            conn.commit()
            if now - last_report >= 5:
                last_report = now
                say(f"  [{elapsed:4.1f}s] so far: " +
                    ", ".join(f"{v} {k}" for k, v in counts.items()))
            time.sleep(rng.uniform(0.01, 0.08))
    return counts


def warehouse_uri() -> str:
    return "s3://demo/warehouse" if ON_S3 else f"file://{WAREHOUSE}"


def open_catalog():
    from pyiceberg.catalog.sql import SqlCatalog

    if REST is not None:
        return REST.pyiceberg_catalog()
    return SqlCatalog("floe", uri=f"sqlite:///{CATALOG_DB}", warehouse=warehouse_uri(),
                      **(S3.pyiceberg_props() if ON_S3 else {}))


def duckdb_connection():
    import duckdb
    import duckdb_ext

    ext_dir = Path(list(duckdb_ext.__path__)[0]) / "extensions"
    con = duckdb.connect(config={"extension_directory": str(ext_dir),
                                 "autoinstall_known_extensions": False,
                                 "autoload_known_extensions": True})
    con.execute("LOAD iceberg")
    con.execute("SET TimeZone = 'UTC'")
    if ON_S3:
        S3.duckdb_secret(con)
    return con


def bronze_tables(catalog) -> dict[str, str]:
    """'bronze.shop.public.orders' -> its current metadata file."""
    out = {}

    def walk(ns):
        for ident in catalog.list_tables(ns):
            table = catalog.load_table(ident)
            out[".".join(ident)] = table.metadata_location.removeprefix("file://")
        for child in catalog.list_namespaces(ns):
            walk(child)

    try:
        walk(("bronze",))
    except Exception as e:  # no bronze namespace yet
        say(f"  (no Bronze tables: {e})")
    return out


def quote(path: str) -> str:
    return "'" + path.replace("'", "''") + "'"


def show_results(floe_log: Path):
    """What landed in Bronze; (tables, orders' metadata) or None."""
    if REST is None and not CATALOG_DB.exists():
        say(f"  floe wrote no catalog ({CATALOG_DB}): see {floe_log}")
        return None
    catalog = open_catalog()
    tables = bronze_tables(catalog)
    con = duckdb_connection()

    step("What landed: rows per Bronze table (DuckDB iceberg_scan)")
    parts = []
    for name, meta in sorted(tables.items()):
        cols = {r[0] for r in con.execute(
            f"DESCRIBE SELECT * FROM iceberg_scan({quote(meta)})").fetchall()}
        if "cdc_op" in cols:
            parts.append(
                f"SELECT {quote(name)} AS bronze_table, count(*) AS total_rows, "
                f"count(*) FILTER (WHERE cdc_op = 'r') AS snapshot_r, "
                f"count(*) FILTER (WHERE cdc_op = 'c') AS inserts_c, "
                f"count(*) FILTER (WHERE cdc_op = 'u') AS updates_u, "
                f"count(*) FILTER (WHERE cdc_op = 'd') AS deletes_d "
                f"FROM iceberg_scan({quote(meta)})")
        else:
            parts.append(f"SELECT {quote(name)} AS bronze_table, count(*) AS total_rows, "
                         f"NULL::BIGINT AS snapshot_r, NULL::BIGINT AS inserts_c, "
                         f"NULL::BIGINT AS updates_u, NULL::BIGINT AS deletes_d "
                         f"FROM iceberg_scan({quote(meta)})")
    if not parts:
        say("  (no Bronze tables: see the floe log)")
        return None
    con.sql(" UNION ALL ".join(parts) + " ORDER BY 1").show(max_width=200)

    orders = tables.get(f"bronze.{SERVICE}.public.orders")
    customers = tables.get(f"bronze.{SERVICE}.public.customers")
    messages = tables.get(f"bronze.{SERVICE}.pg_logical_messages")
    if orders:
        step("The latest 10 changes of public.orders")
        con.sql(f"""
            SELECT cdc_op, id, customer_id, amount, status,
                   strftime(cdc_ts, '%H:%M:%S.%f') AS cdc_ts, cdc_commit_lsn, cdc_seq
            FROM iceberg_scan({quote(orders)})
            ORDER BY cdc_commit_lsn DESC, cdc_seq DESC LIMIT 10""").show(max_width=200)
    if customers:
        step("public.customers: the first and the latest changes around ADD COLUMN country "
             "(older rows read NULL)")
        con.sql(f"""
            WITH c AS (SELECT cdc_op, id, name, tier, country, cdc_commit_lsn, cdc_seq
                       FROM iceberg_scan({quote(customers)}))
            SELECT * EXCLUDE (cdc_seq) FROM (
              (SELECT * FROM c ORDER BY cdc_commit_lsn, cdc_seq LIMIT 4)
              UNION ALL
              (SELECT * FROM c ORDER BY cdc_commit_lsn DESC, cdc_seq DESC LIMIT 4))
            ORDER BY cdc_commit_lsn, cdc_seq""").show(max_width=200)
    if orders and messages:
        step("The audit join: who made each audited change (joined on cdc_source_tx_id)")
        say("  SELECT o.*, a.content->>'user' FROM orders o JOIN pg_logical_messages a\n"
            "    ON o.cdc_source_tx_id = a.cdc_source_tx_id  -- both filtered by cdc_ts")
        con.sql(f"""
            SELECT o.cdc_op, o.id AS order_id, o.status, o.amount,
                   json_extract_string(a.content, '$.user') AS acting_user,
                   json_extract_string(a.content, '$.action') AS action,
                   o.cdc_source_tx_id AS tx_id
            FROM iceberg_scan({quote(orders)}) AS o
            JOIN iceberg_scan({quote(messages)}) AS a
              ON o.cdc_source_tx_id = a.cdc_source_tx_id
            WHERE a.prefix = 'audit'
              AND o.cdc_ts >= now() - INTERVAL 30 DAY
              AND a.cdc_ts >= now() - INTERVAL 30 DAY
            ORDER BY o.cdc_commit_lsn, o.cdc_seq""").show(max_rows=15, max_width=200)
    return tables, orders


def show_silver(floe_bin: Path, config: Path, dsn: str) -> bool:
    """`floe silver` once, each Silver table beside its source table, and `floe
    verify`'s verdict; False if either command failed."""
    step(f"floe silver {shown(config)}: MERGE Bronze into the Silver replicas")
    proc = subprocess.run([str(floe_bin), "silver", str(config)], capture_output=True,
                          text=True, timeout=600)
    for line in (proc.stdout + proc.stderr).splitlines()[-4:]:
        say("    " + line[:160])
    if proc.returncode != 0:
        say(f"  floe silver exited with code {proc.returncode}")
        return False
    catalog = open_catalog()
    con = duckdb_connection()
    step("Silver beside the source (rows, key sum, amount sum, newest order; psql vs DuckDB)")
    with psycopg.connect(dsn) as conn:
        for table, cols in (("customers", "count(*), sum(id), NULL::numeric, NULL::bigint"),
                            ("orders", "count(*), sum(id), sum(amount), max(id)")):
            src = conn.execute(f"SELECT {cols} FROM {table}").fetchone()
            meta = catalog.load_table(("silver", SERVICE, "public", table)).metadata_location
            sil = con.execute(f"SELECT {cols} FROM iceberg_scan({quote(meta)})").fetchone()
            same = "same" if tuple(map(str, src)) == tuple(map(str, sil)) else "DIFFERENT"
            say(f"  {table:10} source {tuple(map(str, src))}  silver {tuple(map(str, sil))}"
                f"  -> {same}")
    meta = catalog.load_table(("silver", SERVICE, "public", "orders")).metadata_location
    con.sql(f"SELECT * FROM iceberg_scan({quote(meta)}) ORDER BY id DESC LIMIT 5"
            ).show(max_width=200)
    step(f"floe verify {shown(config)}: Silver against fold(Bronze) and the source")
    proc = subprocess.run([str(floe_bin), "verify", str(config)], capture_output=True,
                          text=True, timeout=600)
    for line in proc.stdout.splitlines():
        say("  " + line[:160])
    say(f"  verdict: {'consistent' if proc.returncode == 0 else 'NOT consistent'} "
        f"(exit code {proc.returncode})")
    return proc.returncode == 0


def explore(tables: dict[str, str], orders: str | None, floe_log: Path) -> None:
    step("Explore it yourself")
    some = orders or next(iter(tables.values()))
    if ON_S3:
        say(f"""  The warehouse was {warehouse_uri()} on a local S3 server that keeps objects in
  memory: it is stopped on exit, and its tables with it. Run `make demo` without
  FLOE_DEMO_S3=1 to keep a warehouse to explore (build/demo/warehouse).
  floe log:   {floe_log}""")
        return
    say(f"""  warehouse:  {warehouse_uri()}
  catalog:    {CATALOG_DB} (Iceberg SQL catalog, name "floe")
  floe log:   {floe_log}

  # PyIceberg (.venv/bin/python)
  from pyiceberg.catalog.sql import SqlCatalog
  cat = SqlCatalog("floe", uri="sqlite:///{CATALOG_DB}",
                   warehouse="{warehouse_uri()}")
  print(cat.list_tables("bronze.{SERVICE}.public"))
  cat.load_table("bronze.{SERVICE}.public.orders").scan().to_arrow()
  cat.load_table("silver.{SERVICE}.public.orders").scan().to_arrow()

  -- DuckDB (INSTALL iceberg; LOAD iceberg;) on a table's current metadata file:
  SELECT * FROM iceberg_scan('{some}')
  ORDER BY cdc_commit_lsn, cdc_seq;""")


def main() -> int:
    floe_bin = Path(os.environ.get("FLOE_BIN",
                                   REPO / "build" / "release" / "src" / "floe" / "cli" / "floe"))
    if not floe_bin.exists():
        say(f"floe is not built ({floe_bin}); run `make build` or `make demo`")
        return 1
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    global S3, REST
    DEMO.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(WAREHOUSE, ignore_errors=True)
    CATALOG_DB.unlink(missing_ok=True)
    WAREHOUSE.mkdir()
    config = DEMO / "pipeline.yaml"
    floe_log = DEMO / "floe.log"
    cluster = PgCluster()
    floe = None
    try:
        if ON_S3:
            from s3server import S3Server

            step("Starting a local S3 server (moto)")
            S3 = S3Server(DEMO)
            S3.make_bucket("demo")
            say(f"  {S3.endpoint}, bucket demo; the warehouse is {warehouse_uri()}")
        if ON_REST:
            from restserver import RestCatalogServer

            step("Starting Apache Iceberg's REST catalog server")
            REST = RestCatalogServer(DEMO / "rest", S3, warehouse_uri())
            say(f"  {REST.uri} (its tables in {REST.db_path}, its files on S3)")
        step("Starting a throwaway PostgreSQL 15")
        cluster.start()
        say(f"  port {cluster.port}, data in {cluster.data_dir} (removed on exit)")
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE shop")
        dsn = cluster.dsn("shop")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(SCHEMA)
        say("  database shop: customers (20 rows), orders (50 rows)")

        config.write_text(f"""\
# The demo pipeline (scripts/demo.py writes it).
service: {SERVICE}
source:
  conninfo: "{dsn}"
  slot: floe_{SERVICE}
  publication:
    name: floe_demo
    create: all_tables
  snapshot: initial
checkpoint:
  interval: 1s
metrics:
  listen: 127.0.0.1:0   # any free port: the demo runs beside whatever holds 9464
""" + (f"warehouse: {warehouse_uri()}\ncatalog:\n  type: rest\n  uri: {REST.uri}\n"
       + S3.floe_yaml() if ON_REST else
       f"warehouse: {warehouse_uri()}\ncatalog:\n  path: {CATALOG_DB}\n" + S3.floe_yaml()
       if ON_S3 else f"warehouse: {WAREHOUSE}\n"))
        step(f"floe run {shown(config)} --duration {DURATION}s")
        say(f"  (floe's log: {floe_log})")
        with open(floe_log, "wb") as log:
            floe = subprocess.Popen([str(floe_bin), "run", str(config), "--duration",
                                     f"{DURATION}s"], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        time.sleep(2)
        if floe.poll() is not None:
            say(f"floe run exited at once with code {floe.returncode}:")
            say(floe_log.read_text(errors="replace")[-3000:])
            return 1

        step(f"A live workload for {DURATION - 10}s")
        counts = workload(dsn, DURATION - 10)
        say("  done: " + ", ".join(f"{v} {k}" for k, v in counts.items()))

        step("Waiting for floe's final checkpoint (--duration)")
        try:
            rc = floe.wait(DURATION + 60)
        except subprocess.TimeoutExpired:
            say("floe did not stop after --duration; sending SIGTERM")
            floe.terminate()
            rc = floe.wait(60)
        log_lines = floe_log.read_text(errors="replace").splitlines()
        say(f"  floe exited with code {rc}; {len(log_lines)} log lines, the last ones:")
        for line in log_lines[-4:]:
            say("    " + line[:160])
        if rc != 0:
            return 1
        landed = show_results(floe_log)
        if landed is None:
            return 1
        ok = show_silver(floe_bin, config, dsn)
        explore(*landed, floe_log)
        return 0 if ok else 1
    except Interrupted as e:
        say(f"\ninterrupted ({e}); cleaning up")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if floe is not None and floe.poll() is None:
            floe.terminate()
            try:
                floe.wait(30)
            except subprocess.TimeoutExpired:
                floe.kill()
                floe.wait()
        cluster.destroy()
        say("(the demo's PostgreSQL is stopped and removed)")
        if REST is not None:
            REST.stop()
            say("(the demo's REST catalog server is stopped)")
        if S3 is not None:
            S3.stop()
            say("(the demo's S3 server is stopped)")


if __name__ == "__main__":
    sys.exit(main())
