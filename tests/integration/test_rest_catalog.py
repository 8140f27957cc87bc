"""floe behind an Iceberg REST catalog (issue 17): Apache Iceberg's own REST server
(restserver.py; a SQLite JdbcCatalog, S3FileIO on a moto server) holds the tables,
their files live in s3://, and floe speaks the REST protocol to it: tables registered
from their first metadata file, every later commit sent as requirements and updates
with the server writing the metadata file.

* the whole product (`floe run` with a restart, `floe silver` twice, `compact`,
  `expire`, `remove-orphans`, `silver verify`, `status`) works on s3 + REST, with a
  bearer token the server requires; PyIceberg's RestCatalog and DuckDB (by metadata
  file, and attached to the REST catalog itself) read the same tables and equal the
  source; remove-orphans keeps young objects and deletes thousands of old ones;
* through a fault proxy, commits whose answer is lost after the server applied them
  are recognised as committed (not written twice), 409s are retried after a reload,
  503s are resolved: Bronze equals the source change for change;
* OAuth2 client credentials: the token is fetched, refreshed before it expires, and
  the client secret is never printed;
* the token, the S3 secret and the client secret are in no log, output, /metrics
  scrape, metadata object or table property;
* the crash test of test_run_crash.py (22 SIGKILLs, audit trigger) on s3 + REST."""

from __future__ import annotations

import collections
import json
import os
import random
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from floerun import floe  # noqa: F401
from oracle import check_silver
from restserver import CatalogFaultProxy, RestCatalogServer, is_commit
from s3server import SECRET_KEY, S3Server
from test_maintenance import maint, race_state, start_race
from test_s3_warehouse import first_changes
from test_divergences import wait_copied
from test_silver import silver, wait_bronze
from test_stream_faults import audit_events, audited

BUCKET = "lake"
PREFIX = "warehouse/rest"
WAREHOUSE = f"s3://{BUCKET}/{PREFIX}"
TOKEN = "floe-rest-token-never-logged-7c1e"


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


def rest_run(floe, s3: S3Server, rest: RestCatalogServer, uri: str | None = None,
             catalog_extra: str = "", **kwargs):
    """A pipeline on the REST catalog (at `uri`, e.g. a proxy in front of `rest`)."""
    auth = "" if "client_id" in catalog_extra else f"  token: {TOKEN}\n"
    catalog_yaml = (f"catalog:\n  type: rest\n  uri: {uri or rest.uri}\n{auth}"
                    f"{catalog_extra}")
    return floe(warehouse_uri=WAREHOUSE, catalog_yaml=catalog_yaml,
                catalog_factory=lambda: rest.pyiceberg_catalog(),
                extra_yaml=s3.floe_yaml() + kwargs.pop("extra_yaml", ""), **kwargs)


