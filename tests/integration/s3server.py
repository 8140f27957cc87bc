"""A real S3-compatible server for the tests: moto's server (`moto_server`, from
requirements-dev.txt), bound to 127.0.0.1 on a free port, with its buckets and the
settings floe, PyIceberg, DuckDB and boto3 need to reach it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

# moto accepts any credentials; these are what every client here is given.
ACCESS_KEY = "floe-test-access-key"
SECRET_KEY = "floe-test-secret-key-never-logged"
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class S3Server:
    def __init__(self, base: Path):
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(base) / "moto.log"
        exe = Path(sys.executable).parent / "moto_server"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "1"})
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited {self.proc.returncode}:\n"
                                   + self.log_path.read_text(errors="replace")[-3000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("moto_server did not start listening in 60 s")
                time.sleep(0.1)

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> dict[str, int]:
        """Every object of the bucket under `prefix`: key -> size."""
        out: dict[str, int] = {}
        for page in self.client().get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents", []):
                out[o["Key"]] = o["Size"]
        return out

    def floe_yaml(self) -> str:
        """The pipeline file's `s3:` section (the secret through `_file` would do as
        well; the tests check it is never printed either way)."""
        return (f"s3:\n  endpoint: {self.endpoint}\n  region: {REGION}\n"
                f"  access_key_id: {ACCESS_KEY}\n  secret_access_key: {SECRET_KEY}\n")

    def pyiceberg_props(self) -> dict:
        return {"s3.endpoint": self.endpoint, "s3.access-key-id": ACCESS_KEY,
                "s3.secret-access-key": SECRET_KEY, "s3.region": REGION}

    def duckdb_secret(self, con) -> None:
        con.execute("LOAD httpfs")
        con.execute(f"""CREATE OR REPLACE SECRET floe_test_s3 (TYPE s3, KEY_ID '{ACCESS_KEY}',
                        SECRET '{SECRET_KEY}', REGION '{REGION}',
                        ENDPOINT '127.0.0.1:{self.port}', URL_STYLE 'path', USE_SSL false)""")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class FaultProxy:
    """A TCP proxy in front of the S3 server that injects the faults an object store
    shows: `503 SlowDown` answers (a fraction `slowdown` of requests, answered before
    the body is read) and connections dropped in the middle of an upload (a fraction
    `drop_upload` of the uploads of a multipart part or a data file, sent chunked or
    of at least `big` bytes: part of the body reaches the server, then both sides are
    cut). Every request gets a connection of
    its own (`Connection: close` is added), so each one is a candidate. Seeded;
    `counts` says what was injected, `requests` lists every request's method and
    target (with no faults asked for, the proxy only counts)."""

    def __init__(self, upstream_port: int, seed: int, slowdown: float = 0.0,
                 drop_upload: float = 0.0, big: int = 1 << 20):
        import random
        import threading

        self.upstream_port = upstream_port
        self.slowdown = slowdown
        self.drop_upload = drop_upload
        self.big = big
        self.counts = {"requests": 0, "slowdown": 0, "dropped": 0}
        self.requests: list[tuple[str, str]] = []
        # Each request's method, target and the access key id it was signed with.
        self.signed: list[tuple[str, str, str]] = []
        self._dropped: set[bytes] = set()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self._sock.close()

    def _accept(self) -> None:
        import threading

        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _pipe(src, dst) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _serve(self, conn) -> None:
        import threading

        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                data = conn.recv(65536)
                if not data:
                    conn.close()
                    return
                head += data
            head, _, body = head.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = 0
            chunked = False
            kept = [lines[0]]
            key_id = ""
            for line in lines[1:]:
                name = line.split(b":", 1)[0].strip().lower()
                if name == b"authorization" and b"Credential=" in line:
                    key_id = line.split(b"Credential=", 1)[1].split(b"/", 1)[0].decode()
                if name == b"content-length":
                    length = int(line.split(b":", 1)[1])
                if name == b"transfer-encoding" and b"chunked" in line.lower():
                    chunked = True
                if name not in (b"connection", b"keep-alive"):
                    kept.append(line)
            kept.append(b"Connection: close")
            with self._lock:
                self.counts["requests"] += 1
                method, _, rest = lines[0].decode("latin-1").partition(" ")
                self.requests.append((method, rest.rpartition(" ")[0]))
                self.signed.append((method, rest.rpartition(" ")[0], key_id))
                slow = self._rng.random() < self.slowdown
                # An upload: a part of a multipart upload, or a data file's body.
                target = lines[0].split(b" ")[1] if b" " in lines[0] else b""
                upload = lines[0].startswith(b"PUT ") and (
                    b"partNumber=" in target or b"/data/" in target) and (
                    chunked or length >= self.big)
                # Each upload is cut at most once: a transient fault, which the
                # client's retry then gets through (the backoff of a fault that
                # repeats grows to 20 s a try).
                # The first upload that can be cut is, for certain (a seed may
                # otherwise cut none: seen in CI).
                drop = (not slow and upload and target not in self._dropped
                        and self.drop_upload > 0
                        and (not self._dropped or self._rng.random() < self.drop_upload))
                if drop:
                    self._dropped.add(target)
                if slow:
                    self.counts["slowdown"] += 1
                if drop:
                    self.counts["dropped"] += 1
            if slow:
                xml = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                       b"<Message>Please reduce your request rate.</Message>"
                       b"<RequestId>floe-test</RequestId></Error>")
                conn.sendall(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
                             b"Content-Length: " + str(len(xml)).encode() +
                             b"\r\nConnection: close\r\n\r\n" + xml)
                conn.close()
                return
            up = socket.create_connection(("127.0.0.1", self.upstream_port))
            up.sendall(b"\r\n".join(kept) + b"\r\n\r\n" + body)
            if drop:
                # Part of the body reaches the server, then both sides are cut.
                # (A short body may all be in already: wait for more only briefly.)
                sent = len(body)
                conn.settimeout(0.5)
                while sent < (length // 2 if length else 64 * 1024):
                    try:
                        data = conn.recv(65536)
                    except socket.timeout:
                        break
                    if not data:
                        break
                    up.sendall(data)
                    sent += len(data)
                for s in (up, conn):
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                 b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.close()
                return
            threading.Thread(target=self._pipe, args=(conn, up), daemon=True).start()
            self._pipe(up, conn)
        except OSError:
            try:
                conn.close()
            except OSError:
                pass
