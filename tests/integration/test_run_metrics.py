"""`floe run`'s /metrics, /healthz and /readyz, scraped over HTTP and parsed with the
reference Prometheus text-format parser (prometheus_client): events per table match
the workload, lag rises while floe is frozen (SIGSTOP) and falls after SIGCONT,
restarts are counted after a crash, quarantined values are counted, the slot's WAL
metrics are there. Uses floerun.py."""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from floerun import floe  # noqa: F401


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of one scrape."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples, name, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_metrics_follow_the_workload(floe, pg):
    pg.execute("CREATE TABLE public.orders (id int PRIMARY KEY, amount numeric(10,2))")
    pg.execute("CREATE TABLE public.notes (id int PRIMARY KEY, body text)")
    pg.execute("INSERT INTO orders SELECT g, g FROM generate_series(1, 10) g")
    run = floe()
    run.start()
    url = run.metrics_url()
    run.wait_until(lambda: http_status(url + "/readyz") == 200, 60, what="/readyz 200")
    assert http_status(url + "/healthz") == 200
    assert http_status(url + "/nothing-here") == 404

    pg.execute("INSERT INTO orders SELECT g, g FROM generate_series(11, 30) g")
    pg.execute("UPDATE orders SET amount = amount + 1 WHERE id <= 5")
    pg.execute("DELETE FROM orders WHERE id > 27")
    pg.execute("INSERT INTO notes VALUES (1, 'a'), (2, 'b')")
    pg.execute("INSERT INTO orders VALUES (100, 'NaN')")  # quarantined amount
    run.wait_until(lambda: run.count("public.orders") >= 10 + 20 + 5 + 3 + 1, 60,
                   what="the workload in Bronze")

    def settled():
        m = scrape(url)
        return m if value(m, "floe_quarantined_records_total",
                          table="public.orders") == 1 else None

    m = run.wait_until(settled, 30, what="the quarantine counter")
    assert value(m, "floe_events_total", table="public.orders", op="r") == 10
    assert value(m, "floe_events_total", table="public.orders", op="c") == 21
    assert value(m, "floe_events_total", table="public.orders", op="u") == 5
    assert value(m, "floe_events_total", table="public.orders", op="d") == 3
    assert value(m, "floe_events_total", table="public.notes", op="c") == 2
    assert value(m, "floe_rows_written_total", table="public.orders") == 39
    assert value(m, "floe_bytes_written_total", table="public.orders") > 0
    assert value(m, "floe_commits_total", table="public.orders") >= 2
    assert value(m, "floe_commit_duration_seconds_count") >= 2
    assert value(m, "floe_streaming") == 1
    assert value(m, "floe_slot_wal_status", status="reserved") == 1
    assert value(m, "floe_slot_retained_wal_bytes") is not None
    assert value(m, "floe_source_lag_bytes") is not None
    assert value(m, "floe_restarts_total", reason="crash") in (None, 0)
    run.stop()


def test_lag_rises_while_frozen_and_falls_after(floe, pg):
    pg.execute("CREATE TABLE public.ticks (id int PRIMARY KEY)")
    run = floe()
    run.start().wait_streaming()
    url = run.metrics_url()
    pg.execute("INSERT INTO ticks VALUES (1)")
    run.wait_until(lambda: (value(scrape(url), "floe_source_lag_milliseconds") or 1e9)
                   < 3000, 30, what="a small lag after the first change")

    os.kill(run.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(6)
    finally:
        os.kill(run.proc.pid, signal.SIGCONT)
    frozen = value(scrape(url), "floe_source_lag_milliseconds")
    assert frozen >= 5500, frozen

    for i in range(2, 6):
        pg.execute("INSERT INTO ticks VALUES (%s)", (i,))
        time.sleep(0.2)
    run.wait_until(lambda: value(scrape(url), "floe_source_lag_milliseconds") < 3000, 30,
                   what="the lag to fall after SIGCONT")
    run.stop()


def test_a_crash_restart_is_counted(floe, pg):
    pg.execute("CREATE TABLE public.t (id int PRIMARY KEY)")
    run = floe()
    run.start().wait_streaming()
    pg.execute("INSERT INTO t VALUES (1)")
    run.wait_until(lambda: run.count("public.t") >= 1, 60, what="row 1")
    run.kill()
    run.start().wait_streaming()
    url = run.metrics_url()
    run.wait_until(lambda: value(scrape(url), "floe_restarts_total", reason="crash") == 1,
                   30, what="floe_restarts_total{reason=crash} == 1")
    run.stop()
    # a clean stop is not a crash
    run.start().wait_streaming()
    url = run.metrics_url()
    run.wait_until(lambda: value(scrape(url), "floe_streaming") == 1, 30,
                   what="streaming again")
    assert value(scrape(url), "floe_restarts_total", reason="crash") in (None, 0)
    run.stop()
