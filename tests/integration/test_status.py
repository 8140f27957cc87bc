"""`floe status`: the one-screen view of a service. Bronze is built by the real
pipeline (`floe run` on a real PostgreSQL, with a value that lands in the quarantine
and an audit message), Silver by one `floe silver`, then floe is stopped and every
field of `floe status --json` is checked against what PyIceberg reads from the
catalog and what Postgres says (pg_replication_slots, pg_current_wal_lsn()); the
text form must hold the same table lines. With the source unreachable (a copy of the
config pointing at a closed port) status still prints the catalog part and exits 3,
and the conninfo's password never appears. The helper is floerun.py."""

from __future__ import annotations

import datetime
import json
import socket
import subprocess
from pathlib import Path

from floerun import floe, lsn_int, wait_until  # noqa: F401

SERVICE = "svc"


def floe_cmd(run, *args: str, expect_rc: int | None = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(run.floe_bin), *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=run.base, timeout=120)
    with open(run.base / "status.log", "ab") as log:
        log.write(b"$ floe " + " ".join(args).encode() + b"\n" + proc.stdout + proc.stderr)
    if expect_rc is not None:
        assert proc.returncode == expect_rc, (
            f"floe {' '.join(args)} exited {proc.returncode}, expected {expect_rc}:\n"
            f"{proc.stdout.decode(errors='replace')}{proc.stderr.decode(errors='replace')}")
    return proc


