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
