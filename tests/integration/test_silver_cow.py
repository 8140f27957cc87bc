"""`floe silver` with `silver.write_mode` / `write_modes` / `target_file_size`, end to
end: Bronze from `floe run` on a real PostgreSQL, Silver merged by `floe silver`
round after round of random inserts, updates, deletes and key changes, one table
copy-on-write and one merge-on-read. After every pass both Silver tables equal the
source (read by PyIceberg AND DuckDB) at the watermark; PyIceberg sees no delete
file in the copy-on-write table, whose merges are `overwrite` snapshots replacing
data files, while the merge-on-read table gets position delete files; the tables'
write.*.mode properties name the mode, and follow the file when it changes. A small
`silver.target_file_size` gives a new Silver table more buckets."""

from __future__ import annotations

import random

from floerun import floe  # noqa: F401
from oracle import check_silver, source_rows
from test_silver import (bronze_commit_lsn, current_summary, silver, silver_ident,
                         wait_bronze)

SERVICE = "svc"
COW, MOR = "public.small_lookup", "public.items"
MODE_PROPERTIES = ("write.delete.mode", "write.update.mode", "write.merge.mode")


def delete_files_seen_by_pyiceberg(run, table: str) -> int:
    t = run.catalog().load_table(silver_ident(table))
    return sum(len(task.delete_files) for task in t.scan().plan_files())


def write_modes(run, table: str) -> set[str]:
    props = run.catalog().load_table(silver_ident(table)).properties
    return {props.get(p) for p in MODE_PROPERTIES}


def change_randomly(pg, rng: random.Random, table: str, round_no: int, next_id: list[int]):
    """Inserts, updates, deletes and key-changing updates of random rows, in a few
    transactions."""
    name = table.split(".")[1]
    ids = sorted(r["id"] for r in source_rows(pg, name))
    picked = rng.sample(ids, 45)
    updated, deleted, moved = picked[:30], picked[30:40], picked[40:]
    with pg.connect(autocommit=False) as c:
        for _ in range(20):
            c.execute(f"INSERT INTO {name} VALUES (%s, %s, %s)",
                      (next_id[0], f"new r{round_no}", rng.randint(0, 99)))
            next_id[0] += 1
        for i in updated[:15]:
            c.execute(f"UPDATE {name} SET name = %s, qty = %s WHERE id = %s",
                      (f"r{round_no} {i}", rng.randint(0, 99), i))
        c.commit()
    with pg.connect(autocommit=False) as c:
        for i in updated[15:]:
            c.execute(f"UPDATE {name} SET qty = qty + 1000 WHERE id = %s", (i,))
        c.execute(f"DELETE FROM {name} WHERE id = ANY(%s)", (deleted,))
        c.commit()
    for i in moved:
        pg.execute(f"UPDATE {name} SET id = %s WHERE id = %s", (next_id[0], i))
        next_id[0] += 1


