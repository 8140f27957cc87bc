#!/usr/bin/env python3
"""Renders bench/peers_bench.py's JSON (peers.json) as the Markdown section
"Against Debezium, pg_recvlogical and Spark" of BENCHMARKS.md.

    .venv/bin/python bench/peers_render.py build/helper-bench/bench/results/peers.json

prints the section on stdout; `render(doc)` returns it as a string (for bench/run).
"""

from __future__ import annotations

import json
import sys

MiB = 1024 * 1024


def _yes(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _runs(xs, fmt="{:.2f}") -> str:
    return ", ".join(fmt.format(x) for x in xs)


def _f(x, fmt="{:,.2f}", none="n/a") -> str:
    return none if x is None else fmt.format(x)


def _env(doc: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in doc["settings"].items())


def render(doc: dict) -> str:
    out: list[str] = []
    p = out.append
    m, v, s = doc["machine"], doc["versions"], doc["settings"]
    goals: list[tuple[str, str, bool | None]] = []

    p("## Against Debezium, pg_recvlogical and Spark (issue 8)\n")
    p(f"Measured by `bench/peers_bench.py` on {doc['date']}, all peers side by side in one "
      "run on the same machine, each figure the median of the runs given. The machine "
      "is shared with other work: the load average (1, 5, 15 min) is recorded before "
      "and after every measurement in the JSON, and given per section below.\n")
    p(f"* Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB RAM, Linux "
      f"{m['kernel']}; local disk. Everything (PostgreSQL, floe, the peers) runs on "
      "these same cores.")
    built = doc.get("floe_binary_built")
    p(f"* floe: {v.get('floe')} (`{doc.get('floe_binary')}`"
      + (f", built {built}" if built else "") + "), git "
      + (f"{doc['floe_binary_commit']['commit'][:12]} ({doc['floe_binary_commit']['note']})."
         if doc.get("floe_binary_commit") else
         f"{doc['git']['commit'][:12]} ({doc['git']['note']})."))
    p(f"* PostgreSQL: {v.get('postgres')}; {v.get('pg_recvlogical')}; server settings: "
      + ", ".join(f"{k} {str(x).strip(chr(39))}" for k, x in doc["server_conf"].items())
      + ".")
    if "debezium" in v:
        p(f"* Debezium {v['debezium']} (debezium-embedded, debezium-connector-postgres, "
          f"debezium-api from Maven Central) on {v.get('java')}: "
          f"{doc['peer_settings']['debezium']}. The program is ours: "
          "`bench/peers/debezium` (built with `mvn -q -B package`).")
    if "pyspark" in v:
        p(f"* Spark: {doc['peer_settings']['spark']}; Iceberg runtime "
          f"{v.get('iceberg_spark_runtime')}, Java as above.")
    if doc.get("invocations"):
        p("* Commands (the parts were measured by separate invocations, merged with "
          "`BENCH_PEER_MERGE=1`, in this order):")
        invs, seen = [], set()
        for inv in doc["invocations"]:  # an earlier version listed some twice
            key = (inv["date"], inv["settings"]["BENCH_PEER_PARTS"])
            if key not in seen:
                seen.add(key)
                invs.append(inv)
        for i, inv in enumerate(invs):
            parts = set(inv["settings"]["BENCH_PEER_PARTS"].split(","))
            later = set()
            for nxt in invs[i + 1:]:
                later |= set(nxt["settings"]["BENCH_PEER_PARTS"].split(","))
            note = " (its figures were replaced by a later invocation)" if parts <= later else ""
            if inv.get("failures"):
                note += " (failed: " + "; ".join(
                    f"{k}: {str(e).splitlines()[0][:120]}" for k, e in inv["failures"].items()) + ")"
            p(f"  * {inv['date']}{note}: `{_env(inv)} FLOE_BUILD_DIR={doc.get('build_dir', '...')} "
              f".venv/bin/python bench/peers_bench.py` ({(inv.get('total_seconds') or 0) / 60:.0f} "
              f"minutes; load average {inv.get('loadavg_start')} at the start, "
              f"{inv.get('loadavg_end')} at the end)")
    else:
        p(f"* Command: `{_env(doc)} FLOE_BUILD_DIR={doc.get('build_dir', '...')} "
          f".venv/bin/python bench/peers_bench.py` ({doc.get('total_seconds', 0) / 60:.0f} "
          f"minutes for this run; load average {doc.get('loadavg_start')} at the start, "
          f"{doc.get('loadavg_end')} at the end).")
    if doc.get("failures"):
        p("* Parts that failed in this run: " + "; ".join(
            f"{k}: {str(e).splitlines()[0][:200]}" for k, e in doc["failures"].items()))
    p("")

    # -- streaming ---------------------------------------------------------------------
    for wl in doc.get("stream", []):
        lim, fr, dz = wl["pg_recvlogical"], wl["floe_run"], wl["debezium"]
        info = doc.get("part_info", {}).get("stream", {})
        p(f"### Streaming: {wl['title']}\n")
        p(f"{wl['changes']:,} changes in {wl['transactions']:,} transactions "
          f"({wl['wal_bytes'] / MiB:,.0f} MiB of WAL), generated before any consumer "
          "starts; each consumer and run drains it from its own `pgoutput` slot created "
          "before the backlog, runs interleaved (pg_recvlogical, floe, Debezium, then "
          "again). Seconds from process start until: pg_recvlogical reached the end "
          "LSN; floe's Bronze commit covers every change (`floe run`, checkpoint 1 s); "
          "Debezium wrote the last event to its file (JVM start-up included). CPU s: "
          "the consumer process's user+system time (Debezium: the whole JVM); walsender: "
          "the walsender process serving that slot; server: every PostgreSQL process. "
          f"Median of {len(lim['seconds_runs'])} runs; load average "
          f"{info.get('loadavg_before', '?')} before, {info.get('loadavg_after', '?')} "
          "after the streaming part.\n")
        p("| consumer | seconds (runs) | changes/s | ratio to pg_recvlogical | consumer "
          "CPU s per M changes | walsender CPU s per M | server CPU s per M | changes "
          "per consumer CPU-s | peak RSS MB |")
        p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for label, x in (("pg_recvlogical (limit)", lim), ("floe run -> Bronze", fr),
                         ("Debezium embedded -> JSON file", dz)):
            p(f"| {label} | {x['seconds']:.2f} ({_runs(x['seconds_runs'])}) "
              f"| {x['rows_per_s']:,.0f} | {x.get('ratio_to_pg_recvlogical', 1.0):.2f} "
              f"| {x['cpu_s_per_million']:.2f} | {x['walsender_cpu_s_per_million']:.2f} "
              f"| {x['server_cpu_s_per_million']:.2f} | {x['rows_per_cpu_s']:,.0f} "
              f"| {x['peak_rss_mb']:.0f} |")
        sp = fr["silver_pass"]
        p("")
        p(f"Bytes stored: Bronze {fr['bronze_bytes']:,} bytes of Parquet in "
          f"{fr['bronze_files']} files, **{fr['bronze_bytes_per_change']:.1f} bytes per "
          f"change**; after one `floe silver` pass ({sp['seconds']:.1f} s) Silver holds "
          f"{sp['silver_rows']:,} rows in {sp['silver_bytes']:,} bytes "
          f"({sp['silver_bytes_per_change']:.1f} bytes per change, "
          f"{_f(sp['silver_bytes_per_row'], '{:.1f}')} per row). Debezium's JSON lines: "
          f"{dz['json_bytes_per_change']:.0f} bytes per change.")
        ratio = fr["ratio_to_pg_recvlogical"]
        eff = wl["floe_vs_debezium_rows_per_cpu_s"]
        eff_w = wl["floe_vs_debezium_rows_per_cpu_s_with_walsender"]
        p(f"floe changes per CPU-second / Debezium's: **{eff:.1f}x** (consumer process "
          f"only), {eff_w:.1f}x counting each one's walsender too. floe's wall-clock speed "
          f"is {fr['rows_per_s'] / dz['rows_per_s']:.1f}x Debezium's.\n")
        goals.append((f"Streaming ({wl['name']}): floe >= 0.9 of pg_recvlogical",
                      f"{ratio:.2f}", ratio >= 0.9))
        goals.append((f"Streaming ({wl['name']}): floe >= 5x Debezium in changes per "
                       "CPU-second", f"{eff:.1f}x", eff >= 5))

    # -- snapshot ----------------------------------------------------------------------
    sn = doc.get("snapshot")
    if sn:
        info = doc.get("part_info", {}).get("snapshot", {})
        cp = sn["copy"]
        p(f"### Initial snapshot of a {sn['rows']:,}-row table\n")
        p(f"The orders-like table ({sn['table_bytes'] / MiB:,.0f} MiB, vacuumed and frozen, "
          "in the page cache after one untimed COPY). Limit: one COPY stream, "
          f"`{sn['copy_command']}`. floe's reader alone is `{doc['commands']['snapshot_reader']}` "
          "(exported snapshot, primary-key ranges, binary COPY decoded into Arrow batches "
          "as `floe run` reads them, an MD5 of every row, nothing written); `floe run` "
          "with `snapshot: initial` copies into Bronze with `source.snapshot_workers` 1 "
          "and 2 (Parquet files fsynced and committed), timed until Bronze's committed snapshot holds every row; Debezium "
          "runs `snapshot.mode=initial` until it wrote every row to its file. "
          f"Median of {sn['runs']} runs, interleaved; load average "
          f"{info.get('loadavg_before', '?')} before, {info.get('loadavg_after', '?')} "
          "after.\n")
        p("| reader | seconds (runs) | rows/s | ratio to COPY | reader CPU s | server CPU s "
          "| peak RSS MB |")
        p("|---|---:|---:|---:|---:|---:|---:|")
        p(f"| COPY via psql to /dev/null (limit) | {cp['seconds']:.2f} "
          f"({_runs(cp['seconds_runs'])}) | {cp['rows_per_s']:,.0f} | 1.00 "
          f"| {cp['cpu_s']:.2f} | {cp['server_cpu_s']:.2f} | {cp['peak_rss_mb']:.0f} |")
        for x in sn.get("floe_reader", []):
            p(f"| floe snapshot reader, {x['workers']} worker{'s' if x['workers'] > 1 else ''} "
              f"| {x['seconds']:.2f} ({_runs(x['seconds_runs'])}) | {x['rows_per_s']:,.0f} "
              f"| {x['ratio_to_copy']:.2f} | {x['cpu_s']:.2f} | {x['server_cpu_s']:.2f} "
              f"| {x['peak_rss_mb']:.0f} |")
        fr = sn["floe_run"]
        f1 = sn.get("floe_run_1")
        if f1:
            p(f"| floe run -> Bronze, 1 worker | {f1['seconds']:.2f} "
              f"({_runs(f1['seconds_runs'])}) | {f1['rows_per_s']:,.0f} "
              f"| {f1['ratio_to_copy']:.2f} | {f1['cpu_s']:.2f} | {f1['server_cpu_s']:.2f} "
              f"| {f1['peak_rss_mb']:.0f} |")
        p(f"| floe run -> Bronze, 2 workers | {fr['seconds']:.2f} ({_runs(fr['seconds_runs'])}) "
          f"| {fr['rows_per_s']:,.0f} | {fr['ratio_to_copy']:.2f} | {fr['cpu_s']:.2f} "
          f"| {fr['server_cpu_s']:.2f} | {fr['peak_rss_mb']:.0f} |")
        dz = sn["debezium"]
        p(f"| Debezium snapshot.mode=initial -> JSON file | {dz['seconds']:.2f} "
          f"({_runs(dz['seconds_runs'])}) | {dz['rows_per_s']:,.0f} | {dz['ratio_to_copy']:.2f} "
          f"| {dz['cpu_s']:.2f} | {dz['server_cpu_s']:.2f} | {dz['peak_rss_mb']:.0f} |")
        p("")
        p(f"Bronze holds the copy in {fr['bronze_bytes']:,} bytes "
          f"({fr['bronze_bytes_per_row']:.1f} bytes per row); Debezium's JSON: "
          f"{dz['json_bytes_per_row']:.0f} bytes per row. floe run is "
          f"{fr['rows_per_s'] / dz['rows_per_s']:.1f}x Debezium's speed and uses "
          f"{dz['cpu_s'] / fr['cpu_s']:.1f}x less CPU.\n")
        one = next((x for x in sn.get("floe_reader", []) if x["workers"] == 1), None)
        if one:
            goals.append(("Snapshot: floe, one worker >= 0.8 of one COPY stream",
                          f"{one['ratio_to_copy']:.2f} (reader alone)",
                          one["ratio_to_copy"] >= 0.8))
        if f1:
            goals.append(("Snapshot, end to end: floe run (1 worker) into Bronze vs COPY",
                          f"{f1['ratio_to_copy']:.2f}", f1["ratio_to_copy"] >= 0.8))
        goals.append(("Snapshot, end to end: floe run (2 workers) into Bronze vs COPY",
                      f"{fr['ratio_to_copy']:.2f}", None))

    # -- Silver vs Spark -----------------------------------------------------------------
    si = doc.get("silver")
    if si:
        info = doc.get("part_info", {}).get("silver", {})
        fs, ss = si["floe_silver"], si["spark"]
        p(f"### Silver merge: {si['changes']:,} changes into a {si['rows']:,}-row table\n")
        p(f"The starting Silver table: {si['rows']:,} rows ({si['start_bytes'] / MiB:,.0f} MiB "
          f"in {si['start_files']} files, bucket({si['buckets']}, order_id), sorted by key), "
          "built by `floe run` (initial copy) and a first `floe silver` pass. Then "
          f"{si['changes']:,} changes in {si['transactions']:,} transactions "
          f"({si.get('updates', 0):,} updates of {si.get('updated_keys', 0):,} existing keys, "
          f"{si.get('deletes', 0):,} deletes of other existing keys, {si.get('inserts', 0):,} "
          "inserts of new keys; 60/15/25% in every transaction) are streamed into Bronze. "
          "Both engines apply that same Bronze increment (`cdc_commit_lsn` above the "
          "watermark, latest change per key wins, `d` deletes) to identical starting "
          "tables: floe's own, and a copy made by Spark (Hadoop catalog) from the same "
          "data files with the same partitioning, sort order and merge-on-read settings. "
          "Spark reads the increment from the same Bronze table (its metadata file). "
          f"Median of {si['runs']} runs; before each run both tables are reset to the "
          "starting snapshot. floe: `floe silver pipeline.yaml`, process start to exit. "
          "Spark: the MERGE statement alone, in a session already started (the session "
          "start and the whole process are given too):\n")
        p(f"`{ss.get('statement', doc['commands']['spark_merge'])}`\n" if ss.get("statement")
          else f"`{doc['commands']['spark_merge']}`\n")
        p(f"Load average {info.get('loadavg_before', '?')} before, "
          f"{info.get('loadavg_after', '?')} after the Silver part.\n")
        p("| engine | seconds (runs) | changes/s | CPU s | CPU s per M changes | peak RSS MB |")
        p("|---|---:|---:|---:|---:|---:|")
        p(f"| floe silver (whole process) | {fs['seconds']:.2f} ({_runs(fs['seconds_runs'])}) "
          f"| {fs['rows_per_s']:,.0f} | {fs['cpu_s']:.2f} | {fs['cpu_s_per_million']:.1f} "
          f"| {fs['peak_rss_mb']:.0f} |")
        p(f"| Spark MERGE INTO (statement only) | {ss['seconds']:.2f} "
          f"({_runs(ss['seconds_runs'])}) | {ss['rows_per_s']:,.0f} | {ss['cpu_s']:.2f} "
          f"| {ss['cpu_s_per_million']:.1f} | {ss['peak_rss_mb']:.0f} |")
        p(f"| Spark, whole process (session start {ss['session_start_seconds']:.1f} s, "
          f"rollback, MERGE) | {ss['process_seconds']:.2f} ({_runs(ss['process_seconds_runs'])}) "
          "| | | | |")
        checks = si["checks"]
        c = checks[-1]
        p("")
        p(f"Same result: {'**yes**' if si['all_equal'] else '**NO**'} in "
          f"{sum(1 for x in checks if x['equal'])} of {len(checks)} runs (DuckDB "
          "`iceberg_scan` of both tables, position deletes applied: row count "
          f"{c['floe']['rows']:,} / {c['spark']['rows']:,} (source {c['source']['rows']:,}), "
          f"distinct keys {c['floe']['keys']:,} / {c['spark']['keys']:,}, sum of keys equal "
          f"to the source's: {c['floe']['key_sum'] == c['source']['key_sum']} / "
          f"{c['spark']['key_sum'] == c['source']['key_sum']}, checksum (sum of the hash "
          f"of every row's values) {c['floe']['checksum']} / {c['spark']['checksum']}).")
        fsum, ssum = fs.get("summary", {}), ss.get("summary", {})
        p(f"What each commit added: floe {fsum.get('added-data-files', '?')} data files, "
          f"{fsum.get('added-position-delete-files', '?')} position delete files "
          f"({fsum.get('added-position-deletes', '?')} deletes); Spark "
          f"{ssum.get('added-data-files', '?')} data files, "
          f"{ssum.get('added-position-delete-files', ssum.get('added-delete-files', '?'))} "
          f"position delete files ({ssum.get('added-position-deletes', '?')} deletes).\n")
        for old in doc.get("replaced", {}).get("silver", []):
            p(f"An earlier invocation of the same comparison (replaced by the one above, "
              f"kept for the record) measured floe silver {_runs(old['floe_silver']['seconds_runs'])} s "
              f"and Spark's MERGE {_runs(old['spark']['seconds_runs'])} s, results equal: "
              f"{old['all_equal']}.\n")
        speed = si["speedup"]
        goals.append(("Silver: floe >= 10x faster than Spark local (MERGE statement)",
                      f"{speed:.1f}x ({si['speedup_vs_spark_process']:.1f}x against "
                      "Spark's whole process)", speed >= 10 and si["all_equal"]))

    if goals:
        p("### Goals of issue 8\n")
        p("| goal | measured | |")
        p("|---|---|---|")
        for what, val, ok in goals:
            p(f"| {what} | {val} | {'(reported)' if ok is None else _yes(ok)} |")
        p("")
    return "\n".join(out) + "\n"


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "build/release/bench/results/peers.json"
    with open(path) as f:
        doc = json.load(f)
    sys.stdout.write(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
