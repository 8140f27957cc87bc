"""`floe compact` re-bucketing Silver and compacting the audit and quarantine tables,
end to end on tables built by `floe run` and `floe silver` against a real
PostgreSQL, read back with PyIceberg and DuckDB:

* `--buckets N` rewrites the whole Silver table into a new partition spec
  bucket(N, id) in one commit: PyIceberg sees the new default spec (new spec id,
  new partition field id), every live file has it and a bucket < N that is the
  bucket of each of its rows (PyIceberg's own bucket transform), files are sorted by
  the key, no delete file is left, the watermark is carried; both readers read the
  same rows as before (== the source), and the snapshot before the re-bucketing
  still reads as it did (PyIceberg time travel, DuckDB on the older metadata file);
* merges after it work on the new spec (Silver == source), and the live size
  drives the count without `--buckets`: a small `--target-file-size` grows it, the
  default target shrinks it again;
* the race: a random workload, repeated `floe silver` and repeated re-bucketing
  compactions (2 <-> 4 buckets) at the same time; then Silver equals the source
  and every live file has the default spec;
* the audit (pg_logical_messages) and quarantine tables' small files of today are
  merged (fewer files, the same rows for both readers, sorted by their time column
  descending).

The helpers are test_maintenance.py, test_silver.py, oracle.py and floerun.py."""

from __future__ import annotations

import threading

from pyiceberg.transforms import BucketTransform
from pyiceberg.types import IntegerType

from floerun import floe  # noqa: F401
from test_maintenance import (SERVICE, check_sorted_by, churn, delete_files_in_plan,
                              floe_loop, items_workload, race_state,
                              live_files, local, maint, silver_table)
from oracle import check_silver
from test_silver import silver, wait_bronze


def buckets_of(table) -> int:
    field = table.spec().fields[0]
    assert isinstance(field.transform, BucketTransform), table.spec()
    return field.transform.num_buckets


def check_layout(con, table, n: int) -> None:
    """Every live file is a data file of the default spec bucket(n, id), in the bucket
    of each of its rows (PyIceberg's bucket transform), sorted by id."""
    spec = table.spec()
    name = spec.fields[0].name
    bucket = BucketTransform(n).transform(IntegerType())
    files = live_files(table)
    assert files
    seen = set()
    for f in files:
        assert f["content"] == 0, f
        assert f["spec_id"] == spec.spec_id, (f["spec_id"], spec)
        b = f["partition"][name]
        assert 0 <= b < n, f["partition"]
        seen.add(b)
        path = local(f["file_path"])
        ids = [r[0] for r in con.execute("SELECT id FROM read_parquet(?)", [path]).fetchall()]
        assert {bucket(i) for i in ids} == {b}, (path, b)
        check_sorted_by(con, path, "id")
    assert len(seen) == len({f["partition"][name] for f in files})


def estimated_live_bytes(table) -> int:
    """floe's estimate: data records minus position deletes, at the data bytes per row."""
    files = live_files(table)
    rows = sum(f["record_count"] for f in files if f["content"] == 0)
    size = sum(f["file_size_in_bytes"] for f in files if f["content"] == 0)
    deleted = sum(f["record_count"] for f in files if f["content"] == 1)
    return int(size / rows * (rows - deleted))


