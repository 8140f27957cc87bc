"""floe's /metrics output, read by the reference parser of the Prometheus text
format (prometheus_client), carries exactly the families, types, help texts,
labels and values that tests/tools/metrics_tool.cc declares; /healthz, /readyz and
unknown paths answer as documented in src/floe/metrics/http_server.h."""

from __future__ import annotations

import math
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[2]
INF = math.inf


@pytest.fixture(scope="module")
def metrics_tool_bin() -> Path:
    # Only this tool is needed, so no dependency on the `floe` binary being built
    # (conftest's `tool` fixture requires it).
    build = Path(os.environ.get("FLOE_BUILD_DIR", REPO / "build" / "release"))
    if not build.is_absolute():
        build = REPO / build
    p = build / "tests" / "tools" / "metrics_tool"
    if not p.exists():
        pytest.fail(f"metrics_tool is not built in {p.parent}; run `make build` "
                    "(or set FLOE_BUILD_DIR)")
    return p


class Tool:
    def __init__(self, binary: Path):
        self.proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), f"metrics_tool printed {line!r}, not a port"
        self.base = f"http://127.0.0.1:{int(line)}"

    def command(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "done\n"

    def get(self, path: str) -> tuple[int, str, str]:
        try:
            with urllib.request.urlopen(self.base + path, timeout=10) as r:
                return r.status, r.headers.get("Content-Type"), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type"), e.read().decode()

    def close(self) -> int:
        self.proc.stdin.close()  # the tool stops its server and exits on EOF
        return self.proc.wait(timeout=10)


@pytest.fixture
def metrics_tool(metrics_tool_bin: Path):
    t = Tool(metrics_tool_bin)
    try:
        yield t
    finally:
        if t.proc.poll() is None:
            assert t.close() == 0


# (family name as the parser reports it, type, help) in declaration order. The
# parser drops a counter's `_total` suffix from the family name, not the samples'.
FAMILIES = [
    ("floe_tool_rows", "counter", "Rows written, per table and op."),
    ("floe_tool_restarts", "counter", "Help with a \\ backslash\nand a second line."),
    ("floe_tool_level", "gauge", "Gauge values of every kind."),
    ("floe_tool_commit_seconds", "histogram", "Commit latency."),
    ("floe_tool_file_bytes", "histogram", "File sizes."),
    ("floe_tool_lag_seconds", "gauge", "Lag computed at scrape time."),
]


def rows(table, op, v):
    return ("floe_tool_rows_total", {"table": table, "op": op}, v)


def hist(name, labels, bounds, cumulative, total, sum_):
    out = [(f"{name}_bucket", {**labels, "le": le}, c)
           for le, c in zip(bounds + ["+Inf"], cumulative + [total])]
    return out + [(f"{name}_sum", labels, sum_), (f"{name}_count", labels, total)]


# Samples of each family, in the order served: series sorted by label values
# (byte order, so "" first and UTF-8 last).
SAMPLES = {
    "floe_tool_rows": [
        rows("", "t", 0.5),
        rows("back\\slash", "d", 2),
        rows("public.orders", "c", 42),
        rows("public.orders", "u", 1),
        rows('say "hi"', "c", 3),
        rows("two\nlines", "c", 4),
        rows("ünïcødé 表", "c", 5),
    ],
    "floe_tool_restarts": [("floe_tool_restarts_total", {}, 0)],
    "floe_tool_level": [
        ("floe_tool_level", {"kind": k}, v)
        for k, v in [("added", 3.5), ("fraction", 0.25), ("huge", 1e20),
                     ("million", 1e6), ("neg_inf", -INF), ("negative", -7),
                     ("pos_inf", INF)]
    ],
    "floe_tool_commit_seconds": (
        hist("floe_tool_commit_seconds", {"table": "public.orders"},
             ["0.005", "0.1", "1", "10"], [1, 3, 4, 5], 6,
             0.001 + 0.05 + 0.05 + 0.5 + 2.0 + 100.0)
        + hist("floe_tool_commit_seconds", {"table": 'q"uote'},
               ["0.005", "0.1", "1", "10"], [0, 0, 1, 1], 1, 1)),
    "floe_tool_file_bytes": hist("floe_tool_file_bytes", {}, ["1024", "4096", "16384"],
                                 [0, 0, 0], 0, 0),
    "floe_tool_lag_seconds": [
        ("floe_tool_lag_seconds", {"table": "public.accounts"}, 0),
        ("floe_tool_lag_seconds", {"table": "public.orders"}, 1.5),
    ],
}


def test_scrape_parses_to_the_declared_metrics(metrics_tool):
    status, content_type, body = metrics_tool.get("/metrics")
    assert status == 200
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert body.endswith("\n")

    families = list(text_string_to_metric_families(body))
    assert [(f.name, f.type, f.documentation) for f in families] == FAMILIES
    for f in families:
        got = [(s.name, s.labels, s.value) for s in f.samples]
        want = SAMPLES[f.name]
        assert [(n, l) for n, l, _ in got] == [(n, l) for n, l, _ in want], f.name
        for (name, labels, g), (_, _, w) in zip(got, want):
            assert g == pytest.approx(w, rel=1e-12), (name, labels)
        assert all(s.timestamp is None for s in f.samples)


def test_histograms_are_consistent(metrics_tool):
    """Buckets cumulative, +Inf bucket == _count, for every series."""
    _, _, body = metrics_tool.get("/metrics")
    for f in text_string_to_metric_families(body):
        if f.type != "histogram":
            continue
        series: dict[tuple, dict] = {}
        for s in f.samples:
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            d = series.setdefault(key, {"buckets": []})
            if s.name.endswith("_bucket"):
                d["buckets"].append((float(s.labels["le"]), s.value))
            else:
                d[s.name.rsplit("_", 1)[1]] = s.value
        assert series, f.name
        for key, d in series.items():
            bounds = [b for b, _ in d["buckets"]]
            counts = [c for _, c in d["buckets"]]
            assert bounds == sorted(bounds) and bounds[-1] == INF, (f.name, key)
            assert counts == sorted(counts), (f.name, key)
            assert counts[-1] == d["count"], (f.name, key)


def test_health_readiness_and_not_found(metrics_tool):
    assert metrics_tool.get("/healthz")[::2] == (200, "ok")
    assert metrics_tool.get("/readyz")[::2] == (200, "ready")

    reason = "initial copy of public.orders: 40% done"
    metrics_tool.command(f"not-ready {reason}")
    assert metrics_tool.get("/readyz")[::2] == (503, reason)
    assert metrics_tool.get("/healthz")[::2] == (200, "ok")

    metrics_tool.command("ready")
    assert metrics_tool.get("/readyz")[::2] == (200, "ready")

    for path in ("/", "/metric", "/metrics/extra", "/healthz/x"):
        assert metrics_tool.get(path)[0] == 404, path

    assert metrics_tool.close() == 0
