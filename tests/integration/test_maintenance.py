"""`floe compact`, `floe expire` and `floe remove-orphans` end to end, on Bronze and
Silver tables built by the real pipeline (`floe run` and `floe silver` on a real
PostgreSQL), read back with PyIceberg and DuckDB:

* compaction: Silver's position deletes are applied (no delete file is live
  afterwards), PyIceberg and DuckDB read the same rows as before (== the source),
  every data file is sorted by the key (DuckDB's parquet_metadata and the file's row
  order); Bronze's small files of today are merged into one sorted by cdc_ts DESC,
  with the same rows; both replace snapshots carry the positions forward, and a
  restarted `floe run` and the next `floe silver` pass carry on from them;
* expiry: nothing younger than the retention goes; with --older-than 0s the last K
  snapshots (and the files they read) stay, the files only expired snapshots read
  are deleted, and time travel to a kept snapshot works in PyIceberg;
* orphan removal: an unreferenced old file goes, a young one and every referenced
  file (all made old) stay;
* the race: `floe run` + repeated `floe silver` + repeated `floe compact` under a
  random insert / update / delete workload; then Silver equals the source exactly
  and Bronze's fold equals the source (no lost rows, no resurrected deletes).

The helpers are floerun.py, test_silver.py and oracle.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

from floerun import floe  # noqa: F401
from oracle import check_silver, source_rows
from test_silver import fold, silver, silver_ident, wait_bronze

SERVICE = "svc"
OLD = 4 * 24 * 3600  # seconds: older than remove-orphans' default 3d


def maint(run, command: str, *args: str, expect_rc: int | None = 0,
          env: dict[str, str] | None = None) -> str:
    """Runs `floe <command> <pipeline file> <args>` (`env` added to the environment);
    returns stdout + stderr."""
    proc = subprocess.run([str(run.floe_bin), command, str(run.config_path), *args],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=run.base,
                          timeout=300, env={**os.environ, **env} if env else None)
    out = proc.stdout.decode(errors="replace")
    with open(run.base / "maintenance.log", "a") as log:
        log.write(f"===== floe {command} {' '.join(args)} -> {proc.returncode}\n{out}")
    if expect_rc is not None:
        assert proc.returncode == expect_rc, \
            f"floe {command} {' '.join(args)} exited {proc.returncode}:\n{out}"
    return out


def local(path: str) -> str:
    return path.removeprefix("file://").removeprefix("file:")


def live_files(table) -> list[dict]:
    """PyIceberg's inspect.files of the current snapshot (data and delete files)."""
    return table.inspect.files().to_pylist()


def delete_files_in_plan(table) -> int:
    return sum(len(task.delete_files) for task in table.scan().plan_files())


def silver_table(run, table: str):
    return run.catalog().load_table(silver_ident(table))


def check_sorted_by(con, path: str, column: str, descending: bool = False) -> None:
    """The file's rows are in `column` order, and so are its row groups' min / max
    statistics (DuckDB's parquet_metadata)."""
    values = [r[0] for r in con.execute(
        f"SELECT \"{column}\" FROM read_parquet(?)", [path]).fetchall()]
    want = sorted(values, reverse=descending)
    assert values == want, f"{path} is not sorted by {column}"
    groups = con.execute(
        "SELECT row_group_id, stats_min_value, stats_max_value, row_group_num_rows "
        "FROM parquet_metadata(?) WHERE path_in_schema = ? ORDER BY row_group_id",
        [path, column]).fetchall()
    assert groups and sum(g[3] for g in groups) == len(values), groups
    if column == "id":
        bounds = [(int(g[1]), int(g[2])) for g in groups]
        for lo, hi in bounds:
            assert lo <= hi, bounds
        for (_, hi), (lo, _) in zip(bounds, bounds[1:]):
            assert hi <= lo, f"{path}: row groups out of key order: {bounds}"
        assert bounds[0][0] == values[0] and bounds[-1][1] == values[-1], (bounds, values[:3])


