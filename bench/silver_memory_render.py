#!/usr/bin/env python3
"""Renders bench/silver_memory_bench.py's JSON (silver_memory.json) as the Markdown
section "Silver within its memory budget (issue 16)" of BENCHMARKS.md.

    .venv/bin/python bench/silver_memory_render.py build/release/bench/results/silver_memory.json

prints the section on stdout; `render(doc)` returns it as a string.
"""

from __future__ import annotations

import math
import sys

from render_common import environment, main

MiB = 1024 * 1024


def _yes(ok) -> str:
    return "n/a" if ok is None else ("met" if ok else "**not met**")


def _n(x, fmt="{:,}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _mib(x) -> str:
    return "n/a" if x is None else f"{x / MiB:,.0f}"


def _count(n: int) -> str:
    """1000000 -> 1M, 200000 -> 0.2M, 50000 -> 50k."""
    if n >= 100_000:
        return f"{n / 1e6:.3g}M"
    if n >= 1000:
        return f"{n / 1e3:.3g}k"
    return str(n)


def _env(doc: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in doc.get("explicit_env", {}).items())


def _exponent(a: dict, b: dict, key: str, size: str) -> float | None:
    """The growth exponent of `key` from run a to run b: 1 is linear in the size."""
    if not a or not b or a[size] == b[size] or a[key] <= 0 or b[key] <= 0:
        return None
    return math.log(b[key] / a[key]) / math.log(b[size] / a[size])


def render(doc: dict) -> str:
    out: list[str] = []
    p = out.append
    m, v = doc["machine"], doc["versions"]
    limit = doc["limit"]
    p("## Silver within its memory budget (issue 16)\n")
    p(f"Measured by `bench/silver_memory_bench.py` on {doc['date']} "
      f"({doc.get('total_seconds', 0) / 60:.0f} minutes, of which setting up, i.e. loading "
      "the source, the initial copies and streaming the changes into Bronze, took "
      f"{doc.get('setup_seconds', 0) / 60:.0f}; load average (1, 5, 15 min) "
      f"{doc.get('loadavg_start')} at the start, {doc.get('loadavg_end')} at the end: the "
      "machine is shared, so wall times are inflated and CPU seconds are the steadier "
      "figure).\n")
    cmd = " ".join(x for x in (_env(doc), f"FLOE_BUILD_DIR={doc.get('build_dir')}",
                               ".venv/bin/python bench/silver_memory_bench.py") if x)
    p(f"* Command: `{cmd}`")
    sizes = doc["sizes"]
    scale = doc["settings"].get("BENCH_MEM_SCALE", "1")
    if str(scale) not in ("1", "1.0"):
        p(f"* Scale: BENCH_MEM_SCALE={scale} of the issue's sizes: a table of "
          f"{sizes['rows']:,} rows, increments of "
          f"{', '.join(f'{x:,}' for x in sizes['merges'])} changes, backfills of "
          f"{', '.join(f'{x:,}' for x in sizes['backfills'])} rows.")
    environment(doc, p)
    st = doc.get("start")
    if not st:
        return "\n".join(out) + "\n"
    inc = doc.get("increments", [])
    src_bytes = doc.get("source_bytes", {}).get("orders")
    p("")
    p(f"The merges go into a Silver table of {st['records']:,} rows of an orders-like "
      "table (order_id bigint primary key, customer_id bigint, status text, amount "
      "numeric(12,2), created_at timestamptz, note text: about 100 bytes a row"
      + (f", {src_bytes / MiB:,.0f} MiB in PostgreSQL" if src_bytes else "")
      + f"), {st['bytes'] / MiB:,.0f} MiB of Parquet in {st['data_files']} data files, "
      f"bucket({st['buckets']}, order_id) (the default `target_file_size`), backfilled "
      "from a Bronze table that `floe run` filled with its initial copy. One stream of "
      f"changes was then generated in transactions of "
      f"{doc['settings']['BENCH_MEM_TX_CHANGES']:,} changes (60% updates, a quarter of "
      "them among the newest 1% of the keys, so some keys change several times; 20% "
      "deletes of the oldest keys; 20% inserts of new keys: the table keeps its size) "
      "and streamed into Bronze by `floe run`; the merge of size k merges the first k "
      "changes of that stream (Bronze rows above the starting table's watermark: "
      + ", ".join(f"{i['changes']:,}" for i in inc)
      + (f"; Bronze held {inc[-1]['bronze_bytes'] / MiB:,.0f} MiB of Parquet in all"
         if inc else "")
      + "). Before every merge the SQLite catalog's entries of the Silver and Bronze "
      "tables are pointed back at the starting Silver table and at Bronze as of that "
      "cut, so every merge starts from the very same table. Each backfill table "
      "has its own service (a pass shares `silver.memory_limit` among the tables it "
      "merges at once, so each measured `floe silver` merges exactly one table).\n")
    p("Each `floe silver pipeline.yaml` runs alone, forked and exec'ed by a small fresh "
      "Python interpreter that reports wait4's figures: wall time (fork to exit), CPU "
      "(user + system, every thread) and peak RSS (`ru_maxrss`, the kernel's high-water "
      "mark of the process). Slices and spilled bytes (the increment's Arrow bytes) are "
      "from floe's log line (`... bytes of changes spilled and merged in N slices`; 1 "
      "slice: nothing was spilled). Every result was read back with DuckDB (`iceberg_scan`, "
      "position deletes applied) and compared with the source as of its cut: row count, "
      "distinct keys and a checksum of every column (the sum of the first 60 bits of "
      "each row's md5, computed alike by PostgreSQL and DuckDB).\n")

    budget = [r for r in doc["merges"] if r.get("role") == "budget"]
    unsliced = {r["changes"]: r for r in doc["merges"] if r.get("role") == "unsliced"}
    small = [r for r in doc["merges"] if r.get("role") == "small"]
    p("| operation | size | memory_limit | slices | spilled MiB | wall s | CPU s "
      "| peak RSS MiB | RSS / limit | wall s per M | CPU s per M | sliced / unsliced wall "
      "| equal to source |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")

    def row(op, size, unit, r, ratio=None, label=None):
        per = size / 1e6
        p(f"| {op} | {_count(label or size)} {unit} ({size:,}) | {r['limit']} | {r['slices']} "
          f"| {_mib(r.get('spilled_bytes'))} | {r['seconds']:.1f} | {r['cpu_s']:.1f} "
          f"| {r['peak_rss_bytes'] / MiB:,.0f} | {r['rss_over_limit']:.2f} "
          f"| {r['seconds'] / per:.1f} | {r['cpu_s'] / per:.1f} "
          f"| {_n(ratio, '{:.2f}')} | {r.get('equal_to_source')} |")
    for r in doc["backfills"]:
        row("backfill", r["rows"], "rows", r)
    for r in budget:
        u = unsliced.get(r["changes"])
        row("merge", r["changes"], "changes", r, u and r["seconds"] / u["seconds"],
            r.get("target_changes"))
    for r in small:
        u = unsliced.get(r["changes"])
        row("merge, small budget", r["changes"], "changes", r,
            u and r["seconds"] / u["seconds"], r.get("target_changes"))
    p("")
    p("*size*: the increment's nominal size, and in brackets the Bronze rows it holds "
      "(an update drawn twice in one transaction is one change). "
      "*wall s per M* and *CPU s per M*: per million changes merged (per million rows "
      "for a backfill). *sliced / unsliced wall*: the run's wall time over the same merge's "
      f"with `memory_limit: {doc.get('unsliced_limit')}` (nothing spilled), below.\n")

    if unsliced:
        p(f"The same merges with `memory_limit: {doc.get('unsliced_limit')}`, so that nothing "
          "is spilled or sliced, and what each run read and wrote (floe's log line and "
          "the spill directory's size on disk, sampled every 2 s):\n")
    p("| merge | memory_limit | slices | wall s | CPU s | peak RSS MiB | Silver files "
      "scanned | Silver MiB read | Bronze MiB read | MiB written | data files written "
      "| spill on disk MiB |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(doc["merges"], key=lambda r: (r["changes"], r["limit_bytes"])):
        lg = r.get("log", {})
        p(f"| {_count(r.get('target_changes') or r['changes'])} changes | {r['limit']} "
          f"| {r['slices']} "
          f"| {r['seconds']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_bytes'] / MiB:,.0f} "
          f"| {_n(lg.get('files_scanned'))} | {_mib(lg.get('silver_bytes_read'))} "
          f"| {_mib(lg.get('bronze_bytes_read'))} | {_mib(lg.get('bytes_written'))} "
          f"| {_n(lg.get('data_files'))} | {_mib(r.get('spill_disk_peak_bytes'))} |")
    for r in doc["backfills"]:
        lg = r.get("log", {})
        p(f"| backfill {_count(r['rows'])} rows | {r['limit']} | {r['slices']} "
          f"| {r['seconds']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_bytes'] / MiB:,.0f} "
          f"| {_n(lg.get('files_scanned'))} | {_mib(lg.get('silver_bytes_read'))} "
          f"| {_mib(lg.get('bronze_bytes_read'))} | {_mib(lg.get('bytes_written'))} "
          f"| {_n(lg.get('data_files'))} | {_mib(r.get('spill_disk_peak_bytes'))} |")
    p("")

    # Goals.
    goals = []
    for r in doc["backfills"] + budget + small:
        what = (f"backfill of {r['rows']:,} rows" if r["kind"] == "backfill"
                else f"merge of {r['changes']:,} changes")
        over = r["peak_rss_bytes"] - r["limit_bytes"]
        meas = (f"{r['peak_rss_bytes'] / MiB:,.0f} MiB = {r['rss_over_limit']:.2f} of "
                f"{r['limit']}" + (f" ({over / MiB:,.0f} MiB over)" if over > 0 else ""))
        goals.append((f"peak RSS under `memory_limit`: {what} at {r['limit']}", meas,
                      r["peak_rss_bytes"] <= r["limit_bytes"]))
    for a, b in zip(budget, budget[1:]):
        ew = _exponent(a, b, "seconds", "changes")
        ec = _exponent(a, b, "cpu_s", "changes")
        if ew is None:
            continue
        goals.append((f"time no faster than linear: "
                      f"{_count(a.get('target_changes') or a['changes'])} -> "
                      f"{_count(b.get('target_changes') or b['changes'])} changes at {limit}",
                      f"{b['changes'] / a['changes']:.1f}x the changes took "
                      f"{b['seconds'] / a['seconds']:.1f}x the wall time (exponent "
                      f"{ew:.2f}), {b['cpu_s'] / a['cpu_s']:.1f}x the CPU (exponent "
                      f"{ec:.2f})", ew <= 1.0))
    verifies = doc.get("verifies") or []
    if verifies:
        p("`floe verify` of each backfilled table (its whole Bronze history folded, Silver "
          "and the source read, everything compared; nothing changed the table since "
          "its copy, so it must report it consistent):\n")
        p("| table | rows | memory_limit | wall s | CPU s | peak RSS MiB | RSS / limit | "
          "consistent |")
        p("|---|---:|---:|---:|---:|---:|---:|---|")
        for v in verifies:
            p(f"| {v['table']} | {v['rows']:,} | {v['limit']} | "
              f"{_n(v.get('seconds'), '{:.1f}')} | {_n(v.get('cpu_s'), '{:.1f}')} | "
              f"{_mib(v.get('peak_rss_bytes'))} | {_n(v.get('rss_over_limit'), '{:.2f}')} | "
              f"{v['consistent']} |")
            if v.get("peak_rss_bytes") is not None:
                goals.append((f"`floe verify` of {v['rows']:,} rows within "
                              f"`memory_limit` {v['limit']}",
                              f"{_mib(v['peak_rss_bytes'])} MiB = "
                              f"{v['rss_over_limit']:.2f} of {v['limit']}, consistent "
                              f"{v['consistent']}",
                              v['rss_over_limit'] <= 1.0 and v['consistent']))
        p("")
    if goals:
        p("| goal (issue 16) | measured | |")
        p("|---|---|---|")
        for g, meas, ok in goals:
            p(f"| {g} | {meas} | {_yes(ok)} |")
        p("")
        p("An exponent of 1 is time proportional to the increment; below 1, the fixed "
          "part of a merge (reading the Silver table's key columns, metadata) is spread "
          "over more changes.\n")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main(render))