def iso_ms(ms: int) -> str:
    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_iso(text: str) -> int:
    t = datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_status_matches_the_catalog_and_the_source(floe, pg):
    pg.execute("CREATE TABLE public.orders (id int PRIMARY KEY, note text)")
    pg.execute("CREATE TABLE public.prices (id int PRIMARY KEY, price numeric(10,2))")
    pg.execute("INSERT INTO public.orders SELECT g, 'n' || g FROM generate_series(1, 5) g")
    run = floe(service=SERVICE).start().wait_streaming()

    pg.execute("INSERT INTO public.prices VALUES (1, 1.50), (2, 'NaN'), (3, 2.25)")
    pg.execute("UPDATE public.orders SET note = 'changed' WHERE id = 1")
    pg.execute("DELETE FROM public.orders WHERE id = 2")
    pg.execute("SELECT pg_logical_emit_message(true, 'audit', "
               "'{\"source_table\": \"public.orders\", \"user\": 7}')")
    run.wait_until(lambda: run.count("public.orders") == 7 and
                   run.count("public.prices") == 3 and run.count("quarantine") == 1 and
                   run.count("pg_logical_messages") == 1,
                   what="Bronze, quarantine and audit rows")

    out = floe_cmd(run, "silver", str(run.config_path)).stdout
    # A change after the merge: Silver is then behind Bronze for orders only.
    pg.execute("INSERT INTO public.orders VALUES (10, 'late')")
    run.wait_until(lambda: run.count("public.orders") == 8, what="the late insert")
    run.stop()
    wait_until(lambda: not pg.execute(
        "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (run.slot,))[0][0],
        what="the slot to become inactive")

    doc = json.loads(floe_cmd(run, "status", str(run.config_path), "--json").stdout)
    [(cur_wal, restart, confirmed, wal_status, active)] = pg.execute(
        "SELECT pg_current_wal_lsn()::text, restart_lsn::text, confirmed_flush_lsn::text, "
        "wal_status, active FROM pg_replication_slots WHERE slot_name = %s", (run.slot,))
    cat = run.catalog()
    ns_props = cat.load_namespace_properties(("bronze", SERVICE))

    assert doc["service"] == SERVICE
    now_ms = parse_iso(doc["collected_at"])

    # The source and the slot, as Postgres says.
    assert doc["source"]["reachable"] is True and doc["source"]["error"] is None
    wal = lsn_int(doc["source"]["current_wal_lsn"])
    assert wal <= lsn_int(cur_wal)
    slot = doc["slot"]
    assert slot["name"] == run.slot and slot["exists"] is True
    assert slot["active"] is active is False
    assert slot["wal_status"] == wal_status
    assert lsn_int(slot["restart_lsn"]) == lsn_int(restart)
    assert lsn_int(slot["confirmed_flush_lsn"]) == lsn_int(confirmed)
    assert slot["retained_wal_bytes"] == wal - lsn_int(restart) >= 0
    assert slot["lag_bytes"] == wal - lsn_int(confirmed) >= 0

    # The pipeline state in the namespace properties.
    state = doc["state"]
    assert state["slot"] == ns_props["floe.slot"] == run.slot
    assert state["system_identifier"] == ns_props["floe.system-identifier"]
    assert state["system_identifier"] == str(pg.execute(
        "SELECT system_identifier FROM pg_control_system()")[0][0])
    assert lsn_int(state["confirmed_lsn"]) == int(ns_props["floe.confirmed-lsn"])
    assert state["clean_stop"] is (ns_props["floe.clean-stop"] == "true") is True

    # One entry per source table, with what PyIceberg reads.
    assert [t["source_table"] for t in doc["tables"]] == ["public.orders", "public.prices"]
    for t in doc["tables"]:
        name = t["source_table"]
        assert t["error"] is None, t
        bronze = cat.load_table(("bronze", SERVICE, *name.split(".")))
        snap = bronze.current_snapshot()
        b = t["bronze"]
        assert b["identifier"] == f"bronze.{SERVICE}.{name}"
        assert b["snapshot_id"] == snap.snapshot_id
        assert b["last_commit_at"] == iso_ms(snap.timestamp_ms)
        assert b["last_commit_age_seconds"] == (now_ms - snap.timestamp_ms) / 1000
        commit_lsn = int(snap.summary["floe.commit-lsn"])
        assert lsn_int(b["commit_lsn"]) == commit_lsn
        assert b["rows"] == int(snap.summary["total-records"]) == \
            bronze.scan().to_arrow().num_rows
        held = max(commit_lsn, int(ns_props["floe.confirmed-lsn"]))
        assert b["lag_bytes"] == max(0, wal - held)

        silver = cat.load_table(("silver", SERVICE, *name.split(".")))
        ssnap = silver.current_snapshot()
        s = t["silver"]
        assert s["identifier"] == f"silver.{SERVICE}.{name}" and s["exists"] is True
        watermark = int(ssnap.summary["floe.bronze-commit-lsn"])
        assert lsn_int(s["watermark_lsn"]) == watermark
        assert s["behind_bytes"] == max(0, commit_lsn - watermark)
        assert s["last_commit_at"] == iso_ms(ssnap.timestamp_ms)
        assert s["staleness_seconds"] == (now_ms - ssnap.timestamp_ms) / 1000
        assert s["rows"] == silver.scan().to_arrow().num_rows

    orders, prices = doc["tables"]
    assert orders["bronze"]["rows"] == 8 and prices["bronze"]["rows"] == 3
    assert orders["silver"]["rows"] == 4 and prices["silver"]["rows"] == 3
    assert orders["silver"]["behind_bytes"] > 0      # the late insert
    assert prices["silver"]["behind_bytes"] == 0
    assert orders["quarantined_rows"] == 0 and prices["quarantined_rows"] == 1

    # Quarantine and audit tables.
    q = cat.load_table(("bronze", SERVICE, "quarantine")).scan().to_arrow().to_pylist()
    assert [(r["source_table"], r["column_name"], r["reason"]) for r in q] == \
        [("public.prices", "price", "not_a_number")]
    assert doc["quarantine"]["identifier"] == f"bronze.{SERVICE}.quarantine"
    assert doc["quarantine"]["exists"] is True and doc["quarantine"]["rows"] == len(q)
    assert doc["quarantine"]["by_table"] == {"public.prices": 1}
    audit = cat.load_table(("bronze", SERVICE, "pg_logical_messages"))
    assert doc["audit"]["rows"] == audit.scan().to_arrow().num_rows == 1
    assert doc["audit"]["last_commit_at"] == iso_ms(audit.current_snapshot().timestamp_ms)

    # The text form: the header and one line per table with the same values.
    text = floe_cmd(run, "status", str(run.config_path)).stdout.decode()
    lines = text.splitlines()
    assert lines[0].startswith(f"service     {SERVICE} (at ")
    assert lines[2].startswith(f"slot        {run.slot}: inactive, wal_status {wal_status}")
    assert lines[4] == "quarantine  1 row"
    assert lines[5] == "audit       1 row"
    header = next(line for line in lines if line.startswith("BRONZE TABLE"))
    assert header.split() == ["BRONZE", "TABLE", "LAST", "COMMIT", "COMMIT", "LSN", "LAG",
                              "ROWS", "SILVER", "WATERMARK", "BEHIND", "STALENESS",
                              "QUARANTINED"]
    for t in doc["tables"]:
        [line] = [x for x in lines if x.startswith(t["bronze"]["identifier"] + " ")]
        fields = line.split()
        assert fields[4] == t["bronze"]["commit_lsn"], line
        assert t["bronze"]["last_commit_at"][:19].replace("T", " ") in line, line
        assert t["silver"]["watermark_lsn"] in line, line
        assert fields[-1] == str(t["quarantined_rows"]), line
        assert f"  {t['bronze']['rows']}  " in line, line

    # The source unreachable: a copy of the config at a closed port, with a password.
    secret = "Sup3r-Secret-Pw"
    config = run.config_path.read_text()
    conninfo = (f"host=127.0.0.1 port={closed_port()} dbname={pg.name} user=floe "
                f"password={secret} connect_timeout=5")
    old_line = next(x for x in config.splitlines() if x.strip().startswith("conninfo:"))
    down = run.base / "down.yaml"
    down.write_text(config.replace(old_line, f'  conninfo: "{conninfo}"'))
    proc = floe_cmd(run, "status", str(down), expect_rc=3)
    out_all = (proc.stdout + proc.stderr).decode()
    assert secret not in out_all
    text_down = proc.stdout.decode()
    assert "NOT REACHABLE" in text_down.splitlines()[1], text_down
    assert text_down.splitlines()[2] == f"slot        {run.slot}: unknown"
    for t in doc["tables"]:
        assert any(x.startswith(t["bronze"]["identifier"] + " ") for x in
                   text_down.splitlines()), text_down
    proc = floe_cmd(run, "status", str(down), "--json", expect_rc=3)
    assert secret not in (proc.stdout + proc.stderr).decode()
    down_doc = json.loads(proc.stdout)
    assert down_doc["source"]["reachable"] is False and down_doc["source"]["error"]
    assert down_doc["slot"]["exists"] is None
    assert [t["bronze"] | {"lag_bytes": None, "last_commit_age_seconds": None}
            for t in down_doc["tables"]] == \
        [t["bronze"] | {"lag_bytes": None, "last_commit_age_seconds": None}
         for t in doc["tables"]]
    assert down_doc["quarantine"]["by_table"] == {"public.prices": 1}
    assert down_doc["state"] == doc["state"]


def test_status_without_a_catalog_says_what_to_do(floe, pg):
    run = floe(service=SERVICE)  # never started: no catalog yet
    proc = floe_cmd(run, "status", str(run.config_path), expect_rc=1)
    assert b"does not exist yet: run `floe run` first" in proc.stderr
    assert proc.stdout == b""