def churn(pg, rounds: int, seed: int) -> None:
    """Updates and deletes in separate transactions: Silver gets position deletes."""
    rng = random.Random(seed)
    for _ in range(rounds):
        ids = rng.sample(range(1, 400), 15)
        pg.execute("UPDATE items SET qty = qty + 1, name = name || '+' WHERE id = ANY(%s)",
                   (ids[:10],))
        pg.execute("DELETE FROM items WHERE id = ANY(%s)", (ids[10:],))


def items_workload(pg, stop: threading.Event, errors: list[str], *, seed: int,
                   next_id: int, max_ops: int, pause: float) -> None:
    """Random inserts, updates and deletes on `items` in transactions of 1..max_ops
    changes until `stop` is set (a thread target of the race tests); failures go
    to `errors`."""
    rng = random.Random(seed)
    try:
        while not stop.is_set():
            with pg.connect() as conn:
                with conn.transaction():
                    for _ in range(rng.randint(1, max_ops)):
                        op = rng.random()
                        if op < 0.35:
                            conn.execute("INSERT INTO items VALUES (%s, 'w', 1, 'p')",
                                         (next_id,))
                            next_id += 1
                        elif op < 0.75:
                            conn.execute("UPDATE items SET qty = qty + 1, name = %s "
                                         "WHERE id = %s",
                                         (f"u{rng.random():.6f}", rng.randint(1, next_id)))
                        else:
                            conn.execute("DELETE FROM items WHERE id = %s",
                                         (rng.randint(1, next_id),))
            time.sleep(pause)
    except Exception as e:  # pragma: no cover - reported by the test
        errors.append(f"workload: {e!r}")


def floe_loop(run, name: str, commands: list[list[str]], stop: threading.Event,
              errors: list[str], results: dict[str, list[int]],
              pause: float | list[float] = 0.0) -> None:
    """Runs `floe <command> <config> <args...>` for each of `commands` in turn until
    `stop` is set (a thread target of the race tests): output appended to
    <base>/<name>-loop.log, exit codes to results[name], failures to `errors`. Sleeps
    `pause` seconds after each (a list: its items in turn)."""
    pauses = pause if isinstance(pause, list) else [pause]
    try:
        i = 0
        while not stop.is_set():
            args = commands[i % len(commands)]
            i += 1
            try:
                proc = subprocess.run([str(run.floe_bin), args[0], str(run.config_path),
                                       *args[1:]],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      cwd=run.base, timeout=300)
            except subprocess.TimeoutExpired as e:
                # What it printed before it was killed, for the test's message.
                with open(run.base / f"{name}-loop.log", "ab") as log:
                    log.write((e.stdout or b"") + b"\n(killed after 300 s)\n")
                raise
            with open(run.base / f"{name}-loop.log", "ab") as log:
                log.write(proc.stdout)
            results[name].append(proc.returncode)
            time.sleep(pauses[(i - 1) % len(pauses)])
    except Exception as e:  # pragma: no cover - reported by the test
        errors.append(f"{name}: {e!r}")


def start_race(run, pg, *, seed: int, next_id: int, silver_pauses: list[float]):
    """The race tests' threads, started: items_workload, and `floe silver` and `floe
    compact` each in a loop (the merges pausing `silver_pauses` in turn). Returns
    (stop event, errors, results, threads)."""
    stop = threading.Event()
    errors: list[str] = []
    results: dict[str, list[int]] = {"silver": [], "compact": []}
    threads = [threading.Thread(target=items_workload, args=(pg, stop, errors),
                                kwargs=dict(seed=seed, next_id=next_id, max_ops=8,
                                            pause=0.01)),
               threading.Thread(target=floe_loop,
                                args=(run, "silver", [["silver"]], stop, errors, results),
                                kwargs=dict(pause=silver_pauses)),
               threading.Thread(target=floe_loop,
                                args=(run, "compact", [["compact"]], stop, errors, results))]
    for t in threads:
        t.start()
    return stop, errors, results, threads


