"""The operations docs cannot drift from the code: docs/grafana-dashboard.json and
docs/prometheus-alerts.yml are parsed, and every metric name their PromQL uses must be
exposed by a real `floe run` or `floe silver --every` (scraped over HTTP, parsed with
prometheus_client). Also checks the Silver scheduler's metrics after real merges:
merges by result, rows merged equal to the keys applied, the watermark equal to
Silver's `floe.bronze-commit-lsn`, staleness per table, /readyz; and that a one-shot
`floe silver` serves nothing. The helper is floerun.py."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from floerun import floe, wait_until  # noqa: F401

DOCS = Path(__file__).resolve().parents[2] / "docs"
DASHBOARD = DOCS / "grafana-dashboard.json"
ALERTS = DOCS / "prometheus-alerts.yml"
OPERATIONS = DOCS / "operations.md"

# Synthesised by Prometheus for every scrape target, not exposed by floe.
PROMETHEUS_BUILTINS = {"up"}

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                "and", "or", "unless", "offset", "inf", "nan"}


# -- the docs -------------------------------------------------------------------------

def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel, rows' panels included."""
    board = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
            walk(p.get("panels", []))
    walk(board["panels"])
    return out


def alert_rules() -> list[dict]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)          # strings
    e = re.sub(r"\{[^}]*\}", "", e)                         # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                        # range and subquery windows
    e = re.sub(r"\$\{?\w+\}?", "", e)                       # Grafana variables
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        word = m.group(0)
        following = e[m.end():].lstrip()
        if following.startswith("("):
            continue  # a function or aggregation
        if word.lower() in PROMQL_WORDS:
            continue
        if re.fullmatch(r"\d+[smhdwy]", word) or re.fullmatch(r"e\d*", word):
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # the exponent or unit of a number (1e6, 2h)
        names.add(word)
    return names


def test_dashboard_is_a_grafana_dashboard():
    board = json.loads(DASHBOARD.read_text())
    assert board["title"] and board["uid"] and board["schemaVersion"] >= 30
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert {"job", "instance"} <= variables.keys()
    ids = []
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    for title, expr in exprs:
        assert "$job" in expr and "$instance" in expr, \
            f"panel {title!r} ignores the $job / $instance variables: {expr}"
    for p in board["panels"]:
        ids.append(p["id"])
        assert {"type", "title", "gridPos"} <= p.keys(), p
        for q in p.get("panels", []):
            ids.append(q["id"])
    assert len(ids) == len(set(ids)), "panel ids repeat"
    text = json.dumps(board)
    for needed in ("floe_source_lag_milliseconds", "floe_source_lag_bytes",
                   "floe_slot_retained_wal_bytes", "floe_slot_wal_status",
                   "floe_events_total", "floe_rows_written_total",
                   "floe_bytes_written_total", "floe_commit_duration_seconds_bucket",
                   "floe_checkpoint_duration_seconds_bucket", "floe_errors_total",
                   "floe_restarts_total", "floe_quarantined_records_total",
                   "floe_silver_merge_duration_seconds_bucket",
                   "floe_silver_rows_merged_total", "floe_silver_staleness_seconds"):
        assert needed in text, f"the dashboard has no panel on {needed}"
    assert "histogram_quantile(0.99" in text and "histogram_quantile(0.5" in text


def test_alert_rules_are_complete():
    rules = alert_rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names)), "alert names repeat"
    for r in rules:
        assert r["expr"] and r["labels"]["severity"] in ("page", "ticket", "info"), r
        assert re.fullmatch(r"\d+[smh]", str(r.get("for", "0s"))), r
        assert r["annotations"]["summary"] and r["annotations"]["description"], r
    docs = OPERATIONS.read_text()
    for name in names:
        assert f"`{name}`" in docs, f"docs/operations.md does not explain alert {name}"
    lost = next(r for r in rules if "floe_slot_wal_status" in r["expr"]
                and "lost" in r["expr"])
    assert "floe run --resnapshot" in lost["annotations"]["description"]


