"""The floe command line as a user meets it."""

import re
import subprocess


def run(floe_bin, *args):
    return subprocess.run([str(floe_bin), *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"})  # no LD_LIBRARY_PATH needed


def test_version_names_floe_and_arrow_parquet_24_or_newer(floe_bin):
    out = run(floe_bin, "--version")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^floe \d+\.\d+\.\d+$", out.stdout, re.M), out.stdout
    for lib in ("Arrow", "Parquet"):
        m = re.search(rf"^{lib} C\+\+ (\d+)\.(\d+)\.(\d+)", out.stdout, re.M)
        assert m, out.stdout
        assert int(m.group(1)) >= 24


def test_help_describes_floe(floe_bin):
    out = run(floe_bin, "--help")
    assert out.returncode == 0
    assert "Usage: floe" in out.stdout
    assert "PostgreSQL" in out.stdout and "Iceberg" in out.stdout


def test_an_unknown_argument_is_an_error(floe_bin):
    out = run(floe_bin, "no-such-command")
    assert out.returncode != 0
    assert "no-such-command" in out.stderr