def race_state(run, errors: list[str], results: dict[str, list[int]]) -> str:
    """What the race tests' threads did so far, for a timeout's message: exit codes,
    errors, the floe commands still running and the end of each loop's log."""
    running = subprocess.run(["ps", "-o", "etimes=,args=", "-C", "floe"],
                             stdout=subprocess.PIPE, text=True).stdout
    tails = []
    for name in results:
        path = run.base / f"{name}-loop.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        tails.append(f"--- {name}-loop.log (last 40 lines) ---\n" + "\n".join(lines[-40:]))
    return (f"exit codes so far: {results}; errors: {errors}\n"
            f"floe processes (seconds, command):\n{running}\n" + "\n".join(tails))


def test_compaction_applies_deletes_sorts_and_keeps_every_position(floe, pg, duckdb_con):
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g % 7 FROM generate_series(1, 400) g")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    for round_ in range(3):
        churn(pg, 2, seed=round_)
        pg.execute("INSERT INTO items SELECT g, 'new ' || g, 1 "
                   f"FROM generate_series({1000 + round_ * 10}, {1009 + round_ * 10}) g")
        wait_bronze(run, pg, "public.items", ["id"])
        # Two merges, not three: a third would find the bucket's 4 small files and
        # fold them, deletes and all (docs/silver.md, "Small files").
        if round_ != 1:
            silver(run)
    run.stop()

    st = silver_table(run, "public.items")
    assert delete_files_in_plan(st) > 0, "the setup should leave position deletes"
    assert any(f["content"] == 1 for f in live_files(st))
    silver_before = check_silver(run, pg, con, "public.items", ["id"])
    watermark = st.current_snapshot().summary["floe.bronze-commit-lsn"]
    bronze_before = run.rows(con, "public.items")
    bronze_lsn = run.commit_lsns("public.items")[-1]
    bronze_files_before = len(live_files(run.load("public.items")))
    assert bronze_files_before >= 4, bronze_files_before

    def status_times() -> tuple[str, str]:
        proc = subprocess.run([str(run.floe_bin), "status", str(run.config_path), "--json"],
                              capture_output=True, text=True, timeout=60)
        table = next(t for t in json.loads(proc.stdout)["tables"]
                     if t["source_table"] == "public.items")
        return table["bronze"]["last_commit_at"], table["silver"]["last_commit_at"]

    times_before = status_times()
    time.sleep(1.1)  # so that a compaction's snapshot would show a later second
    out = maint(run, "compact")
    assert "compact: 2 table(s), 0 failed" in out, out
    # floe status still dates Bronze's last commit and Silver's freshness from
    # floe run's and floe silver's own snapshots, not from the compaction's
    assert status_times() == times_before
    assert "silver.svc.public.items: compacted" in out, out
    assert "bronze.svc.public.items: compacted" in out, out

    # Silver: no delete file is live, same rows for both readers, == the source.
    st = silver_table(run, "public.items")
    snap = st.current_snapshot()
    assert snap.summary.operation.value == "replace", snap.summary
    assert snap.summary["floe.bronze-commit-lsn"] == watermark, snap.summary
    assert delete_files_in_plan(st) == 0
    files = live_files(st)
    assert files and all(f["content"] == 0 for f in files), files
    assert check_silver(run, pg, con, "public.items", ["id"]) == silver_before
    # Every data file is sorted by the key, and there is one per bucket.
    partitions = [f["partition"]["id_bucket"] for f in files]
    assert len(partitions) == len(set(partitions)), partitions
    for f in files:
        check_sorted_by(con, local(f["file_path"]), "id")

    # Bronze: today's small files merged into one, sorted by cdc_ts DESC, same rows.
    bt = run.load("public.items")
    assert bt.current_snapshot().summary.operation.value == "replace"
    bfiles = live_files(bt)
    assert len(bfiles) < bronze_files_before, (len(bfiles), bronze_files_before)
    assert run.rows(con, "public.items") == bronze_before
    run.check_commit_lsn("public.items", bronze_before)
    assert run.commit_lsns("public.items")[-1] == bronze_lsn
    biggest = max(bfiles, key=lambda f: f["record_count"])
    assert biggest["record_count"] > len(bronze_before) // 2, biggest["record_count"]
    check_sorted_by(con, local(biggest["file_path"]), "cdc_ts", descending=True)

    # A second compaction has nothing to do; an unknown table is an error.
    out = maint(run, "compact", "--table", "public.items")
    assert out.count("nothing to compact") == 2, out
    out = maint(run, "compact", "--table", "public.nope", expect_rc=1)
    assert "no Bronze changelog of public.nope" in out, out

    # A restarted floe run resumes at the carried position (no copy again, nothing
    # lost), and the next floe silver pass merges from the carried watermark.
    run.start()
    churn(pg, 2, seed=99)
    pg.execute("INSERT INTO items VALUES (5000, 'after compaction', 5)")
    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    rows = run.rows(con, "public.items")
    assert rows[:len(bronze_before)] == bronze_before
    assert all(r["cdc_op"] != "r" for r in rows[len(bronze_before):]), \
        "floe run copied the table again after a compaction"
    run.check_commit_lsn("public.items", rows)
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])


