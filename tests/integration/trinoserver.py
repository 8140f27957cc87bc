"""A Trino server with its Iceberg connector, as an independent reader of floe's
tables (issue 17). Not a test file.

scripts/bootstrap unpacks Trino (io.trino:trino-server from Maven Central) into
.venv/trino with only its Iceberg plugin (SQLite's JDBC driver copied beside it, for
floe's SQLite catalog); Trino needs Java 24 or newer, found by bootstrap and named in
.venv/trino/java-home. `TrinoServer(base, catalogs)` writes a coordinator's
configuration under `base` (one catalog file per entry of `catalogs`: name ->
properties), starts it bound to 127.0.0.1 on a free port and waits until it answers;
`columns(sql)` runs a statement with the `trino` Python client and returns its
column names and rows.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

TRINO_HOME = Path(os.environ.get("FLOE_TRINO_HOME", Path(sys.prefix) / "trino"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TrinoServer:
    def __init__(self, base: Path, catalogs: dict[str, dict[str, str]],
                 start_timeout: float = 180):
        self.base = Path(base)
        self.port = _free_port()
        etc = self.base / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        (self.base / "data").mkdir(exist_ok=True)
        (etc / "config.properties").write_text(
            "coordinator=true\n"
            "node-scheduler.include-coordinator=true\n"
            f"http-server.http.port={self.port}\n"
            f"discovery.uri=http://127.0.0.1:{self.port}\n"
            "query.max-memory=256MB\n"
            "query.max-memory-per-node=256MB\n")
        for name, props in catalogs.items():
            (etc / "catalog" / f"{name}.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in props.items()))
        java_home = (TRINO_HOME / "java-home").read_text().strip()
        self.log_path = self.base / "trino.log"
        self._log = open(self.log_path, "ab")
        cmd = [f"{java_home}/bin/java", "-Xmx1G", "-XX:+UseSerialGC",
               "-XX:TieredStopAtLevel=1", "-Djdk.attach.allowAttachSelf=true",
               "-Dnode.environment=test", "-Dnode.id=floe-test",
               # Bound to 127.0.0.1 only.
               "-Dnode.bind-ip=127.0.0.1", "-Dnode.internal-address=127.0.0.1",
               f"-Dnode.data-dir={self.base / 'data'}",
               f"-Dconfig={etc / 'config.properties'}",
               f"-Dcatalog.config-dir={etc / 'catalog'}",
               "-cp", f"{TRINO_HOME / 'lib'}/*", "io.trino.server.TrinoServer"]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=TRINO_HOME)
        atexit.register(self.stop)
        deadline = time.monotonic() + start_timeout
        while not self._ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"Trino exited {self.proc.returncode} while starting:\n"
                                   f"{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Trino did not start in {start_timeout:.0f} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.5)

    def _ready(self) -> bool:
        import json

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/info",
                                        timeout=2) as r:
                return not json.loads(r.read()).get("starting", True)
        except OSError:
            return False

    def columns(self, sql: str, timeout: float = 60) -> tuple[list[str], list[tuple]]:
        """The column names and rows of `sql` (tried again while Trino has no node
        that holds the catalog yet: nodes announce their catalogs a while after the
        server starts)."""
        import trino

        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._columns(sql)
            except trino.exceptions.TrinoQueryError as e:
                if e.error_name != "NO_NODES_AVAILABLE" or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _columns(self, sql: str) -> tuple[list[str], list[tuple]]:
        import trino

        conn = trino.dbapi.connect(host="127.0.0.1", port=self.port, user="floe-test")
        try:
            cur = conn.cursor()
            cur.execute(sql)
            rows = [tuple(r) for r in cur.fetchall()]
            return [d[0] for d in cur.description], rows
        finally:
            conn.close()

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()
