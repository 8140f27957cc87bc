#!/usr/bin/env python3
"""Renders bench/silver_history_bench.py's JSON (silver_history.json) as the Markdown
section "Merge cost against history (issue 16)" of BENCHMARKS.md.

    .venv/bin/python bench/silver_history_render.py build/release/bench/results/silver_history.json

prints the section on stdout; `render(doc)` returns it as a string.
"""

from __future__ import annotations

import sys

from render_common import environment, main

MiB = 1024 * 1024
GOAL = 1.5  # issue 16: merges 1, 10 and 50 within 1.5x of each other


def _yes(ok) -> str:
    return "n/a" if ok is None else ("met" if ok else "**not met**")


def _n(x, fmt="{:,}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _env(doc: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in doc.get("explicit_env", {}).items())


def render(doc: dict) -> str:
    out: list[str] = []
    p = out.append
    m, v, s = doc["machine"], doc["versions"], doc["settings"]
    p("## Merge cost against history (issue 16)\n")
    p(f"Measured by `bench/silver_history_bench.py` on {doc['date']} "
      f"({doc.get('total_seconds', 0) / 60:.0f} minutes; load average (1, 5, 15 min) "
      f"{doc.get('loadavg_start')} at the start, {doc.get('loadavg_end')} at the end: the "
      "machine is shared, so wall times are inflated; CPU seconds (user + system of the "
      "`floe silver` process) are the figures to compare).\n")
    cmd = " ".join(x for x in (_env(doc), f"FLOE_BUILD_DIR={doc.get('build_dir')}",
                               ".venv/bin/python bench/silver_history_bench.py") if x)
    p(f"* Command: `{cmd}`")
    environment(doc, p)
    p("")
    wls = doc.get("workloads", {})
    first = next((w for w in wls.values() if w.get("backfill")), None)
    if first is None:
        return "\n".join(out) + "\n"
    bf = first["backfill"]
    p(f"Each workload starts from a Silver table of {s['BENCH_HIST_ROWS']:,} rows of an "
      "orders-like table (order_id bigint primary key, about 100 bytes a row), "
      f"backfilled by `floe silver` into bucket({bf.get('buckets')}, order_id) "
      f"(`silver.target_file_size: {s['BENCH_HIST_TARGET']}`: "
      f"{bf['table']['data_files']} data files, {bf['table']['bytes'] / MiB:,.0f} MiB). "
      f"Then {s['BENCH_HIST_MERGES']} increments of {s['BENCH_HIST_CHANGES']:,} changes "
      f"(transactions of {s['BENCH_HIST_TX_CHANGES']:,}: 60% updates and 15% deletes of "
      "distinct live keys, 25% inserts above the largest key) are streamed into Bronze by "
      "`floe run` and merged one `floe silver` pass each, with no compaction in between: "
      "*random* draws the updated and deleted keys from the whole table, *recent* (an "
      "orders table) 90% of them from the newest 5% of the keys. Each mode starts from "
      "the same backfilled table (the SQLite catalog's entries are pointed back at it and "
      "at Bronze after each increment in turn). Merges "
      f"{', '.join(s['BENCH_HIST_POINTS'].split(','))} are run "
      f"{s['BENCH_HIST_RUNS']} times each from the same table (median); every pass runs "
      "alone, forked and exec'ed by a fresh small interpreter that reports wait4's wall "
      "time, CPU and peak RSS. After merges "
      f"{', '.join(s['BENCH_HIST_CHECK_AFTER'].split(','))} Silver is read back with "
      "DuckDB (position deletes applied) and compared with the source at that point: "
      "row count, distinct keys and a checksum of every column.\n")

    p("| workload | mode | merge | CPU s | wall s | CPU / merge 1 | wall / merge 1 "
      "| peak RSS MiB | Silver files read | data files | delete files | equal to source |")
    p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    goals = []
    for wname, wd in wls.items():
        for mode, md in wd.get("modes", {}).items():
            for k, pt in sorted(md["points"].items(), key=lambda kv: int(kv[0])):
                p(f"| {wname} | {mode} | {k} | {pt['cpu_s']:.2f} | {pt['seconds']:.2f} "
                  f"| {pt['cpu_ratio']:.2f} | {pt['wall_ratio']:.2f} "
                  f"| {pt['peak_rss_bytes'] / MiB:,.0f} | {_n(pt.get('files_read'))} "
                  f"| {_n(pt['data_files'])} | {_n(pt['delete_files'])} "
                  f"| {_n(pt.get('equal_to_source'), '{}')} |")
            goals.append((wname, mode, md))
    p("")
    for wname, mode, md in goals:
        every = [m for m in md["merges"]
                 if m["k"] == 1 or m["k"] % 10 == 0 or m is md["merges"][-1]]
        p(f"* {wname}, {mode}: CPU s of merges "
          + ", ".join(f"{m['k']}: {m['cpu_s']:.2f}" for m in every)
          + f" (merges {s['BENCH_HIST_POINTS'].replace(',', ', ')}: the medians above, the "
          f"others one run each; data / delete files after the last: "
          f"{_n(md['merges'][-1]['table']['data_files'])} / "
          f"{_n(md['merges'][-1]['table']['delete_files'])}).")
    p("")
    p("*Silver files read*: `floe.merge.files-read` of the merge's snapshot summary (data "
      "files whose footer was opened and row groups examined). *data files*, *delete "
      "files*: the Silver table's live files after the merge (`total-data-files`, "
      "`total-delete-files`).\n")
    p("| goal (issue 16) | measured | |")
    p("|---|---|---|")
    for wname, mode, md in goals:
        pts = sorted(md["points"].items(), key=lambda kv: int(kv[0]))
        ks = "/".join(k for k, _ in pts)
        costs = ", ".join(f"{pt['cpu_s']:.2f}" for _, pt in pts)
        p(f"| merges {ks} within {GOAL}x of each other: {wname}, {mode} "
          f"| CPU s {costs}: spread {md['cpu_spread']:.2f}x (wall {md['wall_spread']:.2f}x) "
          f"| {_yes(md['cpu_spread'] <= GOAL)} |")
    p("")
    worst = max(goals, key=lambda g: g[2]["cpu_spread"])
    met = sum(1 for g in goals if g[2]["cpu_spread"] <= GOAL)
    wp = sorted(worst[2]["points"].items(), key=lambda kv: int(kv[0]))
    p(f"Summary: {met} of {len(goals)} series within the {GOAL}x goal; the worst is "
      f"{worst[1]} with the {worst[0]} workload, merge {wp[-1][0]} at "
      f"{wp[-1][1]['cpu_ratio']:.1f}x the CPU of merge {wp[0][0]} (spread "
      f"{worst[2]['cpu_spread']:.1f}x against the goal's {GOAL}x).\n")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main(render))