def test_metric_names_are_parsed_from_promql():
    assert metric_names('histogram_quantile(0.99, sum by (le, table) (rate('
                        'floe_silver_merge_duration_seconds_bucket{job=~"$job"}'
                        '[$__rate_interval])))') == {"floe_silver_merge_duration_seconds_bucket"}
    assert metric_names('floe_silver_staleness_seconds > on (job, instance) group_left() '
                        '(2 * floe_silver_every_seconds + 1800)') == {
        "floe_silver_staleness_seconds", "floe_silver_every_seconds"}
    assert metric_names("time() - floe_last_checkpoint_timestamp_seconds > 5e2") == {
        "floe_last_checkpoint_timestamp_seconds"}
    assert metric_names('max_over_time(floe_slot_wal_status{status="lost"}[10m]) == 1 '
                        'unless up == 0') == {"floe_slot_wal_status", "up"}


# -- the processes ----------------------------------------------------------------------

def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(url: str):
    """(every sample and series name the scrape exposes, {(sample, labels): value})."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    names, samples = set(), {}
    for family in text_string_to_metric_families(text):
        # A labelled family without series yet still has its HELP / TYPE: the
        # names a query would select.
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
        for s in family.samples:
            names.add(s.name)
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return names, samples


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))))


class SilverProcess:
    def __init__(self, run, *args: str):
        self.log_path = run.base / "silver-every.log"
        self._log = open(self.log_path, "ab", buffering=0)
        self.proc = subprocess.Popen(
            [str(run.floe_bin), "silver", str(run.config_path), *args],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            cwd=run.base)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def url(self) -> str:
        def find():
            assert self.proc.poll() is None, f"floe silver exited:\n{self.log()}"
            found = re.findall(r"serving /metrics, /healthz and /readyz on (\S+):(\d+)",
                               self.log())
            return found[-1] if found else None
        host, port = wait_until(find, 60, what="floe silver's metrics log line",
                                on_timeout=self.log)
        return f"http://{host}:{port}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(120)
        self._log.close()
        return rc


def silver_watermark(run, table: str) -> int:
    t = run.catalog().load_table(("silver", "svc", *table.split(".")))
    return int(t.current_snapshot().summary.additional_properties["floe.bronze-commit-lsn"])


def test_docs_name_only_metrics_floe_exposes(floe, pg):
    pg.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    pg.execute("CREATE TABLE nokey (x int)")
    pg.execute("INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 10) g")
    pg.execute("INSERT INTO nokey VALUES (1)")
    run = floe(service="svc").start()
    run_url = run.metrics_url()
    run.wait_until(lambda: run.count("public.items") >= 10 and run.count("public.nokey"),
                   what="the copies in Bronze")

    # A one-shot pass serves nothing, whatever --metrics-listen says.
    once = subprocess.run([str(run.floe_bin), "silver", str(run.config_path),
                           "--metrics-listen", "127.0.0.1:0"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = once.stdout.decode(errors="replace")
    assert once.returncode == 0, out
    assert "serving /metrics" not in out
    assert "backfilled" in out

    # An explicit address that is taken is an error naming it.
    taken = run_url.removeprefix("http://")
    clash = subprocess.run([str(run.floe_bin), "silver", str(run.config_path), "--every",
                            "1s", "--metrics-listen", taken],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert clash.returncode == 1, clash.stdout.decode(errors="replace")
    assert taken in clash.stdout.decode(errors="replace")

    # The file's address taken (by floe run on the same host): merges without serving.
    shared = run.base / "shared-port.yaml"
    shared.write_text(re.sub(r"listen: \S+", f"listen: {taken}", run.config_path.read_text()))
    assert taken in shared.read_text()
    beside = subprocess.Popen([str(run.floe_bin), "silver", str(shared), "--every", "1s"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    watchdog = threading.Timer(60, beside.kill)  # never hang the suite
    watchdog.start()
    lines = []
    for line in beside.stdout:
        lines.append(line.decode(errors="replace"))
        if "is up to date" in lines[-1]:
            break
    beside.send_signal(signal.SIGTERM)
    lines += [x.decode(errors="replace") for x in beside.stdout]
    watchdog.cancel()
    assert beside.wait(60) == 0, "".join(lines)
    assert any("not serving metrics" in x and "--metrics-listen" in x for x in lines), \
        "".join(lines)

    silver = SilverProcess(run, "--every", "1s", "--metrics-listen", "127.0.0.1:0")
    try:
        silver_url = silver.url()
        wait_until(lambda: fetch(silver_url + "/readyz")[0] == 200, 60,
                   what="floe silver /readyz 200", on_timeout=silver.log)
        assert fetch(silver_url + "/healthz") == (200, "ok")

        # Changes after the backfill: 3 updates, 2 deletes, 4 inserts, distinct keys:
        # 9 keys applied however Bronze's checkpoints split them.
        with pg.connect() as conn:
            with conn.transaction():
                conn.execute("UPDATE items SET name = name || '!' WHERE id <= 3")
                conn.execute("DELETE FROM items WHERE id IN (4, 5)")
                conn.execute("INSERT INTO items SELECT g, 'new ' || g "
                             "FROM generate_series(11, 14) g")
        run.wait_until(lambda: run.count("public.items") >= 10 + 9, what="Bronze")
        bronze_lsn = run.commit_lsns("public.items")[-1]

        def merged():
            _, m = scrape(silver_url)
            wm = value(m, "floe_silver_watermark_lsn", table="public.items")
            return m if wm is not None and wm >= bronze_lsn else None
        m = wait_until(merged, 60, what="Silver to merge the changes",
                       on_timeout=silver.log)

        # The backfill was the one-shot process; this one merged the 9 keys, maybe
        # in more than one increment.
        assert value(m, "floe_silver_rows_merged_total", table="public.items") == 9
        ok = value(m, "floe_silver_merges_total", table="public.items", result="ok")
        assert ok >= 1
        assert value(m, "floe_silver_merges_total", table="public.items",
                     result="up_to_date") >= 1
        assert value(m, "floe_silver_merges_total", table="public.nokey",
                     result="no_key") >= 1
        assert value(m, "floe_silver_merges_total", table="public.items",
                     result="failed") is None
        assert value(m, "floe_silver_merge_duration_seconds_count",
                     table="public.items") == ok
        assert value(m, "floe_silver_merge_duration_seconds_sum", table="public.items") > 0
        assert value(m, "floe_silver_watermark_lsn", table="public.items") == \
            silver_watermark(run, "public.items")
        assert value(m, "floe_silver_every_seconds") == 1
        staleness = value(m, "floe_silver_staleness_seconds", table="public.items")
        assert staleness is not None and 0 <= staleness < 30, staleness
        assert value(m, "floe_silver_staleness_seconds", table="public.nokey") is None

        # Every metric the docs query exists.
        run_names, _ = scrape(run_url)
        silver_names, _ = scrape(silver_url)
        exposed = run_names | silver_names | PROMETHEUS_BUILTINS
        used = {}
        for title, expr in dashboard_exprs():
            for name in metric_names(expr):
                used.setdefault(name, f"dashboard panel {title!r}: {expr}")
        for rule in alert_rules():
            for name in metric_names(rule["expr"]):
                used.setdefault(name, f"alert {rule['alert']}: {rule['expr']}")
        assert used, "no metric names found in the docs"
        missing = {n: where for n, where in used.items() if n not in exposed}
        assert not missing, f"the docs query metrics floe does not expose: {missing}"
        # ... and operations.md documents every metric both processes expose.
        docs = OPERATIONS.read_text()
        families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in
                    (run_names | silver_names) if n.startswith("floe_")}
        undocumented = sorted(f for f in families if f"`{f}`" not in docs
                              and f"`{f.removesuffix('_total')}`" not in docs)
        assert not undocumented, f"docs/operations.md lacks {undocumented}"
    finally:
        rc = silver.stop()
    assert rc == 0, silver.log()
    run.stop()