def test_the_whole_product_on_s3_and_a_rest_catalog(floe, pg, duckdb_con, s3, rest):
    con = duckdb_con
    s3.duckdb_secret(con)
    proxy = CatalogFaultProxy(rest.port)
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, "
               "price numeric(10,2), note text)")
    pg.execute("ALTER TABLE items ALTER COLUMN note SET STORAGE EXTERNAL")
    pg.execute("CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b))")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g % 7, g * 1.25, NULL "
               "FROM generate_series(1, 300) g")
    pg.execute("INSERT INTO pairs SELECT g % 10, 'b' || (g / 10), g FROM "
               "generate_series(1, 60) g")
    run = rest_run(floe, s3, rest, uri=proxy.uri).start().wait_streaming()
    first_changes(run, pg, con)
    # Commits went to the server as changes (it wrote the metadata files), tables
    # were registered, never created by the server.
    counts = proxy.counts()
    commits = sum(n for (m, p), n in counts.items()
                  if m == "POST" and p.endswith("/tables/{table}"))
    registers = sum(n for (m, p), n in counts.items()
                    if m == "POST" and p.endswith("/register"))
    assert commits > 3 and registers >= 3, counts
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    check_silver(run, pg, con, "public.pairs", ["a", "b"])

    # A restart (and a restart of the catalog server) carries on.
    rest.restart()
    run.start().wait_streaming()
    pg.execute("UPDATE items SET name = name || '!' WHERE id % 4 = 0")
    pg.execute("DELETE FROM items WHERE id BETWEEN 20 AND 40")
    pg.execute("INSERT INTO pairs VALUES (99, 'x', 1)")
    wait_bronze(run, pg, "public.items", ["id"])
    wait_bronze(run, pg, "public.pairs", ["a", "b"])
    with urllib.request.urlopen(run.metrics_url() + "/metrics", timeout=10) as r:
        scraped = r.read().decode()
    assert "floe_events_total" in scraped, scraped[:500]
    run.stop()
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    check_silver(run, pg, con, "public.pairs", ["a", "b"])

    out = maint(run, "compact")
    assert "0 failed" in out, out
    check_silver(run, pg, con, "public.items", ["id"])
    before = set(s3.keys(BUCKET))
    out = maint(run, "expire", "--older-than", "0s", "--retain-last", "1")
    assert "0 failed" in out, out
    after = set(s3.keys(BUCKET))
    assert before - after, "expire deleted nothing"
    cat = rest.pyiceberg_catalog()
    idents = [("bronze", "svc", "public", "items"), ("bronze", "svc", "public", "pairs"),
              ("bronze", "svc", "pg_logical_messages"), ("silver", "svc", "public", "items"),
              ("silver", "svc", "public", "pairs")]
    tables = [cat.load_table(i) for i in idents]
    from test_s3_warehouse import referenced

    wanted = {loc.removeprefix("s3://" + BUCKET + "/") for loc in referenced(run, tables)}
    assert wanted <= after, f"expire deleted referenced objects: {sorted(wanted - after)[:5]}"
    for t in tables:
        assert len(t.snapshots()) >= 1
    check_silver(run, pg, con, "public.items", ["id"])
    check_silver(run, pg, con, "public.pairs", ["a", "b"])

    stray = f"{PREFIX}/bronze/svc/public/items/data/being-written.parquet"
    s3.client().put_object(Bucket=BUCKET, Key=stray, Body=b"in flight")
    out = maint(run, "remove-orphans")
    assert "0 failed" in out, out
    assert stray in s3.keys(BUCKET)
    assert wanted <= set(s3.keys(BUCKET))
    # Orphans old enough are deleted: thousands in one table's prefix (listed a page
    # of 1,000 at a time), the stray above too, with the clock two hours ahead (an
    # object's LastModified cannot be set back); every referenced object stays.
    silver_items = tables[3].metadata.location.removeprefix(f"s3://{BUCKET}/")
    orphans = {f"{silver_items}/data/orphan-{i:04}.parquet" for i in range(2500)}
    putter = s3.client()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: putter.put_object(Bucket=BUCKET, Key=k, Body=b"orphan"),
                      sorted(orphans)))
    out = maint(run, "remove-orphans", "--older-than", "1h", env={
        "FLOE_FAILPOINT": "remove-orphans.clock-ahead=7200000"})
    assert "0 failed" in out, out
    left = set(s3.keys(BUCKET))
    assert not orphans & left, f"{len(orphans & left)} orphans left"
    assert stray not in left
    assert wanted <= left, f"deleted referenced objects: {sorted(wanted - left)[:5]}"
    check_silver(run, pg, con, "public.items", ["id"])
    check_silver(run, pg, con, "public.pairs", ["a", "b"])

    # DuckDB attached to the REST catalog itself (its iceberg extension speaking the
    # protocol, httpfs reading the files) sees what psql sees.
    con.execute("LOAD iceberg")
    con.execute(f"CREATE OR REPLACE SECRET floe_rest (TYPE iceberg, TOKEN '{TOKEN}')")
    con.execute(f"ATTACH 'rest' AS restlake (TYPE iceberg, ENDPOINT '{rest.uri}', "
                "SECRET floe_rest)")
    for table, cols in (("items", "id, name, qty, price, note"), ("pairs", "a, b, v")):
        via_rest = con.execute(f'SELECT {cols} FROM restlake."silver.svc.public".{table} '
                               f"ORDER BY {cols}").fetchall()
        assert via_rest == pg.execute(f"SELECT {cols} FROM {table} ORDER BY {cols}"), table
    con.execute("DETACH restlake")

    out = subprocess.run([str(run.floe_bin), "silver", "verify", str(run.config_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=run.base,
                         timeout=300)
    text = out.stdout.decode(errors="replace")
    assert out.returncode == 0, text
    assert text.count("Silver vs source: OK") == 2, text
    status = subprocess.run([str(run.floe_bin), "status", str(run.config_path), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=run.base,
                            timeout=120)
    assert status.returncode == 0, status.stderr.decode(errors="replace")
    doc = json.loads(status.stdout)
    assert [t["source_table"] for t in doc["tables"]] == ["public.items", "public.pairs"]
    for t in doc["tables"]:
        assert t["error"] is None, t
        bronze = cat.load_table(("bronze", "svc", *t["source_table"].split(".")))
        assert t["bronze"]["rows"] == bronze.scan().to_arrow().num_rows > 0
        assert t["silver"]["exists"] is True, t

    # Every file is under the prefix, nothing is local, the server wrote the
    # metadata: more metadata files than floe's own first ones.
    keys = s3.keys(BUCKET)
    assert keys and all(k.startswith(PREFIX + "/") for k in keys), sorted(keys)[:5]
    local = [p for p in run.warehouse.rglob("*") if p.is_file()]
    assert not local, local
    for t in tables:
        assert t.metadata_location.startswith(f"{WAREHOUSE}/"), t.metadata_location

    # No secret anywhere: logs, outputs, metadata objects, properties, summaries.
    texts = [run.log_text(), scraped, (run.base / "silver.log").read_text(),
             (run.base / "maintenance.log").read_text(), text,
             status.stdout.decode(errors="replace"), status.stderr.decode(errors="replace")]
    client = s3.client()
    for key in keys:
        if key.endswith(".json"):
            texts.append(client.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode())
    for t in tables:
        texts.append(json.dumps(t.properties))
        texts += [json.dumps(s.summary.model_dump()) for s in t.snapshots()]
    printed = subprocess.run([str(run.floe_bin), "validate", str(run.config_path), "--print"],
                             capture_output=True, timeout=60)
    assert printed.returncode == 0, printed.stderr.decode(errors="replace")
    texts.append(printed.stdout.decode())
    assert "token: <redacted>" in printed.stdout.decode()
    assert not [t[:200] for t in texts if TOKEN in t or SECRET_KEY in t]
    proxy.close()


def bronze_events(run, table: str) -> list[tuple]:
    rows = run.rows_pyiceberg(table)
    return [(r["cdc_commit_lsn"], r["cdc_seq"]) for r in rows]


def test_lost_answers_conflicts_and_503s_on_commits(floe, pg, duckdb_con, s3, rest):
    """Through a seeded fault proxy ~30% of commits lose their answer after the server
    applied them, get 409 (without reaching the server) or 503: every change is in
    Bronze exactly once, and the proxy really did all three."""
    seed = int(os.environ.get("FLOE_TEST_SEED", random.randrange(1 << 30)))
    print(f"FLOE_TEST_SEED={seed}")
    s3.duckdb_secret(duckdb_con)
    proxy = CatalogFaultProxy(rest.port)
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
    pg.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, 50) g")
    run = rest_run(floe, s3, rest, uri=proxy.uri, interval="200ms").start().wait_streaming()
    # One of each for certain, then at random.
    proxy.lose_responses(1, match=is_commit)
    proxy.fail_with(409, 1, match=is_commit)
    proxy.fail_with(503, 1, match=is_commit)
    proxy.random_faults(seed, 0.3, kinds=("lose", 409, 503), match=is_commit)
    rng = random.Random(seed)
    for i in range(60):
        ids = rng.sample(range(1, 200), 5)
        for k in ids:
            pg.execute("INSERT INTO t VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET v = "
                       "t.v + 1", (k, i))
        if i % 7 == 3:
            pg.execute("DELETE FROM t WHERE id %% 13 = %s", (i % 13,))
        time.sleep(0.1)
    wait_bronze(run, pg, "public.t", ["id"])
    run.stop()
    proxy.clear()
    injected = {k: proxy.injected(k) for k in ("lose", "fail 409", "fail 503")}
    assert all(n >= 1 for n in injected.values()), f"seed {seed}: {injected}"
    events = bronze_events(run, "public.t")
    assert len(events) == len(set(events)), f"seed {seed}: duplicated changes in Bronze"
    # Bronze's changes equal the source's history: the fold equals the table (checked
    # by wait_bronze) and the count of changes is what the workload made.
    rows = pg.execute("SELECT count(*) FROM t")[0][0]
    assert len(events) >= rows
    silver(run)
    check_silver(run, pg, duckdb_con, "public.t", ["id"])
    proxy.close()


@pytest.mark.parametrize("how", ["killed", "timed out"])
def test_a_commit_that_lands_late_is_never_appended_twice(floe, pg, duckdb_con, s3, rest,
                                                         how):
    """A Bronze commit held on its way to the catalog (a proxy delays it) lands after
    floe gave up on it: floe was SIGKILLed and started again (killed), or its request
    timed out and floe reconnected (timed out: `request_timeout: 2s`, the table's
    reload answered 503 so the commit's outcome stays unknown). The new attempt,
    from the table as it was before the late commit and with the same changes, is
    held too and meets the 409 the late commit causes. It was then applied on top
    (found by the break-it pass: every change twice in Bronze, and Silver, which
    folds them away, none the wiser); now floe sees that another commit of its own
    moved the table on, reconnects and skips what the table holds. Bronze equals the
    audit trigger: nothing missing, nothing twice."""
    s3.duckdb_secret(duckdb_con)
    proxy = CatalogFaultProxy(rest.port)
    pg.execute("CREATE TABLE zr (id int PRIMARY KEY, v text)")
    audited(pg, "zr")
    extra = "  request_timeout: 2s\n" if how == "timed out" else ""
    run = rest_run(floe, s3, rest, uri=proxy.uri, catalog_extra=extra).start()
    run.wait_streaming()
    pg.execute("INSERT INTO zr VALUES (0, 'before')")
    wait_bronze(run, pg, "public.zr", ["id"])
    zr_commit = lambda m, p: is_commit(m, p) and p.endswith("/tables/zr")  # noqa: E731
    held = lambda: sum(1 for m, p, a in proxy.events  # noqa: E731
                       if a == "delay" and zr_commit(m, p))
    proxy.delay(2, 6.0, match=zr_commit)
    if how == "timed out":
        zr_load = lambda m, p: m == "GET" and p.endswith("/tables/zr")  # noqa: E731
        proxy.fail_with(503, 6, match=zr_load)
    pg.execute("INSERT INTO zr SELECT g, 'row' || g FROM generate_series(1, 100) g")
    run.wait_until(lambda: held() >= 1, 60, what="the first commit held by the proxy")
    if how == "killed":
        run.kill()
        run.start()
    run.wait_until(lambda: held() >= 2, 90, what="the second attempt held too")
    run.wait_until(lambda: proxy.answered(409, zr_commit) >= 1, 60,
                   what="the second attempt to meet the late commit's 409")
    pg.execute("UPDATE zr SET v = 'after' WHERE id <= 10")
    pg.execute("INSERT INTO zr VALUES (-1, 'marker')")
    run.wait_until(lambda: run.has_row("public.zr", id=-1), 120, what="the marker in Bronze")
    wait_bronze(run, pg, "public.zr", ["id"])
    run.stop()
    events = bronze_events(run, "public.zr")
    assert len(events) == len(set(events)), \
        f"{len(events) - len(set(events))} changes twice in Bronze"
    assert "another commit of floe landed meanwhile" in run.log_text(), run.log_tail()
    cols = ["id", "v"]
    want = audit_events(pg, {"zr": {"cols": cols, "key": ["id"]}})
    got = [("zr", r["cdc_op"], r["cdc_source_tx_id"],
            tuple(None if r[c] is None else str(r[c]) for c in cols))
           for r in run.rows_pyiceberg("public.zr") if r["cdc_op"] != "r"]
    missing = collections.Counter(want) - collections.Counter(got)
    extra_ = collections.Counter(got) - collections.Counter(want)
    assert not missing and not extra_, (f"{sum(missing.values())} missing, "
                                        f"{sum(extra_.values())} extra")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.zr", ["id"])
    proxy.close()


def test_concurrent_writers_get_the_servers_409s_and_lose_nothing(floe, pg, duckdb_con,
                                                                     s3, rest):
    """`floe run`, `floe silver` and `floe compact` write the same tables through
    REST at once: the server itself refuses each commit another one overtook (409:
    its assert-ref-snapshot-id requirement failed), and the writer reloads and
    retries (or, for a compaction, plans again). In the end Bronze holds the audit
    trail's changes exactly once and Silver equals the source. (The other 409s of
    these tests come from the fault proxy without reaching the server.)"""
    con = duckdb_con
    s3.duckdb_secret(con)
    proxy = CatalogFaultProxy(rest.port)
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, pad text)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, 0, repeat(md5(g::text), 4) "
               "FROM generate_series(1, 5000) g")
    audited(pg, "items")  # from here on: the copy holds what came before
    # Checkpoints a second apart: a Bronze compaction must reload, re-validate and
    # commit between two of floe run's commits to land, and through this local S3
    # server a cycle can take longer than 200 ms (a CI run: 20 attempts lost in a row,
    # ten plans; see the issue note on compaction against frequent appends).
    run = rest_run(floe, s3, rest, uri=proxy.uri, interval="1s").start().wait_streaming()
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    stop, errors, results, threads = start_race(run, pg, seed=17, next_id=5001,
                                                silver_pauses=[0.0, 1.0])

    def raced_enough():
        # The server refused several commits, compactions and merges both landed.
        return (proxy.answered(409, is_commit) >= 3 and results["compact"].count(0) >= 2
                and results["silver"].count(0) >= 2 and not errors)

    try:
        run.wait_until(raced_enough, timeout=600, what=lambda: (
            f"3 commits refused by the server ({proxy.answered(409, is_commit)} so far) "
            f"amid compactions and merges ({race_state(run, errors, results)})"))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    cols = ["id", "name", "qty", "pad"]
    want = audit_events(pg, {"items": {"cols": cols, "key": ["id"]}})
    got = [("items", r["cdc_op"], r["cdc_source_tx_id"],
            tuple(None if r[c] is None else str(r[c]) for c in cols))
           for r in run.rows_pyiceberg("public.items") if r["cdc_op"] != "r"]
    assert len(want) > 100, len(want)
    missing = collections.Counter(want) - collections.Counter(got)
    extra = collections.Counter(got) - collections.Counter(want)
    assert not missing and not extra, (f"{sum(missing.values())} missing, "
                                       f"{sum(extra.values())} extra: "
                                       f"{list(missing)[:3]} {list(extra)[:3]}")
    proxy.close()