def test_a_compaction_whose_commit_fails_plans_again(floe, pg, duckdb_con):
    """The one error policy (issue 15, item 3) in maintenance: a compaction commit that
    fails with an I/O error is retryable like a lost race, so `floe compact` plans
    again on the reloaded table and succeeds (before, only a lost race was retried and
    the table failed). An unknown outcome is resolved inside the table commit itself
    (tests/integration/test_failpoints.py). Silver still equals psql (PyIceberg and
    DuckDB), Bronze holds the same rows."""
    action = "error"
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, g % 7 FROM generate_series(1, 300) g")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    churn(pg, 2, seed=7)
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)
    run.stop()
    assert delete_files_in_plan(silver_table(run, "public.items")) > 0
    bronze_before = run.rows(con, "public.items")

    proc = subprocess.run(
        [str(run.floe_bin), "compact", str(run.config_path), "--table", "public.items"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=run.base, timeout=300,
        env={**os.environ, "FLOE_FAILPOINT": f"catalog.commit@1={action}"})
    out = proc.stdout.decode(errors="replace")
    assert f"failpoint catalog.commit (hit 1): {action}" in out, out
    assert proc.returncode == 0, out
    assert "the compaction's commit failed" in out and "planning again" in out, out
    assert "compact: 2 table(s), 0 failed" in out, out
    st = silver_table(run, "public.items")
    assert st.current_snapshot().summary.operation.value == "replace"
    assert delete_files_in_plan(st) == 0
    check_silver(run, pg, con, "public.items", ["id"])
    assert run.rows(con, "public.items") == bronze_before


def test_expire_keeps_the_last_snapshots_and_time_travel(floe, pg, duckdb_con):
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, 0 FROM generate_series(1, 100) g")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    wait_bronze(run, pg, "public.items", ["id"])
    # A backfill and two merges (a third would fold the bucket's small files itself,
    # docs/silver.md "Small files", leaving the compaction nothing to do).
    for i in range(3):
        pg.execute(f"INSERT INTO items VALUES ({200 + i}, 'x', {i})")
        pg.execute(f"DELETE FROM items WHERE id = {10 + i}")
        wait_bronze(run, pg, "public.items", ["id"])
        silver(run)
    run.stop()
    # The compaction replaces Bronze's small files and Silver's files and deletes:
    # afterwards only the snapshots before it read those.
    maint(run, "compact")
    bronze_at_compaction = run.rows(con, "public.items")
    silver_at_compaction = check_silver(run, pg, con, "public.items", ["id"])
    run.start()
    pg.execute("INSERT INTO items VALUES (300, 'after', 1)")
    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    silver(run)

    bt = run.load("public.items")
    st = silver_table(run, "public.items")
    snaps = {"bronze": list(bt.snapshots()), "silver": list(st.snapshots())}
    assert len(snaps["bronze"]) >= 5 and len(snaps["silver"]) >= 5, snaps

    def files_of(table, snapshots) -> set[str]:
        return {f["file_path"] for s in snapshots
                for f in table.inspect.files(snapshot_id=s.snapshot_id).to_pylist()}

    only_old = {name: files_of(t, snaps[name][:-2]) - files_of(t, snaps[name][-2:])
                for name, t in (("bronze", bt), ("silver", st))}
    assert only_old["bronze"] and only_old["silver"], only_old
    silver_now = check_silver(run, pg, con, "public.items", ["id"])
    bronze_now = run.rows(con, "public.items")

    # The default retention (30 days) expires nothing here.
    out = maint(run, "expire")
    assert out.count("expired 0 snapshot(s)") == 2, out
    assert len(list(run.load("public.items").snapshots())) == len(snaps["bronze"])

    out = maint(run, "expire", "--older-than", "0s", "--retain-last", "2")
    assert "expire: 2 table(s), 0 failed" in out, out
    for name, table in (("bronze", run.load("public.items")),
                        ("silver", silver_table(run, "public.items"))):
        kept = list(table.snapshots())
        assert [s.snapshot_id for s in kept] == \
            [s.snapshot_id for s in snaps[name][-2:]], name
        for s in snaps[name][:-2]:
            assert not os.path.exists(local(s.manifest_list)), s.manifest_list
        for path in only_old[name]:
            assert not os.path.exists(local(path)), f"{path}: only expired snapshots read it"
        for s in kept:
            for f in table.inspect.files(snapshot_id=s.snapshot_id).to_pylist():
                assert os.path.exists(local(f["file_path"])), f["file_path"]
    # Time travel to the older kept snapshot (the compaction) works and reads what
    # the table held then.
    bt = run.load("public.items")
    st = silver_table(run, "public.items")
    compacted = bt.scan(snapshot_id=list(bt.snapshots())[0].snapshot_id).to_arrow()
    assert compacted.num_rows == len(bronze_at_compaction)
    old_silver = st.scan(snapshot_id=list(st.snapshots())[0].snapshot_id).to_arrow()
    assert sorted(r["id"] for r in old_silver.to_pylist()) == \
        [r["id"] for r in silver_at_compaction]
    # The current state is untouched and the positions are still there.
    assert run.rows(con, "public.items") == bronze_now
    run.check_commit_lsn("public.items", bronze_now)
    assert st.current_snapshot().summary["floe.bronze-commit-lsn"]
    assert check_silver(run, pg, con, "public.items", ["id"]) == silver_now

    # Floe carries on after the expiry.
    run.start()
    pg.execute("UPDATE items SET qty = 42 WHERE id = 1")
    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    silver(run)
    check_silver(run, pg, con, "public.items", ["id"])


def test_remove_orphans_removes_only_old_unreferenced_files(floe, pg, duckdb_con):
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 50) g")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    pg.execute("DELETE FROM items WHERE id <= 5")
    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    silver(run)
    bronze_rows = run.rows(con, "public.items")
    silver_rows_now = check_silver(run, pg, con, "public.items", ["id"])

    bronze_dir = Path(local(run.load("public.items").location()))
    silver_dir = Path(local(silver_table(run, "public.items").location()))
    old_orphan = bronze_dir / "data" / "leftover-from-a-crash.parquet"
    old_orphan.write_bytes(b"PAR1 not really")
    old_silver_orphan = silver_dir / "metadata" / "00099-abandoned.metadata.json"
    old_silver_orphan.write_text("{}")
    # Everything on disk is made old: only references keep a file.
    everything = [p for p in run.warehouse.rglob("*") if p.is_file() and not p.name.startswith("catalog.db")]
    for p in everything:
        os.utime(p, (time.time() - OLD, time.time() - OLD))
    young_orphan = bronze_dir / "data" / "being-written.parquet"
    young_orphan.write_bytes(b"in flight")

    out = maint(run, "remove-orphans", "--dry-run")
    assert out.count("would remove 1 orphan file(s)") == 2, out
    assert old_orphan.exists()
    # refused by the command line's own validation (CLI11: exit code 105)
    out = maint(run, "remove-orphans", "--older-than", "10m", expect_rc=105)
    assert "--older-than: 10m is too short: under 1h" in out, out
    out = maint(run, "remove-orphans")
    assert "remove-orphans: 2 table(s), 0 failed" in out, out
    assert not old_orphan.exists()
    assert not old_silver_orphan.exists()
    assert young_orphan.exists()
    gone = {p for p in everything if not p.exists()}
    assert gone == {old_orphan, old_silver_orphan}, gone
    # Both tables still read the same rows with both readers.
    assert run.rows(con, "public.items") == bronze_rows
    assert check_silver(run, pg, con, "public.items", ["id"]) == silver_rows_now


