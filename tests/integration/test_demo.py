"""`make demo`'s job (scripts/demo), run as a user runs it, on disk and with
FLOE_DEMO_REST=1 (the warehouse on a local S3 server behind Apache Iceberg's REST
catalog server): it must end with exit code 0, Silver shown equal to the source and
`floe verify`'s verdict consistent. Each run in the test's own directory
(FLOE_DEMO_DIR), shortened to 15 s of `floe run`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("where", ["disk", "rest"])
def test_the_demo_ends_consistent(floe_bin, tmp_path, where):
    env = {**os.environ, "FLOE_BIN": str(floe_bin), "FLOE_DEMO_SECONDS": "15",
           "FLOE_DEMO_DIR": str(tmp_path / "demo"), "FLOE_DEMO_REST": "0",
           "FLOE_DEMO_S3": "0"}
    if where == "rest":
        env["FLOE_DEMO_REST"] = "1"
    proc = subprocess.run([str(REPO / "scripts" / "demo")], env=env, cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out[-4000:]
    assert "verdict: consistent" in out, out[-4000:]
    if where == "rest":
        assert "REST catalog server" in out and "s3://" in out, out[-4000:]
    # Nothing of it went to the repository's build/demo.
    assert (tmp_path / "demo" / "pipeline.yaml").exists()
