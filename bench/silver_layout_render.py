#!/usr/bin/env python3
"""Renders bench/silver_layout_bench.py's JSON (silver_layout.json) as the Markdown
section "Silver layout: bucket pruning, merge-on-read vs copy-on-write (issue 6)" of
BENCHMARKS.md.

    .venv/bin/python bench/silver_layout_render.py build/release/bench/results/silver_layout.json

prints the section on stdout; `render(doc)` returns it as a string.
"""

from __future__ import annotations

import statistics
import sys

from render_common import environment, main

MiB = 1024 * 1024


def _yes(ok) -> str:
    return "n/a" if ok is None else ("met" if ok else "**not met**")


def _n(x, fmt="{:,}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _pct(x, total) -> str:
    if x is None or not total:
        return "n/a"
    return f"{x / total:.1%}"


def _env(doc: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in doc["settings"].items())


def _load(x: dict) -> str:
    return f"{x.get('load_before')} -> {x.get('load_after')}"


def render(doc: dict) -> str:
    out: list[str] = []
    p = out.append
    m, v = doc["machine"], doc["versions"]
    p("## Silver layout: bucket pruning, merge-on-read vs copy-on-write (issue 6)\n")
    p(f"Measured by `bench/silver_layout_bench.py` on {doc['date']} "
      f"({doc.get('total_seconds', 0) / 60:.0f} minutes; load average (1, 5, 15 min) "
      f"{doc.get('loadavg_start')} at the start, {doc.get('loadavg_end')} at the end: the "
      "machine is shared, so wall times are inflated; CPU seconds (user + system of the "
      "process) are the figures to compare). Of that, setting up (loading the source, "
      "the initial copy and first Silver pass, generating and streaming every "
      f"increment) took {doc.get('setup_seconds', 0) / 60:.0f} min, the pruning merges "
      f"{doc.get('pruning_seconds', 0) / 60:.0f} min, the read-cost merges and scans "
      f"{doc.get('read_cost_seconds', 0) / 60:.0f} min.\n")
    p(f"* Command: `{_env(doc)} FLOE_BUILD_DIR={doc.get('build_dir')} .venv/bin/python "
      "bench/silver_layout_bench.py`")
    environment(doc, p, f"; PyIceberg {doc.get('versions', {}).get('pyiceberg')}")
    st = doc.get("start")
    if not st:
        return "\n".join(out) + "\n"
    n = doc["buckets"]
    rows = doc["settings"]["BENCH_LAYOUT_ROWS"]
    target = doc.get("target_file_size") or "the default (128 MiB)"
    p("")
    p(f"The starting Silver table: {rows:,} rows of the orders-like table in "
      f"{st['bytes']:,} bytes ({st['bytes'] / MiB:,.0f} MiB, {st['data_files']} data files), "
      f"**bucket({n}, order_id)** (`silver.target_file_size: {target}`), built by "
      f"`floe run` (initial copy, {doc['initial_copy']['seconds']:.0f} s) and a first "
      f"`floe silver` pass ({doc['backfill']['seconds']:.0f} s, CPU "
      f"{doc['backfill']['cpu_s']:.0f} s).\n")

    pr = doc.get("pruning")
    if pr:
        inc = doc["increments"]
        p("### Bucket pruning: 1%, 10% and 100% of the buckets\n")
        desc = "; ".join(
            f"{i['fraction']:.0%}: {i['buckets']} bucket{'s' if i['buckets'] > 1 else ''}, "
            f"{i['updates']:,} updates of {i['updated_keys']:,} keys, {i['deletes']:,} "
            f"deletes, {i['inserts']:,} inserts"
            for i in inc)
        p(f"Three increments of {inc[0]['changes']:,} changes each, in transactions of "
          f"1,000, whose keys all hash (Iceberg bucket({n}, order_id)) into a random "
          f"1%, 10% and 100% of the buckets ({desc}), are streamed into Bronze. For each "
          "write mode the Silver table is reset to the starting table and the three are "
          "merged in turn, one `floe silver pipeline.yaml` pass each (so the 10% merge "
          "starts from the table the 1% merge left). Bytes are the merge commit's "
          "snapshot summary (`floe.merge.*`: the Silver and Bronze bytes the merge read, "
          "the bytes it wrote), as a share of the Silver table's bytes before the merge "
          "(`total-files-size`: data and delete files); rchar / wchar are the process's "
          "/proc io counters (every read() and write(), page cache included). Each "
          "result was read with DuckDB and compared with the source (row count, key "
          "sum, amount sum). The full rewrite: `floe compact pipeline.yaml "
          "--silver-only` on the merge-on-read table after its 100% merge, where every "
          "bucket holds delete files, so every bucket is read and written whole.\n")
        p("| mode | buckets | wall s | CPU s | peak RSS MB | Silver bytes read (of table) "
          "| Bronze bytes read | bytes written (of table) | files read | row groups read "
          "/ skipped by stats / by bloom | rchar MB (of table) | wchar MB | equal to source |")
        p("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")

        def row(label, what, r):
            s = r.get("summary", {})
            tb = r["table_before"]["bytes"]
            written = s.get("floe.merge.bytes-written", s.get("added-files-size"))
            rg = "/".join(_n(s.get(k)) for k in ("floe.merge.row-groups-read",
                                                 "floe.merge.row-groups-skipped-stats",
                                                 "floe.merge.row-groups-skipped-bloom"))
            p(f"| {label} | {what} | {r['seconds']:.1f} | {r['cpu_s']:.1f} "
              f"| {r['peak_rss_mb']:.0f} "
              f"| {_n(s.get('floe.merge.silver-bytes-read'))} "
              f"({_pct(s.get('floe.merge.silver-bytes-read'), tb)}) "
              f"| {_n(s.get('floe.merge.bronze-bytes-read'))} "
              f"| {_n(written)} ({_pct(written, tb)}) "
              f"| {_n(s.get('floe.merge.files-read'))} | {rg} "
              f"| {_n(r.get('rchar') and r['rchar'] / MiB, '{:,.1f}')} "
              f"({_pct(r.get('rchar'), tb)}) "
              f"| {_n(r.get('wchar') and r['wchar'] / MiB, '{:,.1f}')} "
              f"| {r.get('equal_to_source')} |")
        for mode, merges in pr["modes"].items():
            for i, r in zip(inc, merges):
                row(mode, f"{i['fraction']:.0%} ({i['buckets']} of {n})", r)
        fr = pr.get("full_rewrite")
        if fr:
            row("full rewrite: floe compact", f"all {n}", fr)
        p("")
        if fr:
            s = fr.get("summary", {})
            p(f"The full rewrite replaced {_n(s.get('removed-files-size'))} bytes "
              f"({_n(s.get('deleted-data-files'))} data and "
              f"{_n(s.get('removed-delete-files'))} delete files) with "
              f"{_n(s.get('added-files-size'))} bytes in {_n(s.get('added-data-files'))} "
              f"data files; rchar {_n(fr.get('rchar'))}, wchar {_n(fr.get('wchar'))}.\n")
        mor = pr["modes"].get("merge-on-read")
        goals = []
        if mor:
            r1 = mor[0]
            read = r1.get("summary", {}).get("floe.merge.silver-bytes-read")
            tb = r1["table_before"]["bytes"]
            share = read / tb if read is not None and tb else None
            if read is not None:
                meas = f"{_pct(read, tb)} (Silver bytes read, floe.merge.silver-bytes-read)"
            else:  # a floe without the counters: the process's reads, Bronze included
                meas = (f"n/a: this floe writes no floe.merge.* counters; the process read "
                        f"{_pct(r1.get('rchar'), tb)} of it (rchar: Silver, Bronze and "
                        "metadata together)")
            goals.append((f"the {doc['increments'][0]['fraction']:.0%} merge (merge-on-read) "
                          "reads under 5% of the table's bytes", meas,
                          None if share is None else share < 0.05))
        for mode, merges in pr["modes"].items():
            worst = max(r["seconds"] for r in merges)
            goals.append((f"{doc['increments'][0]['changes']:,} changes merge in under "
                          f"60 s ({mode}, slowest of the three)",
                          f"{worst:.1f} s wall, CPU {max(r['cpu_s'] for r in merges):.1f} s",
                          worst < 60 if doc['increments'][0]['changes'] >= 1_000_000
                          else None))
        p("| goal (issue 6) | measured | |")
        p("|---|---|---|")
        for g, meas, ok in goals:
            p(f"| {g} | {meas} | {_yes(ok)} |")
        p("")

    rc = doc.get("read_cost")
    if rc:
        si = doc["small_increments"]["per_increment"]
        ref = rc.get("compacted_scan")
        p("### Read cost: merges without compaction, merge-on-read vs copy-on-write\n")
        p(f"Both modes start from the compacted table of the full rewrite above and merge "
          f"small increments of {si['changes']:,} changes each ({si['updates']:,} updates, "
          f"{si['deletes']:,} deletes, {si['inserts']:,} inserts, random keys of the whole "
          f"table: every bucket is touched), one `floe silver` pass per increment. A full "
          "scan is DuckDB's `SELECT count(*), sum(hash(<every column>)) FROM "
          f"iceberg_scan(...)` (position deletes applied), median of "
          f"{doc['settings']['BENCH_LAYOUT_SCAN_RUNS']} runs; the reference is the "
          "merge-on-read table after its last merge, compacted with `floe compact "
          "--silver-only`"
          + (f": {ref['seconds']:.2f} s ({', '.join(f'{x:.2f}' for x in ref['seconds_runs'])})"
             if ref else "") + ".\n")
        p("| mode | after merges | scan s (runs) | ratio to compacted | data files | delete "
          "files | position deletes |")
        p("|---|---:|---:|---:|---:|---:|---:|")
        for mode, res in rc["modes"].items():
            for sc in res["scans"]:
                t = sc["table"]
                p(f"| {mode} | {sc['after_merges']} | {sc['seconds']:.2f} "
                  f"({', '.join(f'{x:.2f}' for x in sc['seconds_runs'])}) "
                  f"| {_n(sc.get('ratio_to_compacted'), '{:.2f}')} | {_n(t['data_files'])} "
                  f"| {_n(t['delete_files'])} | {_n(t['position_deletes'])} |")
        if ref:
            t = ref["table"]
            p(f"| merge-on-read, compacted | | {ref['seconds']:.2f} "
              f"({', '.join(f'{x:.2f}' for x in ref['seconds_runs'])}) | 1.00 "
              f"| {_n(t['data_files'])} | {_n(t['delete_files'])} "
              f"| {_n(t['position_deletes'])} |")
        p("")
        p("Merge cost per small increment (median over the merges, and their sum):\n")
        p("| mode | merges | wall s (median) | CPU s (median) | CPU s (all merges) | bytes "
          "written per merge (median) | peak RSS MB |")
        p("|---|---:|---:|---:|---:|---:|---:|")
        per = {}
        for mode, res in rc["modes"].items():
            ms = res["merges"]
            if not ms:
                continue
            w = [x["summary"].get("floe.merge.bytes-written",
                                  x["summary"].get("added-files-size")) for x in ms]
            w = [x for x in w if x is not None]
            per[mode] = statistics.median(x["cpu_s"] for x in ms)
            p(f"| {mode} | {len(ms)} | {statistics.median(x['seconds'] for x in ms):.2f} "
              f"| {per[mode]:.2f} | {sum(x['cpu_s'] for x in ms):.1f} "
              f"| {_n(statistics.median(w) if w else None, '{:,.0f}')} "
              f"| {max(x['peak_rss_mb'] for x in ms):.0f} |")
        c = rc["modes"].get("merge-on-read", {}).get("compact")
        if c:
            p(f"| floe compact (merge-on-read, after its last merge) | 1 | {c['seconds']:.2f} "
              f"| {c['cpu_s']:.2f} | {c['cpu_s']:.1f} "
              f"| {_n(c['summary'].get('added-files-size'))} | {c['peak_rss_mb']:.0f} |")
        p("")
        mor = rc["modes"].get("merge-on-read")
        cow = rc["modes"].get("copy-on-write")
        if mor and cow and ref and "merge-on-read" in per and "copy-on-write" in per:
            last = mor["scans"][-1]
            extra = last["seconds"] - ref["seconds"]
            p(f"Trade-off: a copy-on-write merge of {si['changes']:,} random changes costs "
              f"{per['copy-on-write']:.2f} CPU s against {per['merge-on-read']:.2f} for "
              f"merge-on-read ({per['copy-on-write'] / max(per['merge-on-read'], 1e-9):.1f}x); "
              f"after {last['after_merges']} merge-on-read merges without compaction a full "
              f"scan takes {last['seconds']:.2f} s, {extra:+.2f} s "
              f"({last['seconds'] / ref['seconds']:.2f}x) against the compacted table.\n")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main(render))