def test_compact_silver_and_run_at_the_same_time(floe, pg, duckdb_con):
    """The acceptance race: no lost rows, no resurrected deletes."""
    con = duckdb_con
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text, qty int, pad text)")
    # Big enough that rewriting a bucket takes a while: merges land during it.
    pg.execute("INSERT INTO items SELECT g, 'item ' || g, 0, repeat(md5(g::text), 4) "
               "FROM generate_series(1, 30000) g")
    run = floe(service=SERVICE, interval="200ms").start().wait_streaming()
    wait_bronze(run, pg, "public.items", ["id"])
    silver(run)

    # A merge that lands while a compaction rewrites makes it plan again. Merges
    # back to back can win all ten of a compaction's plans on a loaded machine (seen
    # in CI): a pause after every third merge leaves a window, so some compactions
    # land and others meet a merge.
    stop, errors, results, threads = start_race(run, pg, seed=7, next_id=30001,
                                                silver_pauses=[0.0, 0.0, 3.0])

    def compactions(snapshots) -> int:
        return sum(1 for s in snapshots if s.summary.get("floe.maintenance") == "compact")

    def raced_enough():
        # Compactions of both tables landed in between merges and appends, again and
        # again, while the workload ran.
        silver_snaps = list(silver_table(run, "public.items").snapshots())
        merges_after_first_compaction = 0
        seen = False
        for s in silver_snaps:
            if s.summary.get("floe.maintenance") == "compact":
                seen = True
            elif seen:
                merges_after_first_compaction += 1
        bronze_snaps = list(run.load("public.items").snapshots())
        # And at least one compaction met a merge that landed meanwhile.
        log = run.base / "compact-loop.log"
        conflicts = log.exists() and "changed while compacting" in log.read_text()
        return (compactions(silver_snaps) >= 4 and merges_after_first_compaction >= 4
                and compactions(bronze_snaps) >= 3 and conflicts and not errors)

    try:
        # A generous deadline: on a slow machine this only takes longer.
        run.wait_until(raced_enough, timeout=600,
                       what=lambda: ("4 Silver and 3 Bronze compactions amid merges and "
                                     f"appends, one of them replanned ({race_state(run, errors, results)})"))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    assert not errors, errors
    assert results["silver"] and results["compact"], results
    # A conflict makes a compaction plan again; one that lost every plan to the
    # merges gives up (nothing committed) and says so; it never fails otherwise.
    log = (run.base / "compact-loop.log").read_text()
    failures = [line for line in log.splitlines() if ": FAILED: " in line]
    assert all("compaction gave up after" in line for line in failures), failures
    assert results["compact"].count(0) >= 1, results

    wait_bronze(run, pg, "public.items", ["id"])
    run.stop()
    silver(run)
    maint(run, "compact")
    silver(run)

    # Bronze: every change is there once, its fold is the source.
    rows = run.rows(con, "public.items")
    run.check_commit_lsn("public.items", rows)
    state = fold(rows, ["id"])
    want = {(r["id"],): r for r in source_rows(pg, "public.items")}
    assert {k: {c: v for c, v in row.items() if c in want.get(k, row)}
            for k, row in state.items()} == want
    # Silver equals the source exactly.
    check_silver(run, pg, con, "public.items", ["id"])
    # Every Silver snapshot after the backfill carries the watermark, never lower
    # than its parent's (a compaction carries it forward).
    marks = [int(s.summary["floe.bronze-commit-lsn"])
             for s in silver_table(run, "public.items").snapshots()]
    assert marks == sorted(marks), marks