def test_copy_on_write_and_merge_on_read_tables_follow_the_source(floe, pg, duckdb_con):
    for name in ("small_lookup", "items"):
        pg.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, name text, qty int)")
        pg.execute(f"INSERT INTO {name} SELECT g, 'v' || g, g % 13 "
                   "FROM generate_series(1, 600) g")
    run = floe(service=SERVICE, extra_yaml=(
        "silver:\n"
        "  write_mode: merge-on-read\n"
        "  write_modes:\n"
        f"    {COW}: copy-on-write\n"
        "    public.not_published: copy-on-write\n")).start()
    con = duckdb_con
    key = ["id"]
    for t in (COW, MOR):
        wait_bronze(run, pg, t, key)
    silver(run)
    for t in (COW, MOR):
        check_silver(run, pg, con, t, key)
    assert write_modes(run, COW) == {"copy-on-write"}
    assert write_modes(run, MOR) == {"merge-on-read"}

    rng = random.Random(20261130)
    next_id = [100_000]
    folds = with_deletes = 0
    # Rounds until merge-on-read both folded and added deletes, the last round deletes
    # (a bucket folds on its turn, every third merge, once it holds 4 small files).
    for round_no in range(1, 11):
        for t in (COW, MOR):
            change_randomly(pg, rng, t, round_no, next_id)
        for t in (COW, MOR):
            wait_bronze(run, pg, t, key)
        silver(run)
        for t in (COW, MOR):
            check_silver(run, pg, con, t, key)
            s = current_summary(run, t)
            assert s["floe.bronze-commit-lsn"] == str(bronze_commit_lsn(run, t)), (t, s)

        # Copy-on-write: the files holding replaced rows were replaced, no deletes.
        s = current_summary(run, COW)
        assert s["operation"] == "overwrite", s
        assert int(s.get("deleted-data-files", 0)) > 0, s
        assert int(s.get("deleted-records", 0)) > 0, s
        assert "added-position-delete-files" not in s, s
        assert s.get("total-delete-files", "0") == "0", s
        assert delete_files_seen_by_pyiceberg(run, COW) == 0
        assert int(s["total-records"]) == len(source_rows(pg, "small_lookup")), s
        # Merge-on-read: position deletes, no data file replaced; but once the bucket
        # holds 4 small files, on its turn, the merge folds them into one
        # (docs/silver.md, "Small files"), the deletes into them going with them.
        s = current_summary(run, MOR)
        if "deleted-data-files" in s:
            folds += 1
            assert int(s["total-data-files"]) < int(s["deleted-data-files"]), s
        else:
            with_deletes += 1
            assert int(s.get("added-position-delete-files", 0)) > 0, s
            assert delete_files_seen_by_pyiceberg(run, MOR) > 0
        assert write_modes(run, COW) == {"copy-on-write"}
        assert write_modes(run, MOR) == {"merge-on-read"}
        if folds > 0 and with_deletes > 0 and "deleted-data-files" not in s:
            break

    # The merge-on-read table switches to copy-on-write: the properties follow, and
    # the merge rewrites the files it touches with their old deletes applied instead
    # of adding delete files.
    assert folds > 0 and with_deletes > 0, (folds, with_deletes)
    deletes_before = delete_files_seen_by_pyiceberg(run, MOR)
    assert deletes_before > 0  # the last round added deletes, not a fold
    switched = run.base / "all-cow.yaml"
    switched.write_text(run.config_path.read_text().replace(
        "write_mode: merge-on-read", "write_mode: copy-on-write"))
    change_randomly(pg, rng, MOR, 9, next_id)
    wait_bronze(run, pg, MOR, key)
    silver(run, switched)
    check_silver(run, pg, con, MOR, key)
    assert write_modes(run, MOR) == {"copy-on-write"}
    s = current_summary(run, MOR)
    assert s["operation"] == "overwrite", s
    assert "added-position-delete-files" not in s, s
    assert int(s.get("removed-position-delete-files", 0)) > 0, s
    assert delete_files_seen_by_pyiceberg(run, MOR) < deletes_before
    run.stop()


def test_target_file_size_sets_the_bucket_count_of_a_new_silver_table(
        floe, pg, duckdb_con):
    pg.execute("CREATE TABLE wide (id int PRIMARY KEY, a text, b text)")
    pg.execute("INSERT INTO wide SELECT g, md5(g::text), md5((g * 7)::text) "
               "FROM generate_series(1, 60000) g")
    run = floe(service=SERVICE).start()
    wait_bronze(run, pg, "public.wide", ["id"])
    bronze_bytes = int(run.load("public.wide").current_snapshot()
                       .summary.additional_properties["total-files-size"])
    assert bronze_bytes > 2 << 20, bronze_bytes  # so 1MiB files need several buckets

    def buckets(namespace: str) -> tuple[int, dict]:
        t = run.catalog().load_table((namespace, SERVICE, "public", "wide"))
        (field,) = t.spec().fields
        return field.transform.num_buckets, t.properties

    # The default target (128MiB): one bucket for a few MB.
    silver(run)
    default_buckets, props = buckets("silver")
    assert default_buckets == 1
    assert props["write.target-file-size-bytes"] == str(128 << 20)
    # 1MiB: the same Bronze, built into another namespace, gets several buckets.
    small = run.base / "small-files.yaml"
    small.write_text(run.config_path.read_text() + "naming:\n  silver_namespace: silver1m\n"
                     "silver:\n  target_file_size: 1MiB\n")
    silver(run, small)
    small_buckets, props = buckets("silver1m")
    assert small_buckets > default_buckets and small_buckets >= 2, small_buckets
    assert props["write.target-file-size-bytes"] == str(1 << 20)
    t = run.catalog().load_table(("silver1m", SERVICE, "public", "wide"))
    rows = t.scan().to_arrow()
    assert rows.num_rows == 60000
    path = t.metadata_location.removeprefix("file://")
    assert duckdb_con.execute("SELECT count(*), count(DISTINCT id) FROM iceberg_scan(?)",
                              [path]).fetchone() == (60000, 60000)
    run.stop()
