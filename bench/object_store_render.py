#!/usr/bin/env python3
"""Renders bench/object_store_bench.py's JSON (object_store.json) as the Markdown
section "Bronze on S3 behind a REST catalog (issue 17)" of BENCHMARKS.md.

    .venv/bin/python bench/object_store_render.py build/release/bench/results/object_store.json
"""

from __future__ import annotations

from render_common import main


def _requests(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def render(doc: dict) -> str:
    lines: list[str] = []
    p = lines.append
    s = doc["settings"]
    local, remote = doc["backlog_local"], doc["backlog_s3rest"]
    p("## Bronze on S3 behind a REST catalog (issue 17)")
    p("")
    p(f"Measured {doc['date']} with `FLOE_BUILD_DIR=build/release .venv/bin/python "
      f"bench/object_store_bench.py` ({doc['versions']['floe']}, git {doc['git'][:12]}, "
      f"{doc['machine']['cores']} cores). The S3 server is moto and the catalog Apache "
      "Iceberg's own REST server, both local (no network latency: on real S3 each request "
      "costs tens of milliseconds more), sharing the cores with PostgreSQL and floe.")
    p("")
    p(f"**Backlog**: {s['rows']:,} single-row inserts in transactions of "
      f"{s['tx_rows']:,}, streamed by one `floe run` (its start included), "
      "checkpoint.interval 1s.")
    p("")
    p("| | seconds | rows/s | checkpoints | commit p50 ms | commit p99 ms |")
    p("|---|---:|---:|---:|---:|---:|")
    for name, r in (("local disk + SQLite", local), ("S3 + REST catalog", remote)):
        p(f"| {name} | {r['seconds']:.1f} | {r['rows_per_s']:,.0f} | {r['checkpoints']} | "
          f"{r['commit_p50_ms']:.0f} | {r['commit_p99_ms']:.0f} |")
    p("")
    p(f"S3 + REST reaches **{remote['rows_per_s'] / local['rows_per_s']:.2f}x** the rows/s "
      "of local disk on the same backlog.")
    p("")
    p(f"**Requests per checkpoint** (one table, one row every quarter second, "
      f"checkpoint.interval {s['interval']}, {s['seconds']:.0f} s): every S3 request moto "
      "logged (floe's and the catalog server's, which writes each metadata file) and "
      "every REST request, divided by the checkpoints in the window.")
    p("")
    p("| window | commits before | checkpoints | S3 requests / checkpoint | S3 by method "
      "| REST requests / checkpoint | commit p50 / p99 ms |")
    p("|---|---:|---:|---:|---|---:|---|")
    for w in doc["windows"]:
        p(f"| {w['window']} | {w['commits_before']} | {w['checkpoints']} | "
          f"{w['s3_per_checkpoint']:.1f} | {_requests(w['s3_requests'])} | "
          f"{w['rest_per_checkpoint']:.1f} | {w['commit_p50_ms']:.0f} / "
          f"{w['commit_p99_ms']:.0f} |")
    early, late = doc["windows"][0], doc["windows"][-1]
    p("")
    p(f"Goal: a handful, independent of history. Late / early: "
      f"{late['s3_per_checkpoint'] / max(early['s3_per_checkpoint'], 1e-9):.2f}x for S3 "
      "requests. A checkpoint is a PUT each of the data file, the manifest and the "
      "manifest list (floe) and of the metadata file (the catalog server); a HEAD "
      "before each of floe's two exclusive writes (the manifest and the manifest list "
      "must not replace an object); the catalog server's reads of the current metadata "
      "file; and two REST calls, the commit and the record of the confirmed position in "
      "the service's namespace properties. The parent's manifest list, which floe wrote "
      "itself one checkpoint before, is read from memory (before 0b0b984: a HEAD and a "
      "GET more, 12 requests). Every hundredth commit also merges the table's small "
      "manifests (Java's rule), reading each of them (a HEAD and a GET): a window "
      "holding that commit pays for it, spread over the window's checkpoints.")
    p("")
    if "merges" in doc:
        ms = doc["merges"]
        p(f"**Requests per Silver merge** (the same table: `floe silver` backfills Silver "
          "from its Bronze table, then merges "
          f"{s['merges']} increments of {s['merge_changes']:,} updates of random keys "
          f"and {s['merge_changes'] // 10:,} inserts each, merge-on-read, no compaction "
          "in between): every S3 request moto logged while the `floe silver` process "
          "ran, and its REST requests.")
        p("")
        p("| merge | seconds | S3 requests | S3 by method | REST requests | "
          "bytes read from Silver |")
        p("|---:|---:|---:|---|---:|---:|")
        for m in ms:
            name = "backfill" if m["merge"] == 0 else str(m["merge"])
            p(f"| {name} | {m['seconds']:.1f} | {m['s3_total']} | "
              f"{_requests(m['s3_requests'])} | {m['rest_total']} | "
              f"{m['silver_bytes_read']:,} |")
        first, last = ms[1], ms[-1]
        p("")
        p(f"Merge {last['merge']} / merge 1: "
          f"{last['s3_total'] / max(first['s3_total'], 1):.2f}x the S3 requests.")
        p("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main(render))