def test_the_servers_prefix_the_warehouse_asked_for_and_the_headers_reach_it(
        floe, pg, duckdb_con, s3, rest):
    """`GET /v1/config` is asked with `?warehouse=` (catalog.warehouse), every request
    carries the `headers` entries, and the path prefix the config's overrides hand out
    (a proxy hands one out, as a catalog serving several warehouses does, and strips
    it before the server, which serves none) is in every later request's path:
    `floe run` and `floe silver` work through it, Silver equals the source, and the
    header's value is never printed. The config's other properties (a Java client's:
    an object-store endpoint, a key) are not applied, and said so once, the key's
    value never printed."""
    s3.duckdb_secret(duckdb_con)
    proxy = CatalogFaultProxy(rest.port)
    proxy.serve_prefix("wh-7")
    config_secret = "config-secret-value-never-printed-88"
    proxy.add_config({"s3.endpoint": "http://127.0.0.1:9", "s3.secret-access-key":
                      config_secret}, {"s3.path-style-access": "true"})
    tenant = "tenant-header-value-never-printed-51"
    pg.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 40) g")
    run = rest_run(floe, s3, rest, uri=proxy.uri,
                   catalog_extra=f"  warehouse: analytics\n  headers:\n    X-Tenant: {tenant}\n")
    run.start().wait_streaming()
    pg.execute("UPDATE t SET v = v || '!' WHERE id % 3 = 0")
    pg.execute("DELETE FROM t WHERE id > 35")
    wait_bronze(run, pg, "public.t", ["id"])
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.t", ["id"])
    requests = list(proxy.requests)
    configs = [p for _, p, _ in requests if p.startswith("/v1/config")]
    assert configs, requests[:5]
    for p in configs:
        assert urllib.parse.parse_qs(urllib.parse.urlsplit(p).query).get("warehouse") \
            == ["analytics"], p
    without = [(m, p) for m, p, h in requests
               if {k.lower(): v for k, v in h.items()}.get("x-tenant") != tenant]
    assert not without, without[:5]
    assert not proxy.unprefixed, proxy.unprefixed[:5]
    prefixed = [p for _, p, _ in requests if p.startswith("/v1/wh-7/")]
    assert len(prefixed) > 10, len(prefixed)
    printed = subprocess.run([str(run.floe_bin), "validate", str(run.config_path), "--print"],
                             capture_output=True, timeout=60)
    texts = [run.log_text(), (run.base / "silver.log").read_text(),
             printed.stdout.decode(errors="replace"), printed.stderr.decode(errors="replace")]
    assert not [t[:200] for t in texts if tenant in t or config_secret in t]
    said = [line for line in run.log_text().splitlines() if "/v1/config also gives" in line]
    assert len(said) == 1, said
    assert "defaults s3.endpoint=http://127.0.0.1:9, defaults s3.secret-access-key, " \
        "overrides s3.path-style-access=true; floe does not apply these" in said[0], said
    proxy.close()