def test_compact_rebuckets_silver_in_one_commit_and_merges_carry_on(floe, pg, duckdb_con):
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, pad text)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g % 7, md5(g::text) "
               "FROM generate_series(1, 3000) g")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    churn(pg, 3, seed=1)
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    run.stop()

    st = silver_table(run, "public.items")
    assert delete_files_in_plan(st) > 0, "the setup should leave position deletes"
    n0 = buckets_of(st)
    n1 = 8 if n0 != 8 else 4
    before = st.current_snapshot()
    watermark = before.summary["floe.bronze-commit-lsn"]
    last_partition_id = st.metadata.last_partition_id
    metadata_files = len(st.metadata.metadata_log)
    rows_before = check_silver(run, pg, con, "public.items", ["id"])

    out = maint(run, "compact", "--silver-only", "--buckets", str(n1))
    assert f"silver.svc.public.items: re-bucketed from {n0} to {n1} buckets" in out, out
    assert f"re-bucketing from {n0} to {n1} buckets (--buckets" in out, out

    st = silver_table(run, "public.items")
    # One commit: one metadata file more, holding the new spec and the snapshot.
    assert len(st.metadata.metadata_log) == metadata_files + 1
    snap = st.current_snapshot()
    assert snap.parent_snapshot_id == before.snapshot_id
    assert snap.summary.operation.value == "replace", snap.summary
    assert snap.summary["floe.bronze-commit-lsn"] == watermark
    assert snap.summary["floe.maintenance"] == "compact"
    assert len(st.specs()) == 2 and st.spec().spec_id not in (0,), st.specs()
    field = st.spec().fields[0]
    assert field.field_id > last_partition_id, (field, last_partition_id)
    assert field.name == f"id_bucket_{n1}", field
    assert buckets_of(st) == n1
    assert delete_files_in_plan(st) == 0
    check_layout(con, st, n1)
    assert check_silver(run, pg, con, "public.items", ["id"]) == rows_before
    # The snapshot before reads as it did: PyIceberg time travel, DuckDB on the
    # metadata file of then.
    old = st.scan(snapshot_id=before.snapshot_id).to_arrow().to_pylist()
    assert sorted(r["id"] for r in old) == [r["id"] for r in rows_before]
    old_metadata = local(st.metadata.metadata_log[-1].metadata_file)
    old_dk = con.execute("SELECT id FROM iceberg_scan(?)", [old_metadata]).fetchall()
    assert sorted(r[0] for r in old_dk) == [r["id"] for r in rows_before]

    # Merges on the new spec: Silver keeps equalling the source.
    run.start()
    churn(pg, 3, seed=2)
    pg.execute("INSERT INTO items SELECT g, 'new ' || g, 1, 'p' "
               "FROM generate_series(5000, 5200) g")
    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    out = silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    st = silver_table(run, "public.items")
    assert delete_files_in_plan(st) > 0
    assert {f["spec_id"] for f in live_files(st)} == {st.spec().spec_id}

    # By size: a target of a (4 x n1)th of the live bytes makes 4 x n1 buckets ...
    target = estimated_live_bytes(st) // (4 * n1) + 1
    out = maint(run, "compact", "--silver-only", "--target-file-size", str(target))
    assert f"re-bucketed from {n1} to {4 * n1} buckets" in out, out
    assert "by size" in out, out
    st = silver_table(run, "public.items")
    check_layout(con, st, 4 * n1)
    check_silver(run, pg, con, "public.items", ["id"])
    # ... and the default target (128 MiB) one bucket; a second run has nothing to do.
    out = maint(run, "compact", "--silver-only")
    assert f"re-bucketed from {4 * n1} to 1 buckets" in out, out
    st = silver_table(run, "public.items")
    check_layout(con, st, 1)
    # bucket(1) is spec 0's field when the table started with 1 bucket: reused.
    assert len(st.specs()) == (3 if n0 == 1 else 4), st.specs()
    check_silver(run, pg, con, "public.items", ["id"])
    out = maint(run, "compact", "--silver-only")
    assert "silver.svc.public.items: nothing to compact" in out, out

    # And floe silver carries on on the last spec.
    run.start()
    churn(pg, 2, seed=3)
    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])


