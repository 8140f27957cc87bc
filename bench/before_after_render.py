#!/usr/bin/env python3
"""Renders bench/before_after.py's JSON files (before_after*.json) as the Markdown
section "Before and after the restructuring (issue 15)" of BENCHMARKS.md, one table
per file.

    .venv/bin/python bench/before_after_render.py build/release/bench/results/before_after*.json

prints the section on stdout; `render(docs)` returns it as a string.
"""

from __future__ import annotations

import json
import sys

STEPS = [
    ("stream", "`floe run`: the inserts streamed into Bronze"),
    ("backfill", "`floe silver`: a new Silver table from that Bronze"),
    ("stream_changes", "`floe run`: the changes streamed into Bronze"),
    ("merge", "`floe silver`: the changes merged into Silver"),
]


def render(docs: list[dict]) -> str:
    return "## Before and after the restructuring (issue 15)\n\n" + "\n".join(
        render_one(doc) for doc in docs)


def render_one(doc: dict) -> str:
    s, settings = doc["summary"], doc["settings"]
    env = " ".join(f"{k}={v}" for k, v in settings.items())
    lines = [
        f"### {doc['before']} against {doc['after']}",
        "",
        f"`{doc['command']}`, on {doc['date']} (load average {' '.join(doc['load_start'])} "
        f"before, {' '.join(doc['load_end'])} after). `before` is {doc['before']}, "
        f"`after` is {doc['after']}. One PostgreSQL, one WAL: every consumer drains it "
        "from a slot of its own, created before anything was written. "
        f"{settings['BENCH_BA_ROWS']:,} inserts, then {settings['BENCH_BA_CHANGES']:,} "
        f"changes (70% updates, 20% deletes, 10% inserts), in "
        f"{settings['BENCH_BA_TX_ROWS']:,}-row transactions; {settings['BENCH_BA_RUNS']} "
        "rounds, the order of the two binaries alternating; medians. Silver was checked "
        "against the source (rows and key sum) after every merge.",
        "",
        "| step | before s | after s | after / before | before CPU s | after CPU s "
        "| before peak RSS MB | after peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, title in STEPS:
        row = s[key]
        b, a = row["before"], row["after"]
        lines.append(
            f"| {title} | {b['seconds']:.2f} | {a['seconds']:.2f} "
            f"| {row['after_over_before']:.2f} | {b['cpu_s']:.2f} | {a['cpu_s']:.2f} "
            f"| {b['peak_rss_kb'] / 1024:.0f} | {a['peak_rss_kb'] / 1024:.0f} |")
    st = s["stream"]
    lines += [
        "",
        f"`pg_recvlogical` drained the inserts' WAL in {s['pg_recvlogical_seconds']:.2f} s "
        f"(median): floe run's ratio to it is {st['before']['ratio_to_pg_recvlogical']:.2f} "
        f"before and {st['after']['ratio_to_pg_recvlogical']:.2f} after. `floe run`'s "
        "time runs from its start (connect, slot checks, tables created) until Bronze "
        "holds every row, with `checkpoint.interval` 1s. Settings: "
        f"`{env}`.",
    ]
    if doc.get("note"):
        lines += ["", doc["note"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    docs = []
    for path in sys.argv[1:]:
        with open(path) as f:
            docs.append(json.load(f))
    print(render(docs), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