def test_a_catalog_without_register_gets_its_tables_by_create_table(floe, pg, duckdb_con,
                                                                    s3, rest):
    """A REST catalog that does not offer register (its /v1/config `endpoints` lack
    it, as S3 Tables' do; a proxy hides it and answers 501 to it): floe creates every
    table with createTable (`POST .../namespaces/{ns}/tables`, the server writing the
    first metadata file) at the location it asks for, with the schema, partitioning
    and sort order it asks for, and commits to them as usual. Bronze and Silver equal
    the source (TOAST, arrays, numeric, a composite key), the answer to one creation
    lost after the server applied it is recognised, and no register request is sent.
    Before: every table was registered, so floe could not write to such a catalog."""
    s3.duckdb_secret(duckdb_con)
    proxy = CatalogFaultProxy(rest.port)
    proxy.hide_register()
    creates = lambda m, p: m == "POST" and p.endswith("/tables")  # noqa: E731
    proxy.lose_responses(1, match=creates)
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, tags text[], "
               "price numeric(10,2), note text)")
    pg.execute("ALTER TABLE items ALTER COLUMN note SET STORAGE EXTERNAL")
    pg.execute("CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b))")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, ARRAY['t' || g, NULL], "
               "g * 1.25, CASE WHEN g % 10 = 0 THEN repeat('n', 5000) END "
               "FROM generate_series(1, 200) g")
    pg.execute("INSERT INTO pairs SELECT g % 10, 'b' || (g / 10), g "
               "FROM generate_series(1, 60) g")
    run = rest_run(floe, s3, rest, uri=proxy.uri).start().wait_streaming()
    pg.execute("UPDATE items SET name = name || '!' WHERE id % 3 = 0")
    pg.execute("DELETE FROM items WHERE id BETWEEN 50 AND 60")
    pg.execute("UPDATE pairs SET b = b || '-moved' WHERE a = 4")
    wait_bronze(run, pg, "public.items", ["id"])
    wait_bronze(run, pg, "public.pairs", ["a", "b"])
    run.stop()
    silver(run)
    check_silver(run, pg, duckdb_con, "public.items", ["id"])
    check_silver(run, pg, duckdb_con, "public.pairs", ["a", "b"])
    counts = proxy.counts()
    created = sum(n for (m, p), n in counts.items()
                  if m == "POST" and p.endswith("/namespaces/{namespace}/tables"))
    registered = sum(n for (m, p), n in counts.items()
                     if m == "POST" and p.endswith("/register"))
    assert registered == 0 and created >= 5, counts  # Bronze x2, messages, Silver x2
    assert proxy.injected("lose") == 1
    cat = rest.pyiceberg_catalog()
    items = cat.load_table(("silver", "svc", "public", "items"))
    assert items.metadata.location == f"{WAREHOUSE}/silver/svc/public/items"
    assert [items.schema().find_column_name(f.source_id)
            for f in items.sort_order().fields] == ["id"]
    assert items.spec().fields[0].name == "id_bucket"
    # The catalog's note as it opens goes to stderr: stdout is one JSON document
    # (break-it: the note came first on stdout, and the JSON did not parse).
    status = subprocess.run([str(run.floe_bin), "status", "--json", str(run.config_path)],
                            capture_output=True, timeout=120)
    doc = json.loads(status.stdout)
    assert "does not offer register" in status.stderr.decode(errors="replace")
    assert {t["source_table"] for t in doc["tables"]} >= {"public.items", "public.pairs"}
    proxy.close()