def test_rebucketing_while_floe_silver_merges(floe, pg, duckdb_con):
    """No lost rows and no resurrected deletes when re-bucketing compactions and
    merges race: a merge committed during a re-bucketing makes it plan again, and a
    merge planned on the old spec loses its compare-and-swap and plans on the new."""
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, pad text)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, 0, repeat(md5(g::text), 2) "
               "FROM generate_series(1, 20000) g")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)

    stop = threading.Event()
    errors: list[str] = []
    results: dict[str, list[int]] = {"silver": [], "compact": []}

    compact_commands = [["compact", "--silver-only", "--buckets", "2"],
                        ["compact", "--silver-only", "--buckets", "4"]]
    threads = [threading.Thread(target=items_workload, args=(pg, stop, errors),
                                kwargs=dict(seed=11, next_id=20001, max_ops=6, pause=0.02)),
               # Merges back to back, with a pause after every third: each merge
               # lands files a re-bucketing must re-plan around, and under load a
               # re-bucketing never finishing between back-to-back merges gave up
               # every time (docs/maintenance.md: a compaction needs a window).
               threading.Thread(target=floe_loop, args=(run, "silver", [["silver"]], stop,
                                                        errors, results,
                                                        [0.05, 0.05, 3.0])),
               threading.Thread(target=floe_loop, args=(run, "compact", compact_commands,
                                                        stop, errors, results))]
    for t in threads:
        t.start()

    def raced_enough():
        snaps = list(silver_table(run, "public.items").snapshots())
        rebuckets = sum(1 for s in snaps if s.summary.get("floe.maintenance") == "compact")
        first = next((i for i, s in enumerate(snaps)
                      if s.summary.get("floe.maintenance") == "compact"), len(snaps))
        merges_after = sum(1 for s in snaps[first:]
                           if s.summary.get("floe.maintenance") != "compact")
        # Both directions of the race happened: a merge committed while a
        # re-bucketing was being written (it planned again), and a merge planned on
        # the old spec lost its compare-and-swap to a re-bucketing (it planned again).
        log = run.base / "compact-loop.log"
        compaction_replanned = log.exists() and "changed while compacting" in log.read_text()
        log = run.base / "silver-loop.log"
        merge_replanned = log.exists() and "Silver changed while merging" in log.read_text()
        return (rebuckets >= 3 and merges_after >= 3 and compaction_replanned
                and merge_replanned and not errors)

    try:
        run.wait_until(raced_enough, timeout=300,
                       what=lambda: ("3 re-bucketing compactions amid merges, each side "
                                     f"re-planning ({race_state(run, errors, results)})"))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    compact_log = (run.base / "compact-loop.log").read_text()
    failures = [line for line in compact_log.splitlines() if ": FAILED: " in line]
    assert all("compaction gave up after" in line for line in failures), failures
    assert "re-bucketed from" in compact_log
    assert results["silver"].count(0) >= 1, results

    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])
    st = silver_table(run, "public.items")
    assert len(st.specs()) >= 2
    assert {f["spec_id"] for f in live_files(st)} == {st.spec().spec_id}
    marks = [int(s.summary["floe.bronze-commit-lsn"]) for s in st.snapshots()]
    assert marks == sorted(marks), marks
    # One more re-bucketing with nothing racing, and the layout is exact.
    n = 8
    maint(run, "compact", "--silver-only", "--buckets", str(n))
    st = silver_table(run, "public.items")
    check_layout(con, st, n)
    check_silver(run, pg, con, "public.items", ["id"])


def rows_sorted(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=repr)


def test_compact_merges_the_audit_and_quarantine_tables(floe, pg, duckdb_con):
    con = duckdb_con
    pg.execute("CREATE TABLE prices (id int PRIMARY KEY, amount numeric(10,2))")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    rounds = 4
    for i in range(rounds):
        # One audit message and one quarantined value (NaN) per transaction, each in
        # its own checkpoint: a small file each.
        with pg.connect(autocommit=False) as conn:
            conn.execute("SELECT pg_logical_emit_message(true, 'audit', %s)", (f"m{i}",))
            conn.execute("INSERT INTO prices VALUES (%s, 'NaN')", (i,))
            conn.commit()
        run.wait_until(lambda: run.count("pg_logical_messages") >= i + 1
                       and run.count("quarantine") >= i + 1, 60,
                       what=f"round {i} in the audit and quarantine tables")
    run.stop()

    names = {"pg_logical_messages": "cdc_ts", "quarantine": "cdc_processed_at"}
    before = {}
    for name in names:
        files = live_files(run.load(name))
        assert len(files) >= 2, (name, len(files))
        before[name] = (len(files), rows_sorted(run.rows(con, name)))
        assert len(before[name][1]) == rounds

    out = maint(run, "compact", "--bronze-only")
    for name in names:
        assert f"bronze.svc.{name}: compacted 1 partition(s)" in out, out
    assert "compact: 3 table(s), 0 failed" in out, out

    for name, column in names.items():
        t = run.load(name)
        assert t.current_snapshot().summary["floe.maintenance"] == "compact"
        files = live_files(t)
        assert len(files) < before[name][0], (name, len(files), before[name][0])
        assert rows_sorted(run.rows(con, name)) == before[name][1], name
        biggest = max(files, key=lambda f: f["record_count"])
        assert biggest["record_count"] >= 2
        check_sorted_by(con, local(biggest["file_path"]), column, descending=True)

    # --table and --silver-only leave them alone.
    out = maint(run, "compact", "--table", "public.prices")
    assert "pg_logical_messages" not in out and "bronze.svc.quarantine" not in out, out
    # The next floe run keeps writing to them.
    run.start()
    pg.execute("SELECT pg_logical_emit_message(false, 'audit', 'after')")
    run.wait_until(lambda: run.count("pg_logical_messages") >= rounds + 1, 60,
                   what="the message after the compaction")
    run.stop()
    assert len(run.rows(con, "pg_logical_messages")) == rounds + 1
