"""A real Apache Iceberg REST catalog for the tests: Iceberg's own REST server
(RESTCatalogAdapter + RESTCatalogServlet, as in iceberg-open-api's test fixtures),
assembled by scripts/bootstrap into .venv/iceberg-rest and started by
scripts/iceberg-rest/Launcher.java, bound to 127.0.0.1 on a free port. Its tables live
in a JdbcCatalog on a SQLite file under the test's directory (a restart keeps them),
its files in a moto S3 bucket (s3server.py) through S3FileIO.

`CatalogFaultProxy` sits in front of it and loses responses, answers with errors and
counts requests, for the commit-outcome tests."""

from __future__ import annotations

import atexit
import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

from s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server, _free_port

# Where scripts/bootstrap puts the server: lib/*.jar and classes/Launcher.class.
REST_HOME = Path(os.environ.get("FLOE_ICEBERG_REST_HOME", Path(sys.prefix) / "iceberg-rest"))

# Quick to start (about a second) and small: a test server, not a tuned one.
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k", "-Xmx512m",
             "-Djava.net.preferIPv4Stack=true",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]


class RestCatalogServer:
    """Iceberg's REST catalog server on 127.0.0.1:`port` over a SQLite JdbcCatalog at
    `base`/rest-catalog.db, with S3FileIO on the moto server `s3` and the warehouse
    `warehouse` (s3://bucket/prefix; the bucket must exist). With `token`, every
    request must carry `Authorization: Bearer <token>` (checked by the launcher; the
    Iceberg fixture itself has no such check)."""

    def __init__(self, base: Path, s3: S3Server, warehouse: str, token: str | None = None,
                 start_timeout: float = 120.0):
        if not warehouse.startswith("s3://"):
            raise ValueError(f"warehouse must be s3://bucket/prefix, not {warehouse!r}")
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.s3 = s3
        self.warehouse = warehouse.rstrip("/")
        self.token = token
        self.start_timeout = start_timeout
        self.db_path = self.base / "rest-catalog.db"
        self.log_path = self.base / "rest-catalog.log"
        self.port = _free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.startup_seconds: float | None = None
        self._log = None
        # A test that dies without stop() must not leave a JVM behind.
        atexit.register(self.stop)
        self._start()

    # -- process -------------------------------------------------------------------

    def _command(self) -> list[str]:
        lib, classes = REST_HOME / "lib", REST_HOME / "classes"
        if not (classes / "Launcher.class").exists() or not lib.is_dir():
            raise RuntimeError(f"the Iceberg REST server is not assembled in {REST_HOME}; "
                               "run scripts/bootstrap")
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("no `java` on PATH; run scripts/bootstrap "
                               "(it installs openjdk-17-jdk-headless)")
        return [java, *JVM_FLAGS, "-cp", f"{classes}{os.pathsep}{lib}/*", "Launcher"]

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CATALOG_", "AWS_", "ICEBERG_REST_"))}
        env.update({
            # RESTCatalogServer's convention: CATALOG_A__B_C -> catalog property a-b.c
            "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
            "CATALOG_URI": f"jdbc:sqlite:{self.db_path}",
            "CATALOG_JDBC_SCHEMA__VERSION": "V1",
            # One connection: SQLite has one writer, and a second pooled connection
            # would meet SQLITE_BUSY under concurrent commits.
            "CATALOG_CLIENTS": "1",
            "CATALOG_WAREHOUSE": self.warehouse,
            "CATALOG_REST_PORT": str(self.port),
            "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
            "CATALOG_S3_ENDPOINT": self.s3.endpoint,
            "CATALOG_S3_PATH__STYLE__ACCESS": "true",
            "CATALOG_S3_ACCESS__KEY__ID": ACCESS_KEY,
            "CATALOG_S3_SECRET__ACCESS__KEY": SECRET_KEY,
            "CATALOG_CLIENT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        })
        if self.token:
            env["ICEBERG_REST_BEARER_TOKEN"] = self.token
        return env

    def _start(self) -> None:
        cmd = self._command()
        self._log = open(self.log_path, "ab")
        self._log.write(f"---- starting on port {self.port}\n".encode())
        self._log.flush()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self._environment(),
                                     cwd=self.base)
        deadline = t0 + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Iceberg REST server exited {self.proc.returncode} "
                                   f"while starting:\n{self.log_tail()}")
            if self._config_answers():
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Iceberg REST server did not answer GET /v1/config "
                                   f"in {self.start_timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.05)
        self.startup_seconds = time.monotonic() - t0

    def _config_answers(self) -> bool:
        req = urllib.request.Request(f"{self.uri}/v1/config", headers=self.auth_headers())
        try:
            with urllib.request.urlopen(req, timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError, http.client.HTTPException):
            return False

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        """Stop and start again on the same port and SQLite file."""
        self.stop()
        self._start()

    # -- clients -------------------------------------------------------------------

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def client_props(self, uri: str | None = None) -> dict[str, str]:
        """Catalog properties of a PyIceberg RestCatalog for this server and moto."""
        props = {"uri": uri or self.uri, **self.s3.pyiceberg_props(),
                 "s3.force-virtual-addressing": "false"}
        if self.token:
            props["token"] = self.token
        return props

    def pyiceberg_catalog(self, name: str = "rest", uri: str | None = None, **extra):
        """A PyIceberg RestCatalog on this server (or on `uri`, e.g. a CatalogFaultProxy
        in front of it)."""
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(name, **{**self.client_props(uri), **extra})

    def request(self, method: str, path: str, body=None) -> tuple[int, object]:
        """A raw request to the server: (status, parsed JSON body, or the text when it
        is not JSON, or None when empty)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {**self.auth_headers()}
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            if not raw.strip():
                return resp.status, None
            try:
                return resp.status, json.loads(raw)
            except ValueError:
                return resp.status, raw.decode(errors="replace")
        finally:
            conn.close()


# -- fault proxy -------------------------------------------------------------------

Match = Callable[[str, str], bool]

_COMMIT_RE = re.compile(r"^/v1/(?:[^/]+/)?namespaces/[^/]+/tables/[^/]+$")

ERROR_TYPES = {
    400: "BadRequestException",
    401: "NotAuthorizedException",
    403: "ForbiddenException",
    404: "NoSuchTableException",
    406: "UnsupportedOperationException",
    409: "CommitFailedException",
    419: "AuthenticationTimeoutException",
    429: "TooManyRequestsException",
    500: "CommitStateUnknownException",
    502: "BadGatewayException",
    503: "ServiceUnavailableException",
    504: "GatewayTimeoutException",
}


def is_commit(method: str, path: str) -> bool:
    """A table commit: POST /v1/{prefix?}/namespaces/{ns}/tables/{table}."""
    return method == "POST" and bool(_COMMIT_RE.match(path))


def any_request(method: str, path: str) -> bool:
    return True


_TOP = {"config", "namespaces", "oauth", "tables", "views", "transactions"}


def path_pattern(path: str) -> str:
    """/v1/namespaces/db/tables/t -> /v1/namespaces/{namespace}/tables/{table}; a
    catalog prefix becomes {prefix}; /v1/tables/rename stays as is."""
    out: list[str] = []
    in_namespace = False
    for i, part in enumerate(path.split("?", 1)[0].strip("/").split("/")):
        prev = out[-1] if out else ""
        if i == 1 and part not in _TOP:
            out.append("{prefix}")
        elif prev == "namespaces":
            out.append("{namespace}")
            in_namespace = True
        elif prev in ("tables", "views") and in_namespace:
            out.append("{table}" if prev == "tables" else "{view}")
        else:
            out.append(part)
    return "/" + "/".join(out)


class _Rule:
    def __init__(self, kind: str, n: int, match: Match, status: int = 0,
                 body: bytes = b""):
        self.kind, self.left, self.match, self.status, self.body = kind, n, match, status, body


def error_body(status: int, message: str | None = None, type_: str | None = None) -> bytes:
    """An Iceberg REST ErrorModel."""
    return json.dumps({"error": {
        "message": message or f"injected by CatalogFaultProxy: {status}",
        "type": type_ or ERROR_TYPES.get(status, "RESTException"),
        "code": status}}).encode()


# The endpoints of the REST specification a server may list in /v1/config.
SPEC_ENDPOINTS = [
    f"{m} /v1/{{prefix}}/{p}" for m, p in (
        ("GET", "namespaces"), ("POST", "namespaces"),
        ("GET", "namespaces/{namespace}"), ("HEAD", "namespaces/{namespace}"),
        ("DELETE", "namespaces/{namespace}"),
        ("POST", "namespaces/{namespace}/properties"),
        ("GET", "namespaces/{namespace}/tables"), ("POST", "namespaces/{namespace}/tables"),
        ("GET", "namespaces/{namespace}/tables/{table}"),
        ("HEAD", "namespaces/{namespace}/tables/{table}"),
        ("POST", "namespaces/{namespace}/tables/{table}"),
        ("DELETE", "namespaces/{namespace}/tables/{table}"),
        ("POST", "namespaces/{namespace}/register"), ("POST", "tables/rename"),
        ("POST", "transactions/commit"))]


class CatalogFaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of a REST catalog (`upstream_port`). It
    forwards every request, except that it can

      lose_responses(n, match)      forward the next n matching requests, let the
                                    server apply them, then close the client's
                                    connection without any response;
      fail_with(status, n, match)   answer the next n matching requests with `status`
                                    and an ErrorModel body, without forwarding;
      delay(n, seconds, match)      hold the next n matching requests that long, then
                                    forward them (also when their client has gone: a
                                    request that lands late);
      random_faults(seed, rate)     for each request not taken by a rule above, with
                                    probability `rate` (seeded): lose its response or
                                    answer 503 (see `kinds`).

    `match(method, path)` gets the path without the query string; `is_commit` picks
    table commits. `count(method, pattern)` and `counts()` tell how many requests
    reached the proxy per (method, path_pattern(path)); `events` lists what was done to
    each (method, path, action); `answered(status, match)` how many forwarded requests
    the server itself answered with `status`. Thread-safe."""

    _HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
            "trailer", "upgrade", "proxy-authorization", "proxy-authenticate"}

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._counts: dict[tuple[str, str], int] = {}
        self.events: list[tuple[str, str, str]] = []
        self._answers: list[tuple[str, str, int]] = []
        self._rng: random.Random | None = None
        self._rate = 0.0
        self._kinds: tuple = ()
        self._random_match: Match = any_request
        # vend(): credentials added to loadTable-shaped answers.
        self._vended: dict[str, str] | None = None
        # hide_register(): /v1/config lists no register endpoint, and register fails.
        self._no_register = False
        # serve_prefix(): the path prefix /v1/config hands out, stripped on the way in.
        self._prefix: str | None = None
        self._config_extra: tuple[dict, dict] | None = None
        self.unprefixed: list[str] = []
        # What each request carried: (method, path with query, headers).
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.delegation_headers: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):  # quiet
                pass

            def _any(self):
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.uri = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    # -- control ------------------------------------------------------------------

    def lose_responses(self, n: int = 1, match: Match = is_commit) -> None:
        with self._lock:
            self._rules.append(_Rule("lose", n, match))

    def delay(self, n: int, seconds: float, match: Match = is_commit) -> None:
        with self._lock:
            self._rules.append(_Rule("delay", n, match, int(seconds * 1000)))

    def fail_with(self, status: int, n: int = 1, match: Match = is_commit,
                  message: str | None = None, type_: str | None = None) -> None:
        with self._lock:
            self._rules.append(_Rule("fail", n, match, status,
                                     error_body(status, message, type_)))

    def random_faults(self, seed: int, rate: float, kinds: tuple = ("lose", 503),
                      match: Match = any_request) -> None:
        """kinds: "lose" and/or HTTP statuses; rate 0 turns it off."""
        with self._lock:
            self._rng = random.Random(seed)
            self._rate = rate
            self._kinds = tuple(kinds)
            self._random_match = match

    def vend(self, config: dict[str, str] | None) -> None:
        """Adds `config` (e.g. `s3.access-key-id`, ...) to every successful loadTable
        and register answer, as a catalog that vends credentials does (None: stop).
        `delegation_headers` records each such request's X-Iceberg-Access-Delegation."""
        with self._lock:
            self._vended = dict(config) if config is not None else None

    def hide_register(self) -> None:
        """Makes the catalog one without register (as S3 Tables' is): /v1/config's
        `endpoints` list it not, and a register request is answered 501 without
        reaching the server."""
        with self._lock:
            self._no_register = True
            self._rules.append(_Rule("fail", 1 << 30,
                                     lambda m, p: m == "POST" and p.endswith("/register"),
                                     501, error_body(501, "register is not supported")))

    def serve_prefix(self, prefix: str | None) -> None:
        """Hands out `prefix` in /v1/config's overrides, as a catalog serving several
        warehouses does, and strips it from /v1/<prefix>/... before forwarding (the
        server behind serves no prefix); `unprefixed` lists requests under /v1/ other
        than /v1/config that lacked it."""
        with self._lock:
            self._prefix = prefix

    def add_config(self, defaults: dict[str, str], overrides: dict[str, str]) -> None:
        """Adds these properties to /v1/config's `defaults` and `overrides`."""
        with self._lock:
            self._config_extra = (dict(defaults), dict(overrides))

    def clear(self) -> None:
        """Drop pending rules and the random mode (counts stay)."""
        with self._lock:
            self._rules.clear()
            self._rate = 0.0

    def pending(self) -> int:
        with self._lock:
            return sum(r.left for r in self._rules)

    def count(self, method: str, pattern: str) -> int:
        with self._lock:
            return self._counts.get((method, pattern), 0)

    def counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def injected(self, action: str | None = None) -> int:
        """How many requests got a fault (`action` "lose" or "fail <status>")."""
        with self._lock:
            return sum(1 for _, _, a in self.events
                       if a != "forward" and (action is None or a == action))

    def answered(self, status: int, match: Match = any_request) -> int:
        """How many forwarded requests matching `match` the server answered with
        `status` (a 409 a concurrent writer caused, say)."""
        with self._lock:
            return sum(1 for m, p, s in self._answers if s == status and match(m, p))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- serving ------------------------------------------------------------------

    def _decide(self, method: str, path: str) -> tuple[str, int, bytes]:
        with self._lock:
            key = (method, path_pattern(path))
            self._counts[key] = self._counts.get(key, 0) + 1
            action: tuple[str, int, bytes] = ("forward", 0, b"")
            for rule in self._rules:
                if rule.left > 0 and rule.match(method, path):
                    rule.left -= 1
                    action = (rule.kind, rule.status, rule.body)
                    break
            else:
                if (self._rng is not None and self._rate > 0
                        and self._random_match(method, path)
                        and self._rng.random() < self._rate):
                    kind = self._rng.choice(self._kinds)
                    action = (("lose", 0, b"") if kind == "lose"
                              else ("fail", int(kind), error_body(int(kind))))
            self._rules = [r for r in self._rules if r.left > 0]
            label = action[0] if action[0] in ("forward", "lose", "delay") \
                else f"fail {action[1]}"
            self.events.append((method, path, label))
            return action

    @staticmethod
    def _read_body(h: BaseHTTPRequestHandler) -> bytes:
        if "chunked" in h.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(h.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(h.rfile.read(size))
                h.rfile.readline()
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n else b""

    def _forward(self, h: BaseHTTPRequestHandler, body: bytes):
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=120)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in self._HOP
                   and k.lower() != "content-length"}
        if body or h.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body))
        conn.request(h.command, h.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp, data

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests.append((h.command, h.path, dict(h.headers.items())))
            prefix = self._prefix
        if prefix is not None and h.path.startswith("/v1/"):
            if h.path.startswith(f"/v1/{prefix}/"):
                h.path = "/v1/" + h.path[len(f"/v1/{prefix}/"):]
            elif not h.path.startswith("/v1/config") and \
                    not h.path.startswith("/v1/oauth"):
                with self._lock:
                    self.unprefixed.append(h.path)
        method, path = h.command, h.path.split("?", 1)[0]
        body = self._read_body(h)
        kind, status, err = self._decide(method, path)
        if kind == "fail":
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(err)))
            h.end_headers()
            if method != "HEAD":
                h.wfile.write(err)
            return
        if kind == "delay":
            time.sleep(status / 1000)
        try:
            resp, data = self._forward(h, body)
        except OSError as e:
            msg = error_body(502, f"CatalogFaultProxy: upstream unreachable: {e}")
            h.send_response(502)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(msg)))
            h.end_headers()
            h.wfile.write(msg)
            return
        if kind == "lose":
            # The server has applied the request; the client never hears of it.
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        pattern = path_pattern(path)
        loads = (method == "GET" and pattern.endswith("/tables/{table}")) or (
            method == "POST" and pattern.endswith("/register"))
        with self._lock:
            self._answers.append((method, path, resp.status))
            vended = self._vended
            if loads:
                self.delegation_headers.append(
                    h.headers.get("X-Iceberg-Access-Delegation", ""))
        if vended is not None and loads and resp.status == 200:
            answer = json.loads(data)
            answer["config"] = {**answer.get("config", {}), **vended}
            data = json.dumps(answer).encode()
        if self._config_extra and path == "/v1/config" and resp.status == 200:
            answer = json.loads(data)
            defaults, overrides = self._config_extra
            answer["defaults"] = {**answer.get("defaults", {}), **defaults}
            answer["overrides"] = {**answer.get("overrides", {}), **overrides}
            data = json.dumps(answer).encode()
        if prefix is not None and path == "/v1/config" and resp.status == 200:
            answer = json.loads(data)
            answer["overrides"] = {**answer.get("overrides", {}), "prefix": prefix}
            data = json.dumps(answer).encode()
        if self._no_register and path == "/v1/config" and resp.status == 200:
            answer = json.loads(data)
            listed = answer.get("endpoints") or SPEC_ENDPOINTS
            answer["endpoints"] = [e for e in listed if not e.endswith("/register")]
            data = json.dumps(answer).encode()
        h.send_response(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in self._HOP and k.lower() != "content-length":
                h.send_header(k, v)
        no_body = method == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        if method == "HEAD":
            h.send_header("Content-Length", resp.getheader("Content-Length", "0"))
        elif not no_body:
            h.send_header("Content-Length", str(len(data)))
        try:
            h.end_headers()
            if not no_body:
                h.wfile.write(data)
        except OSError:
            pass  # a client that gave up on a delayed request