@pytest.mark.parametrize("creation", ["register", "createTable"])
def test_a_silver_table_rebuilt_with_a_new_key_is_dropped_and_made_again(
        floe, pg, duckdb_con, s3, rest, creation):
    """The key every change carries changes (REPLICA IDENTITY USING INDEX): floe run
    copies the table again and `floe silver` rebuilds its Silver table with the new
    key: the table is dropped through the catalog (DELETE .../tables/{table}) and made
    again, registered or, on a catalog without register, created, at the same
    location, where the old table's files stay. Silver equals the source before and
    after, the new table is another table (its uuid), and `remove-orphans` then
    deletes the old table's files without touching a file the new one refers to."""
    s3.duckdb_secret(duckdb_con)
    proxy = CatalogFaultProxy(rest.port)
    if creation == "createTable":
        proxy.hide_register()
    pg.execute("CREATE TABLE rk (id int PRIMARY KEY, email text NOT NULL UNIQUE, v text)")
    pg.execute("INSERT INTO rk SELECT g, 'u' || g || '@x', 'v' || g FROM "
               "generate_series(1, 30) g")
    run = rest_run(floe, s3, rest, uri=proxy.uri).start().wait_streaming()
    pg.execute("DELETE FROM rk WHERE id <= 5")
    wait_bronze(run, pg, "public.rk", ["id"])
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rk", ["id"])
    ident = ("silver", "svc", "public", "rk")
    old = rest.pyiceberg_catalog().load_table(ident)
    old_files = {f.file.file_path for f in old.scan().plan_files()}
    assert old_files

    pg.execute("ALTER TABLE rk REPLICA IDENTITY USING INDEX rk_email_key")
    pg.execute("UPDATE rk SET v = 'after' WHERE id = 6")
    run.wait_until(lambda: "the key every change carries changed" in run.log_text(),
                   what="the copy after the key change")
    wait_copied(run, "rk")
    pg.execute("DELETE FROM rk WHERE id = 7")
    wait_bronze(run, pg, "public.rk", ["email"])
    out = silver(run)
    assert "rebuilding the Silver table with the new key" in out, out
    check_silver(run, pg, duckdb_con, "public.rk", ["email"])
    dropped = sum(n for (m, p), n in proxy.counts().items()
                  if m == "DELETE" and p.endswith("/tables/{table}"))
    assert dropped == 1, proxy.counts()
    new = rest.pyiceberg_catalog().load_table(ident)
    assert new.metadata.table_uuid != old.metadata.table_uuid
    assert new.metadata.location == old.metadata.location
    assert json.loads(new.properties["floe.silver.key"]) == ["email"]
    if creation == "createTable":
        registered = sum(n for (m, p), n in proxy.counts().items()
                         if m == "POST" and p.endswith("/register"))
        assert registered == 0, proxy.counts()
    # Later changes merge into the new table.
    pg.execute("UPDATE rk SET v = 'later' WHERE id = 8")
    pg.execute("DELETE FROM rk WHERE id = 9")
    wait_bronze(run, pg, "public.rk", ["email"])
    silver(run)
    check_silver(run, pg, duckdb_con, "public.rk", ["email"])
    # The old table's files are orphans of the new one's location now.
    live = {f.file.file_path for f in
            rest.pyiceberg_catalog().load_table(ident).scan().plan_files()}
    assert not live & old_files
    run.stop()
    out = maint(run, "remove-orphans", "--older-than", "1h", env={
        "FLOE_FAILPOINT": "remove-orphans.clock-ahead=7200000"})
    assert "0 failed" in out, out
    keys = set(s3.keys(BUCKET))
    for f in old_files:
        assert f.split(f"s3://{BUCKET}/", 1)[1] not in keys, (f, out)
    for f in live:
        assert f.split(f"s3://{BUCKET}/", 1)[1] in keys, (f, out)
    check_silver(run, pg, duckdb_con, "public.rk", ["email"])
    proxy.close()


