"""floe on an object store: the whole product with its warehouse in `s3://` on a real
S3-compatible server (moto's, s3server.py) behind the SQLite catalog (issue 17, the
object-store FileIO; the REST catalog comes next):

* `floe run` (initial snapshot, then a stream of inserts, updates, deletes, a TOAST
  value, a composite key, an audit message; stopped and restarted), `floe silver`,
  `floe compact`, `floe expire`, `floe remove-orphans`, `floe silver verify` and `floe
  status` work on it;
* Bronze's fold and Silver equal the source, read back from S3 by PyIceberg and by
  DuckDB (httpfs): both are checked, and agree;
* every object floe wrote is under the warehouse prefix, nothing but the catalog is
  written locally, expiry deletes objects and leaves every referenced one;
* the S3 secret is in no log, no output and no metadata object;
* through a proxy that answers `503 SlowDown` and cuts uploads in the middle,
  nothing is lost and every referenced object is whole;
* the crash test of test_run_crash.py (22 SIGKILLs, audit trigger) on S3."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from floerun import floe  # noqa: F401
from oracle import check_silver
from s3server import SECRET_KEY, S3Server
from test_maintenance import maint
from test_silver import silver, wait_bronze

BUCKET = "lake"
PREFIX = "warehouse/prod"


@pytest.fixture
def s3(tmp_path):
    server = S3Server(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def s3_run(floe, s3: S3Server, **kwargs):
    s3.make_bucket(BUCKET)
    return floe(warehouse_uri=f"s3://{BUCKET}/{PREFIX}", catalog_props=s3.pyiceberg_props(),
                extra_yaml=s3.floe_yaml(), **kwargs)


def referenced(run, tables) -> set[str]:
    """Every object the current metadata of `tables` (PyIceberg Table objects) reaches:
    metadata file, manifest lists, manifests, live data and delete files of every snapshot."""
    out = set()
    for t in tables:
        out.add(t.metadata_location)
        for snap in t.snapshots():
            out.add(snap.manifest_list)
            for m in snap.manifests(t.io):
                out.add(m.manifest_path)
                for e in m.fetch_manifest_entry(t.io, discard_deleted=True):
                    out.add(e.data_file.file_path)
    return out


def first_changes(run, pg, con) -> None:
    """A TOAST value, then updates that leave it unchanged (pgoutput sends it as
    unchanged-toast), deletes, inserts and an audit message, on the `items` and
    `pairs` tables of the whole-product tests, until Bronze holds them; then `run`
    stops. PyIceberg and DuckDB read Bronze and agree."""
    pg.execute("UPDATE items SET note = repeat(md5(id::text), 400) WHERE id <= 5")
    pg.execute("UPDATE items SET qty = qty + 100 WHERE id % 3 = 0")
    pg.execute("DELETE FROM items WHERE id % 11 = 0")
    pg.execute("INSERT INTO items (id, name) SELECT g, 'new ' || g FROM "
               "generate_series(301, 340) g")
    pg.execute("UPDATE pairs SET v = -v WHERE a = 3")
    pg.execute("DELETE FROM pairs WHERE a = 4")
    pg.execute("SELECT pg_logical_emit_message(true, 'audit', 'who did what')")
    wait_bronze(run, pg, "public.items", ["id"])
    wait_bronze(run, pg, "public.pairs", ["a", "b"])
    run.wait_until(lambda: run.count("pg_logical_messages") >= 1, 60,
                   what="the audit message in Bronze")
    assert len(run.rows(con, "public.items")) > 340
    run.stop()


def test_the_whole_product_on_an_s3_warehouse(floe, pg, duckdb_con, s3):
    con = duckdb_con
    s3.duckdb_secret(con)
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, "
               "price numeric(10,2), seen timestamptz, raw bytea, note text)")
    pg.execute("ALTER TABLE items ALTER COLUMN note SET STORAGE EXTERNAL")
    pg.execute("CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b))")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g % 7, g * 1.25, "
               "'2024-01-01 00:00:00+00'::timestamptz + g * interval '1 minute', "
               "decode(md5(g::text), 'hex'), NULL FROM generate_series(1, 300) g")
    pg.execute("INSERT INTO pairs SELECT g % 10, 'b' || (g / 10), g FROM "
               "generate_series(1, 60) g")
    run = s3_run(floe, s3).start().wait_streaming()
    first_changes(run, pg, con)
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    check_silver(run, pg, con, "public.pairs", ["a", "b"])

    # A restart carries on from what is on S3; a second merge on top of the first.
    run.start().wait_streaming()
    pg.execute("UPDATE items SET name = name || '!' WHERE id % 4 = 0")
    pg.execute("DELETE FROM items WHERE id BETWEEN 20 AND 40")
    pg.execute("INSERT INTO pairs VALUES (99, 'x', 1)")
    wait_bronze(run, pg, "public.items", ["id"])
    wait_bronze(run, pg, "public.pairs", ["a", "b"])
    run.stop()
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    check_silver(run, pg, con, "public.pairs", ["a", "b"])

    out = maint(run, "compact")
    assert "0 failed" in out, out
    check_silver(run, pg, con, "public.items", ["id"])
    check_silver(run, pg, con, "public.pairs", ["a", "b"])

    before = set(s3.keys(BUCKET))
    out = maint(run, "expire", "--older-than", "0s", "--retain-last", "1")
    assert "0 failed" in out, out
    after = set(s3.keys(BUCKET))
    gone = before - after
    assert gone and all(k.endswith((".parquet", ".avro", ".json")) for k in gone), gone
    cat = run.catalog()
    tables = [cat.load_table(i) for i in (
        ("bronze", "svc", "public", "items"), ("bronze", "svc", "public", "pairs"),
        ("bronze", "svc", "pg_logical_messages"), ("silver", "svc", "public", "items"),
        ("silver", "svc", "public", "pairs"))]
    wanted = {loc.removeprefix("s3://" + BUCKET + "/") for loc in referenced(run, tables)}
    assert wanted <= after, f"expire deleted referenced objects: {sorted(wanted - after)[:5]}"
    check_silver(run, pg, con, "public.items", ["id"])
    assert len(run.rows(con, "public.items")) > 0

    # A young stray object is left alone; nothing referenced goes.
    stray = f"{PREFIX}/bronze/svc/public/items/data/being-written.parquet"
    s3.client().put_object(Bucket=BUCKET, Key=stray, Body=b"in flight")
    out = maint(run, "remove-orphans")
    assert "0 failed" in out, out
    assert stray in s3.keys(BUCKET)
    assert wanted <= set(s3.keys(BUCKET))

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
        name = t["source_table"]
        assert t["error"] is None, t
        bronze = cat.load_table(("bronze", "svc", *name.split(".")))
        assert t["bronze"]["rows"] == bronze.scan().to_arrow().num_rows > 0
        assert t["silver"]["exists"] is True, t

    # Everything floe wrote is under the prefix, every location it stored is s3://,
    # and only the catalog is on local disk.
    keys = s3.keys(BUCKET)
    assert keys and all(k.startswith(PREFIX + "/") for k in keys), sorted(keys)[:5]
    for t in tables:
        assert t.metadata_location.startswith(f"s3://{BUCKET}/{PREFIX}/"), t.metadata_location
        assert t.location().startswith(f"s3://{BUCKET}/{PREFIX}/"), t.location()
    local = sorted(p.name for p in run.warehouse.rglob("*") if p.is_file())
    assert all(name.startswith("catalog.db") for name in local), local

    # The secret is nowhere: logs, outputs, metadata objects.
    texts = [run.log_text(), (run.base / "silver.log").read_text(),
             (run.base / "maintenance.log").read_text(), text,
             status.stdout.decode(errors="replace"), status.stderr.decode(errors="replace")]
    client = s3.client()
    for key in keys:
        if key.endswith(".json"):
            texts.append(client.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode())
    assert not [t for t in texts if SECRET_KEY in t]

    # With the S3 server gone, a merge pass fails: its progress line says so (not
    # "(100%) ... done"), and it names the tables.
    pg.execute("UPDATE items SET qty = -qty WHERE id < 50")
    s3.stop()
    cfg = run.base / "s3-gone.yaml"
    cfg.write_text(run.config_path.read_text() + "  max_attempts: 1\n")
    out = subprocess.run([str(run.floe_bin), "silver", str(cfg)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, cwd=run.base, timeout=300)
    text = out.stdout.decode(errors="replace")
    assert out.returncode == 1, text
    assert "failed after" in text and "(100%)" not in text, text
    assert "public.items" in text and SECRET_KEY not in text, text


def test_an_s3_warehouse_needs_a_local_catalog_and_an_existing_bucket(floe_bin, floe, pg,
                                                                     s3, tmp_path):
    """A SQLite catalog cannot sit in the bucket (refused with the fix); a missing
    bucket stops `floe run` with an error naming it, and the secret stays unprinted."""
    cfg = tmp_path / "p.yaml"
    cfg.write_text(f"source:\n  conninfo: \"{pg.dsn}\"\nwarehouse: s3://{BUCKET}/w\n"
                   + s3.floe_yaml())
    out = subprocess.run([str(floe_bin), "validate", str(cfg)], capture_output=True,
                         text=True)
    assert out.returncode != 0, out.stdout + out.stderr
    assert "set catalog.path to a local file" in out.stdout + out.stderr, out

    run = floe(warehouse_uri="s3://no-such-bucket/w", catalog_props=s3.pyiceberg_props(),
               extra_yaml=s3.floe_yaml())
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)")
    pg.execute("INSERT INTO t VALUES (1)")
    run.start()
    rc = run.wait_exit(120)
    assert rc != 0
    log = run.log_text()
    assert "no-such-bucket" in log, log[-3000:]
    assert SECRET_KEY not in log


def test_floe_run_stops_when_asked_while_the_object_store_does_not_answer(floe, pg, s3):
    """SIGTERM while the S3 endpoint does not answer at all: `floe run` stops (exit 0)
    instead of checking the bucket for minutes and then going on to stream. The bound
    below is a hang check, not a timing: it took over two minutes before."""
    from s3server import _free_port

    dead = f"http://127.0.0.1:{_free_port()}"
    run = floe(warehouse_uri=f"s3://{BUCKET}/w", catalog_props=s3.pyiceberg_props(),
               extra_yaml=s3.floe_yaml().replace(s3.endpoint, dead))
    pg.execute("CREATE TABLE t (id int PRIMARY KEY)")
    run.start()
    time.sleep(2)
    run.proc.send_signal(signal.SIGTERM)
    assert run.wait_exit(60) == 0, run.log_tail()
    assert "streaming slot" not in run.log_text()


@pytest.mark.parametrize("source", ["files", "environment"])
def test_s3_keys_from_files_or_the_default_chain_sign_every_request(
        floe, pg, duckdb_con, s3, tmp_path, source):
    """The `s3:` keys from files (`access_key_id_file`, `secret_access_key_file`), or
    from none of the settings (the AWS default chain: AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY in floe's environment): every request floe sends to the
    object store is signed with that key id (read off each request by a proxy; moto
    itself accepts any key), Bronze folds to the source, and the secret is never
    printed."""
    from s3server import REGION, FaultProxy

    s3.make_bucket(BUCKET)
    proxy = FaultProxy(s3.port, seed=0)
    key_id, secret = f"{source.upper()}KEYID", f"{source}-secret-never-printed-77"
    yaml = f"s3:\n  endpoint: {proxy.endpoint}\n  region: {REGION}\n"
    env = {}
    if source == "files":
        (tmp_path / "key_id").write_text(key_id + "\n")
        (tmp_path / "secret").write_text(secret + "\n")
        yaml += (f"  access_key_id_file: {tmp_path / 'key_id'}\n"
                 f"  secret_access_key_file: {tmp_path / 'secret'}\n")
    else:
        env = {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret}
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, v int)")
    pg.execute("INSERT INTO items SELECT g, g FROM generate_series(1, 100) g")
    run = floe(warehouse_uri=f"s3://{BUCKET}/{PREFIX}", catalog_props=s3.pyiceberg_props(),
               extra_yaml=yaml)
    try:
        run.start(env=env).wait_streaming()
        pg.execute("UPDATE items SET v = -v WHERE id % 4 = 0")
        wait_bronze(run, pg, "public.items", ["id"])
        run.stop()
    finally:
        proxy.close()
    keys = {k for _, _, k in proxy.signed}
    assert keys == {key_id}, keys
    assert len(proxy.signed) > 5, proxy.signed
    assert secret not in run.log_text()


def test_slowdowns_and_uploads_cut_short_lose_nothing(floe, pg, duckdb_con, s3, tmp_path):
    """floe reaches S3 through a proxy that answers a share of requests `503
    SlowDown` and cuts a share of large uploads in the middle (FaultProxy, seeded:
    FLOE_TEST_SEED). Bronze and Silver still equal the source, and every data and
    delete file the tables reference exists in full (its object's size is the
    manifest's)."""
    import os
    import random

    from s3server import FaultProxy

    seed = int(os.environ.get("FLOE_TEST_SEED", random.randrange(1 << 30)))
    print(f"FLOE_TEST_SEED={seed}")
    con = duckdb_con
    s3.duckdb_secret(con)
    s3.make_bucket(BUCKET)
    proxy = FaultProxy(s3.port, seed, slowdown=0.1, drop_upload=0.5)
    # 12 MB and more of hard-to-compress text: the copy's files go up in parts.
    pg.execute("CREATE TABLE big (id int PRIMARY KEY, v int, pad text)")
    pg.execute("ALTER TABLE big ALTER COLUMN pad SET STORAGE EXTERNAL")
    pg.execute("INSERT INTO big SELECT g, 0, (SELECT string_agg(md5(g::text || i::text), '') "
               "FROM generate_series(1, 12) i) FROM generate_series(1, 60000) g")
    yaml = s3.floe_yaml().replace(s3.endpoint, proxy.endpoint) + "  max_attempts: 20\n"
    run = floe(warehouse_uri=f"s3://{BUCKET}/{PREFIX}", catalog_props=s3.pyiceberg_props(),
               extra_yaml=yaml)
    try:
        run.start().wait_streaming(timeout=300)
        rng = random.Random(seed)
        for _ in range(6):
            lo = rng.randrange(1, 59000)
            pg.execute(f"UPDATE big SET v = v + 1 WHERE id BETWEEN {lo} AND {lo + 800}")
            pg.execute(f"DELETE FROM big WHERE id % 97 = {rng.randrange(97)} AND id < {lo}")
            pg.execute("INSERT INTO big SELECT g, 1, repeat(md5(g::text), 300) FROM "
                       f"generate_series({70000 + lo}, {70000 + lo + 40}) g "
                       "ON CONFLICT (id) DO NOTHING")
        wait_bronze(run, pg, "public.big", ["id"])
        run.stop()
        silver(run)
        check_silver(run, pg, con, "public.big", ["id"])
    finally:
        proxy.close()
    print(f"faults injected: {proxy.counts}")
    assert proxy.counts["slowdown"] > 0 and proxy.counts["dropped"] > 0, proxy.counts
    client = s3.client()
    cat = run.catalog()
    for ident in (("bronze", "svc", "public", "big"), ("silver", "svc", "public", "big")):
        t = cat.load_table(ident)
        for task in t.scan().plan_files():
            for f in [task.file, *task.delete_files]:
                key = f.file_path.removeprefix(f"s3://{BUCKET}/")
                size = client.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
                assert size == f.file_size_in_bytes, (f.file_path, size, f.file_size_in_bytes)


@pytest.mark.parametrize("mode,size", [("merge-on-read", "128MiB"), ("copy-on-write", "1MiB")])
def test_a_merge_cut_into_slices_reads_each_silver_object_from_s3_once(
        floe, pg, duckdb_con, s3, mode, size):
    """A merge whose increment is many times its memory (`silver.memory_limit:
    64MiB`: slices of under a MiB of changes) into a one-bucket merge-on-read Silver
    table, and into a copy-on-write one of several buckets: every slice reads the
    key columns, manifests and delete files of its buckets, the rewrite reads them
    again, and all of it is kept on local disk after the first read, so each Silver
    object (data and delete files, manifests) is fetched from S3 about once, not
    once a slice (a break-it run: 119 slices made ~70,000 GETs of one Silver file
    and the merge did not finish; another fetched a copy-on-write table's manifests
    36 times). Counted through a proxy that injects nothing. Silver equals the
    source."""
    import math
    import re
    import urllib.parse

    from s3server import FaultProxy

    con = duckdb_con
    s3.duckdb_secret(con)
    s3.make_bucket(BUCKET)
    proxy = FaultProxy(s3.port, seed=0)
    pg.execute("CREATE TABLE wide (id bigint PRIMARY KEY, v int, pad text)")
    pg.execute("INSERT INTO wide SELECT g, 0, md5(g::text) || md5((g + 1)::text) || "
               "md5((g + 2)::text) FROM generate_series(1, 120000) g")
    yaml = (s3.floe_yaml().replace(s3.endpoint, proxy.endpoint) +
            f"silver:\n  memory_limit: 64MiB\n  write_mode: {mode}\n"
            f"  target_file_size: {size}\n")
    run = floe(warehouse_uri=f"s3://{BUCKET}/{PREFIX}", catalog_props=s3.pyiceberg_props(),
               extra_yaml=yaml)
    try:
        run.start().wait_streaming(timeout=300)
        wait_bronze(run, pg, "public.wide", ["id"])
        run.stop()
        silver(run)  # the backfill: one bucket
        run.start().wait_streaming(timeout=120)
        pg.execute("UPDATE wide SET v = v + 1, pad = reverse(pad) WHERE id % 5 <> 0")
        pg.execute("DELETE FROM wide WHERE id % 7 = 0")
        pg.execute("INSERT INTO wide SELECT g, 2, md5(g::text) FROM "
                   "generate_series(120001, 124000) g")
        wait_bronze(run, pg, "public.wide", ["id"])
        run.stop()
        del proxy.requests[:]
        out = silver(run)
        requests = list(proxy.requests)
    finally:
        proxy.close()
    check_silver(run, pg, con, "public.wide", ["id"])
    slices = [int(n) for n in re.findall(r"merged in (\d+) slices", out)]
    assert slices and slices[-1] >= 8, out
    table = run.catalog().load_table(("silver", "svc", "public", "wide"))
    buckets = "bucket[1]" if mode == "merge-on-read" else "bucket["
    assert len(table.spec().fields) == 1 and buckets in str(table.spec()), table.spec()
    assert str(table.spec()) != "bucket[1]" or mode == "merge-on-read", table.spec()
    client = s3.client()
    silver_reads: dict[str, int] = {}
    for method, target in requests:
        path = urllib.parse.unquote(target.split("?")[0])
        if method in ("GET", "HEAD") and "/silver/" in path and path.endswith(
                (".parquet", ".avro")):
            silver_reads[path] = silver_reads.get(path, 0) + 1
    assert silver_reads, requests
    for path, n in silver_reads.items():
        key = path.removeprefix(f"/{BUCKET}/")
        size = client.head_object(Bucket=BUCKET, Key=key)["ContentLength"]
        # Its blocks of a MiB, each fetched once, and a few opens outside the slices
        # (the row size estimate, the fold of small files).
        allowed = math.ceil(size / (1 << 20)) + 6
        print(f"{path}: {size} bytes, {n} requests over {slices[-1]} slices")
        assert n <= allowed, (path, size, n, slices)


def test_sigkill_at_random_moments_on_s3_loses_nothing_and_duplicates_nothing(
        floe, pg, duckdb_con, s3):
    """test_run_crash.py's crash test (22 SIGKILLs under a mixed workload over three
    tables, one with a composite key, one with TOAST values; Bronze checked against an
    audit trigger: zero missing, zero duplicated) with the warehouse on S3."""
    from test_run_crash import crash_test

    s3.duckdb_secret(duckdb_con)
    s3.make_bucket(BUCKET)
    crash_test(floe, pg, duckdb_con, kills_wanted=22,
               warehouse_uri=f"s3://{BUCKET}/{PREFIX}", catalog_props=s3.pyiceberg_props(),
               extra_yaml=s3.floe_yaml())
