"""Operating `floe run`: secrets never reach logs, errors or metrics; a transaction
of millions of rows streams with a bounded peak RSS. Uses floerun.py. (The idle
source and its retained WAL: test_run_idle.py.)"""

from __future__ import annotations

import urllib.request

from floerun import floe  # noqa: F401

SECRET = "Sup3r-s3cret-pa55word"


class WithPassword:
    """The `pg` database, its conninfo carrying a password (the test cluster trusts
    local connections, so the password is accepted and ignored)."""

    def __init__(self, pg, port: int | None = None):
        self._pg = pg
        self.dsn = pg.dsn + f" password={SECRET}"
        if port is not None:
            self.dsn = self.dsn.replace(f"port={pg.cluster.port}", f"port={port}")

    def __getattr__(self, name):
        return getattr(self._pg, name)


def test_the_password_never_appears_in_logs_errors_or_metrics(floe_bin, pg):
    import subprocess

    pg.execute("CREATE TABLE public.s (id int PRIMARY KEY, v text)")
    pg.execute("INSERT INTO s VALUES (1, 'a')")
    from floerun import FloeRun

    good = FloeRun(floe_bin, WithPassword(pg), run_dir(pg, "good"))
    try:
        good.start().wait_streaming()
        pg.execute("INSERT INTO s VALUES (2, 'b')")
        good.wait_until(lambda: good.count("public.s") >= 2, 60, what="row 2")
        with urllib.request.urlopen(good.metrics_url() + "/metrics", timeout=10) as r:
            assert SECRET not in r.read().decode()
        good.stop()
    finally:
        good.kill()
    assert SECRET not in good.log_text()
    assert "floe_pub" in good.log_text()  # the log is not empty

    # connection failures (nothing listens on that port) are logged and retried
    bad = FloeRun(floe_bin, WithPassword(pg, port=1), run_dir(pg, "bad"),
                  slot="floe_bad")
    try:
        bad.start("--duration", "3s")
        assert bad.wait_exit(30) == 0
    finally:
        bad.kill()
    log = bad.log_text()
    assert "reconnecting" in log, log
    assert SECRET not in log

    out = subprocess.run([str(floe_bin), "validate", "--print", str(good.config_path)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert SECRET not in out.stdout + out.stderr and "<redacted>" in out.stdout


def run_dir(pg, name):
    import tempfile
    from pathlib import Path

    return Path(tempfile.mkdtemp(prefix=f"floe-{name}-"))


def peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_two_million_row_transaction_streams_with_bounded_memory(floe, pg, duckdb_con):
    pg.execute("CREATE TABLE public.big (id bigint PRIMARY KEY, a bigint, s text, "
               "n numeric(12,2), ts timestamptz)")
    run = floe()
    run.start().wait_streaming()
    pg.execute("INSERT INTO big SELECT g, g * 7, 'status-' || (g % 13), g * 1.25, "
               "now() FROM generate_series(1, 2000000) g")
    run.wait_until(lambda: run.count("public.big") >= 2_000_000, 240,
                   what="2M rows in Bronze", interval=1)
    rss_kb = peak_rss_kb(run.proc.pid)
    run.stop()
    assert rss_kb < 512 * 1024, f"peak RSS {rss_kb} kB"
    got = duckdb_con.execute(
        "SELECT count(*), count(DISTINCT id), sum(a), min(cdc_seq), max(cdc_seq), "
        "count(DISTINCT cdc_source_tx_id) FROM iceberg_scan(?)",
        [run.metadata_path("public.big")]).fetchone()
    assert got == (2_000_000, 2_000_000, 7 * 2_000_000 * 2_000_001 // 2, 0, 1_999_999, 1)


def test_control_characters_in_source_names_are_escaped_in_the_log(floe, pg):
    """A table name carrying a terminal escape sequence and a carriage return (names
    come from the source: untrusted) reaches floe's log as \\x1b and \\x0d, never as
    the bytes, which would recolour or overwrite what an operator reads."""
    name = "evil\x1b[31mred\rgone"
    pg.execute(f'CREATE TABLE "{name}" (id int PRIMARY KEY)')
    pg.execute(f'INSERT INTO "{name}" VALUES (1)')
    run = floe().start().wait_streaming()
    run.wait_until(lambda: "evil\\x1b[31mred\\x0dgone" in run.log_text(), 60,
                   what="the table's name, escaped, in the log")
    run.stop()
    raw = run.log_path.read_bytes()
    assert b"\x1b" not in raw and b"\r" not in raw