class _TokenEndpoint:
    """An OAuth2 token endpoint (client credentials) that hands out the REST server's
    token with a short life, counting the grants and checking the client's secret."""

    def __init__(self, token: str, client_id: str, secret: str, expires_in: int):
        self.grants = 0
        self.refused = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                form = urllib.parse.parse_qs(self.rfile.read(n).decode())
                ok = (form.get("grant_type") == ["client_credentials"]
                      and form.get("client_id") == [client_id]
                      and form.get("client_secret") == [secret]
                      and form.get("scope") == ["catalog"])
                if ok:
                    outer.grants += 1
                    body = json.dumps({"access_token": token, "token_type": "bearer",
                                       "expires_in": expires_in,
                                       "issued_token_type":
                                           "urn:ietf:params:oauth:token-type:access_token"})
                    self.send_response(200)
                else:
                    outer.refused += 1
                    body = json.dumps({"error": "invalid_client"})
                    self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/oauth/tokens"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_oauth2_client_credentials_are_refreshed_and_never_printed(floe, pg, s3, rest):
    client_secret = "floe-oauth-client-secret-never-logged"
    endpoint = _TokenEndpoint(TOKEN, "floe-client", client_secret, expires_in=3)
    try:
        pg.execute("CREATE TABLE t (id int PRIMARY KEY, v int)")
        extra = (f"  client_id: floe-client\n  client_secret: {client_secret}\n"
                 f"  oauth2_server_uri: {endpoint.uri}\n")
        run = rest_run(floe, s3, rest, catalog_extra=extra, interval="300ms")
        run.start().wait_streaming()
        for i in range(12):
            pg.execute("INSERT INTO t VALUES (%s, %s)", (i, i))
            time.sleep(0.5)
        wait_bronze(run, pg, "public.t", ["id"])
        run.stop()
        # A token lives 3 s and is refreshed with a tenth of its life to spare: a run
        # of more than 6 s fetched several.
        assert endpoint.grants >= 2 and endpoint.refused == 0, (endpoint.grants,
                                                                endpoint.refused)
        printed = subprocess.run([str(run.floe_bin), "validate", str(run.config_path),
                                  "--print"], capture_output=True, timeout=60)
        texts = [run.log_text(), printed.stdout.decode(), printed.stderr.decode()]
        assert "client_secret: <redacted>" in printed.stdout.decode()

        # A wrong secret: refused with what to check, and the secret not printed.
        bad = run.base / "bad.yaml"
        bad.write_text(run.config_path.read_text().replace(client_secret, "wrong-secret-x1"))
        out = subprocess.run([str(run.floe_bin), "status", str(bad)], capture_output=True,
                             timeout=120)
        err = out.stderr.decode(errors="replace") + out.stdout.decode(errors="replace")
        assert out.returncode != 0, err
        assert "client_id" in err and "wrong-secret-x1" not in err, err
        texts.append(err)
        assert not [t[:200] for t in texts if client_secret in t or TOKEN in t]
    finally:
        endpoint.close()


