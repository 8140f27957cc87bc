"""What the Markdown renders of the Silver benchmarks share: the lines naming the
machine, the floe build and the versions measured, the run's notes and failures, and
the command-line entry point (`<render>.py <results.json>` prints the section)."""

from __future__ import annotations

import json
import sys
from typing import Callable


def environment(doc: dict, p: Callable[[str], None], extra_versions: str = "") -> None:
    """Appends (through `p`) the Machine and floe lines, then the notes and failures."""
    m, v = doc["machine"], doc.get("versions", {})
    p(f"* Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB RAM, Linux "
      f"{m['kernel']}; local disk. PostgreSQL, floe and DuckDB share these cores.")
    p(f"* floe: {v.get('floe')} (`{doc.get('build_dir')}`, built "
      f"{doc.get('floe_binary_built')}), git {doc['git']['commit'][:12]} "
      f"({doc['git']['note']}); PostgreSQL: {v.get('postgres', '').split(',')[0]}; "
      f"DuckDB {v.get('duckdb')} (iceberg extension){extra_versions}.")
    for note in doc.get("notes", []):
        p(f"* Note: {note}.")
    if doc.get("failures"):
        p("* Runs that failed: " + "; ".join(
            f"{k}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else e}"
            for k, e in doc["failures"].items()) + ".")


def main(render: Callable[[dict], str]) -> int:
    """Prints render(the JSON document named by the first argument)."""
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    sys.stdout.write(render(doc))
    return 0
