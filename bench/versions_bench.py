#!/usr/bin/env python3
"""The streaming benchmark on each PostgreSQL version (issue 18): bench/stream_bench.py's
bulk and mixed workloads run once per version of BENCH_PG_VERSIONS (15,16,17,18), each
on a throwaway server of that version, with floe measured against that version's
pg_recvlogical in the same run (18's for 17, whose binaries carry no client programs).

    .venv/bin/python bench/versions_bench.py > versions.json
    .venv/bin/python bench/versions_bench.py --render versions.json

The first prints one JSON document (each version's stream_bench document under
"versions"), progress on stderr; the second prints the Markdown section of
BENCHMARKS.md. stream_bench's BENCH_STREAM_* settings apply (defaults here:
BENCH_STREAM_ROWS=500000, BENCH_STREAM_MIXED_TX=100000, BENCH_STREAM_RUNS=3).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = {"BENCH_STREAM_ROWS": "500000", "BENCH_STREAM_MIXED_TX": "100000",
            "BENCH_STREAM_RUNS": "3", "BENCH_PARTS": "bulk,mixed"}


def measure() -> dict:
    versions = [v for v in os.environ.get("BENCH_PG_VERSIONS", "15,16,17,18").split(",")
                if v]
    env = dict(os.environ)
    for k, v in DEFAULTS.items():
        env.setdefault(k, v)
    env["BENCH_PARTS"] = "bulk,mixed"
    out = {"date": time.strftime("%Y-%m-%d"), "machine": platform.node(),
           "cores": os.cpu_count(), "build_dir": env.get("FLOE_BUILD_DIR",
                                                        "build/release"),
           "settings": {k: env[k] for k in DEFAULTS}, "versions": {},
           "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    for v in versions:
        print(f"versions_bench: PostgreSQL {v}", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / "stream_bench.py")],
                              env=dict(env, FLOE_PG_VERSION=v), stdout=subprocess.PIPE,
                              text=True, check=True)
        out["versions"][v] = json.loads(proc.stdout)
    out["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def render(doc: dict) -> str:
    s = doc["settings"]
    env = " ".join(f"{k}={v}" for k, v in s.items() if k != "BENCH_PARTS")
    lines = [
        "## Streaming on each PostgreSQL version (issue 18)\n",
        f"Measured by `bench/versions_bench.py` on {doc['date']} ({doc['cores']} cores; "
        f"load average {doc['loadavg_start']} at the start, {doc['loadavg_end']} at the "
        "end). Each version's own server and its own `pg_recvlogical` (18's for 17, "
        "whose binaries have no client programs) drain the same WAL from slots made "
        "before it was written; the ratio is floe's rate over pg_recvlogical's in the "
        "same run (median of the runs).\n",
        f"* Command: `{env} FLOE_BUILD_DIR={doc['build_dir']} .venv/bin/python "
        "bench/versions_bench.py` (`--render` prints this section)\n",
        "| PostgreSQL | pgoutput protocol | workload | pg_recvlogical | floe decode | "
        "ratio | floe run (to committed Bronze) | ratio |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for v, d in doc["versions"].items():
        for w in d["stream"]:
            lim, dec, run = w["pg_recvlogical"], w["floe_decode"], w["floe_run"]
            lines.append(
                f"| {d['postgres']} | {w['proto_version']} | {w['name']}: {w['title']} | "
                f"{lim['rows_per_s']:,.0f}/s | {dec['rows_per_s']:,.0f}/s | "
                f"{dec['ratio']:.2f} | {run['rows_per_s']:,.0f}/s | {run['ratio']:.2f} |")
    lines += [
        "",
        "What floe asks for follows the server: pgoutput protocol 3 on 15 and 4 from 16 "
        "(the `pgoutput protocol` column), with `streaming = on` on every version. "
        "`streaming = parallel` (16+) is not asked for: it lets a subscriber apply "
        "streamed transactions with parallel workers, and the only thing it changes in "
        "what the server sends is that a Stream Abort message carries the abort's LSN "
        "and time (`pgoutput_stream_abort`'s `write_abort_info`); floe applies nothing "
        "in parallel and drops an aborted streamed transaction whole, so the bytes it "
        "would read, and its rate, are the same. Streaming itself happens only for "
        "transactions larger than `logical_decoding_work_mem` (64 MB), which neither "
        "workload above has.",
        "",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        print(render(json.loads(Path(sys.argv[2]).read_text())), end="")
        return 0
    if len(sys.argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(measure(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