def test_credentials_the_catalog_vends_sign_the_tables_object_requests(
        floe, pg, duckdb_con, s3, rest):
    """A catalog that vends credentials with loadTable (`config`: s3.access-key-id,
    ...; injected by the proxy in front of the REST server, which asks for them with
    X-Iceberg-Access-Delegation): every request for a table's data files is signed
    with the vended key, not the `s3:` settings' (a counting proxy in front of the S3
    server reads each request's signing key id); Silver equals the source; the vended
    secret and session token are in no log or output."""
    from s3server import REGION, FaultProxy

    s3.duckdb_secret(duckdb_con)
    s3_proxy = FaultProxy(s3.port, seed=0)
    catalog_proxy = CatalogFaultProxy(rest.port)
    vended_secret, vended_token = "vended-secret-never-logged-5a1", "vended-session-9f3"
    catalog_proxy.vend({"s3.access-key-id": "VENDEDKEYID",
                        "s3.secret-access-key": vended_secret,
                        "s3.session-token": vended_token})
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 500) g")
    run = floe(warehouse_uri=WAREHOUSE,
               catalog_yaml=(f"catalog:\n  type: rest\n  uri: {catalog_proxy.uri}\n"
                             f"  token: {TOKEN}\n"),
               catalog_factory=lambda: rest.pyiceberg_catalog(),
               extra_yaml=(f"s3:\n  endpoint: {s3_proxy.endpoint}\n  region: {REGION}\n"
                           "  access_key_id: STATICKEYID\n"
                           "  secret_access_key: static-secret\n"))
    try:
        run.start().wait_streaming()
        pg.execute("UPDATE items SET qty = qty + 1 WHERE id % 3 = 0")
        pg.execute("DELETE FROM items WHERE id > 480")
        wait_bronze(run, pg, "public.items", ["id"])
        run.stop()
        out = silver(run)
        check_silver(run, pg, duckdb_con, "public.items", ["id"])
    finally:
        s3_proxy.close()
        catalog_proxy.close()
    assert catalog_proxy.delegation_headers and set(catalog_proxy.delegation_headers) == {
        "vended-credentials"}, catalog_proxy.delegation_headers
    data = [(m, t, k) for m, t, k in s3_proxy.signed if "/data/" in t]
    assert data and {k for _, _, k in data} == {"VENDEDKEYID"}, sorted(
        {(m, k) for m, _, k in data})
    # The `s3:` settings' key still signs what no table vends for (the start-up check
    # of the bucket, a table's first metadata file before it is registered).
    assert "STATICKEYID" in {k for _, _, k in s3_proxy.signed}
    for text in (out, run.log_text()):
        assert vended_secret not in text and vended_token not in text


