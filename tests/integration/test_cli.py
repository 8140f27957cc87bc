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


def test_validate_accepts_a_good_file_and_prints_it_without_secrets(floe_bin, tmp_path):
    cfg = tmp_path / "pipeline.yaml"
    cfg.write_text(
        "source:\n"
        "  conninfo: host=db dbname=shop user=floe password=${FLOE_TEST_PW}\n"
        "  publication: {name: cdc, create: all_tables}\n"
        "warehouse: wh\n")
    out = subprocess.run([str(floe_bin), "validate", "--print", str(cfg)],
                         capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "FLOE_TEST_PW": "hunter2-secret"})
    assert out.returncode == 0, out.stderr
    assert f"{cfg}: OK (service shop, slot floe_shop, publication cdc)" in out.stdout
    assert f"warehouse: file://{tmp_path}/wh" in out.stdout
    assert f"path: {tmp_path}/wh/catalog.db" in out.stdout
    assert "hunter2" not in out.stdout + out.stderr
    assert "conninfo: <redacted>" in out.stdout


def test_validate_reports_every_error_with_its_position(floe_bin, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(
        "servce: x\n"
        "source:\n"
        "  conninfo: host=db dbname=d password=${FLOE_UNSET_VAR}\n"
        "  slot: Bad-Slot\n"
        "warehouse: /w\n"
        "checkpoint: {interval: soon}\n")
    out = run(floe_bin, "validate", str(cfg))
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert f"{cfg}:1:1: error: unknown key `servce` at the top level" in lines
    assert "  hint: did you mean `service`?" in lines
    assert any(l.startswith(f"{cfg}:3:13: error:") and "FLOE_UNSET_VAR" in l for l in lines)
    assert any(l.startswith(f"{cfg}:4:9: error: slot name `Bad-Slot`") for l in lines)
    assert any(l.startswith(f"{cfg}:6:24: error:") for l in lines), out.stderr
    assert lines[-1] == f"{cfg}: 4 errors"


def test_validate_on_a_missing_file_says_so(floe_bin, tmp_path):
    out = run(floe_bin, "validate", str(tmp_path / "nope.yaml"))
    assert out.returncode == 1
    assert "cannot read the configuration file" in out.stderr