def test_a_wrong_token_or_a_missing_server_fails_with_the_fix(floe, pg, s3, rest, tmp_path):
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)")
    run = rest_run(floe, s3, rest)
    bad = tmp_path / "bad-token.yaml"
    bad.write_text(run.config_path.read_text().replace(TOKEN, "not-the-token-42"))
    out = subprocess.run([str(run.floe_bin), "run", str(bad), "--duration", "5s"],
                         capture_output=True, timeout=120)
    err = out.stderr.decode(errors="replace")
    assert out.returncode != 0, err
    assert "401" in err and "catalog.token" in err and "not-the-token-42" not in err, err
    # Nothing listening: the error names the address and what to check.
    from s3server import _free_port

    port = _free_port()
    gone = tmp_path / "gone.yaml"
    gone.write_text(run.config_path.read_text().replace(rest.uri, f"http://127.0.0.1:{port}"))
    out = subprocess.run([str(run.floe_bin), "status", str(gone)], capture_output=True,
                         timeout=120)
    err = out.stderr.decode(errors="replace")
    assert out.returncode != 0, err
    assert f"cannot connect to http://127.0.0.1:{port}" in err and "catalog.uri" in err, err


def test_a_schema_with_a_dot_is_refused_with_the_override_to_add(floe, pg, s3, rest):
    """A namespace level holding '.' would be split by catalogs behind the protocol (the
    JDBC catalog under Iceberg's server listed "a.b" as levels a, b): refused as on the
    SQL catalog, with the naming.tables override in the log; the other tables go on."""
    pg.execute('CREATE SCHEMA "a.b"')
    pg.execute('CREATE TABLE "a.b".t (id int PRIMARY KEY, v text)')
    pg.execute("CREATE TABLE plain (id int PRIMARY KEY)")
    pg.execute('INSERT INTO "a.b".t VALUES (1, \'x\')')
    pg.execute("INSERT INTO plain VALUES (1)")
    run = rest_run(floe, s3, rest).start().wait_streaming()
    wait_bronze(run, pg, "public.plain", ["id"])
    run.wait_until(lambda: "cannot be replicated under its name" in run.log_text(), 60,
                   what="the refusal of \"a.b\".t")
    run.stop()
    text = run.log_text()
    assert "contains '.'" in text and "naming:" in text, text[-2000:]
    cat = rest.pyiceberg_catalog()
    assert ("bronze", "svc", "a") not in cat.list_namespaces(("bronze", "svc"))


def test_crash_test_on_s3_and_a_rest_catalog(floe, pg, duckdb_con, s3, rest):
    """test_run_crash.py's crash test (22 SIGKILLs under a mixed workload over three
    tables, one with a composite key, one with TOAST values; Bronze checked against an
    audit trigger: zero missing, zero duplicated) on s3 + REST."""
    from test_run_crash import crash_test

    s3.duckdb_secret(duckdb_con)
    auth = f"catalog:\n  type: rest\n  uri: {rest.uri}\n  token: {TOKEN}\n"
    crash_test(floe, pg, duckdb_con, kills_wanted=22, warehouse_uri=WAREHOUSE,
               catalog_yaml=auth, catalog_factory=lambda: rest.pyiceberg_catalog(),
               extra_yaml=s3.floe_yaml())
