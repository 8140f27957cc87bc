"""The REST catalog harness itself (restserver.py): Apache Iceberg's REST server on
127.0.0.1 over moto S3, its restart, and the CatalogFaultProxy's faults as PyIceberg
sees them. Also pins down what the Iceberg server answers where floe's REST client
depends on it (a failed commit requirement, register, pagination)."""

from __future__ import annotations

import http.client
import itertools
import socket
from pathlib import Path

import pyarrow as pa
import pytest

from restserver import CatalogFaultProxy, RestCatalogServer, is_commit, path_pattern
from s3server import S3Server

BUCKET = "rest-harness"
_prefixes = itertools.count()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = S3Server(tmp_path_factory.mktemp("moto"))
    try:
        server.make_bucket(BUCKET)
        yield server
    finally:
        server.stop()


@pytest.fixture
def rest(tmp_path: Path, s3: S3Server):
    prefix = f"lake{next(_prefixes)}"
    server = RestCatalogServer(tmp_path / "rest", s3, f"s3://{BUCKET}/{prefix}")
    server.prefix = prefix
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy(rest: RestCatalogServer):
    p = CatalogFaultProxy(rest.port)
    try:
        yield p
    finally:
        p.close()


SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def rows(ids) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()),
                     "name": pa.array([f"n{i}" for i in ids])}, schema=SCHEMA)


def make_table(catalog, name: str = "db.t"):
    ns = name.rsplit(".", 1)[0]
    if (ns,) not in catalog.list_namespaces():
        catalog.create_namespace(ns)
    return catalog.create_table(name, schema=SCHEMA)


def test_create_append_read_lands_in_moto(rest: RestCatalogServer, s3: S3Server):
    assert rest.startup_seconds is not None and rest.startup_seconds < 60
    cat = rest.pyiceberg_catalog()
    table = make_table(cat)
    table.append(rows(range(5)))

    back = cat.load_table("db.t")
    assert back.metadata_location.startswith(f"s3://{BUCKET}/{rest.prefix}/db/t/metadata/")
    assert back.scan().to_arrow().sort_by("id").to_pylist() == rows(range(5)).to_pylist()

    keys = s3.keys(BUCKET, f"{rest.prefix}/")
    metadata = [k for k in keys if k.endswith(".metadata.json")]
    data = [k for k in keys if k.endswith(".parquet")]
    manifests = [k for k in keys if k.endswith(".avro")]
    assert len(metadata) == 2, keys  # create, then the append's commit (by the server)
    assert len(data) == 1 and data[0].startswith(f"{rest.prefix}/db/t/data/"), keys
    assert manifests, keys
    assert back.metadata_location.removeprefix(f"s3://{BUCKET}/") in metadata
    # The backing JdbcCatalog keeps its rows in the SQLite file.
    assert rest.db_path.stat().st_size > 0


def _listeners(port: int) -> list[str]:
    """Local addresses of the TCP sockets listening on `port` (from /proc/net/tcp*)."""
    out = []
    for name, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            fields = line.split()
            addr, p = fields[1].split(":")
            if fields[3] != "0A" or int(p, 16) != port:
                continue
            raw = bytes.fromhex(addr)
            if width == 8:
                out.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                out.append(socket.inet_ntop(socket.AF_INET6, words))
    return out


def _non_loopback_addresses() -> list[str]:
    addrs = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addrs.add(info[4][0])
    except OSError:
        pass
    try:  # the address of the default route, if any (no packet is sent)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))
            addrs.add(s.getsockname()[0])
    except OSError:
        pass
    return sorted(a for a in addrs if not a.startswith("127.") and a != "0.0.0.0")


def test_listens_on_loopback_only(rest: RestCatalogServer):
    listeners = _listeners(rest.port)
    assert listeners, f"nothing listens on {rest.port}"
    assert all(a in ("127.0.0.1", "::ffff:127.0.0.1") for a in listeners), listeners
    for addr in _non_loopback_addresses():
        with pytest.raises(OSError):
            socket.create_connection((addr, rest.port), timeout=2).close()


def test_restart_keeps_tables(rest: RestCatalogServer):
    cat = rest.pyiceberg_catalog()
    make_table(cat).append(rows(range(3)))
    before = cat.load_table("db.t").metadata_location
    rest.restart()
    cat = rest.pyiceberg_catalog()
    table = cat.load_table("db.t")
    assert table.metadata_location == before
    assert table.scan().to_arrow().num_rows == 3
    table.append(rows(range(3, 4)))
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 4


COMMIT = ("POST", "/v1/namespaces/{namespace}/tables/{table}")


def test_lost_commit_response_is_applied(rest: RestCatalogServer, proxy: CatalogFaultProxy):
    direct = rest.pyiceberg_catalog()
    via = rest.pyiceberg_catalog(uri=proxy.uri)
    make_table(via)
    table = via.load_table("db.t")
    proxy.lose_responses(1, match=is_commit)
    with pytest.raises(Exception) as seen:
        table.append(rows(range(4)))
    assert "CommitFailed" not in type(seen.value).__name__
    assert proxy.count(*COMMIT) == 1 and proxy.injected("lose") == 1
    assert proxy.pending() == 0
    # The server applied it: the snapshot is there, with the rows.
    after = direct.load_table("db.t")
    assert after.current_snapshot() is not None
    assert after.scan().to_arrow().num_rows == 4
    # The proxy forwards again: a reload through it sees the same.
    assert via.load_table("db.t").metadata_location == after.metadata_location


def test_fail_with_409_is_commit_failed(rest: RestCatalogServer, proxy: CatalogFaultProxy):
    from pyiceberg.exceptions import CommitFailedException

    via = rest.pyiceberg_catalog(uri=proxy.uri)
    via.create_namespace("db")
    # PyIceberg retries a snapshot commit that got 409 (commit.retry.num-retries,
    # default 4): without retries the 409 reaches the caller.
    table = via.create_table("db.t", schema=SCHEMA,
                             properties={"commit.retry.num-retries": "0"})
    proxy.fail_with(409, 1, match=is_commit)
    with pytest.raises(CommitFailedException):
        table.append(rows(range(2)))
    # Not forwarded: the server has no snapshot.
    assert rest.pyiceberg_catalog().load_table("db.t").current_snapshot() is None
    assert proxy.injected("fail 409") == 1
    # The rule is spent: the next commit goes through.
    via.load_table("db.t").append(rows(range(2)))
    assert rest.pyiceberg_catalog().load_table("db.t").scan().to_arrow().num_rows == 2
    assert proxy.count(*COMMIT) == 2

    # A property update is never retried.
    proxy.fail_with(409, 1, match=is_commit)
    with pytest.raises(CommitFailedException):
        with via.load_table("db.t").transaction() as tx:
            tx.set_properties(k="v")
    assert "k" not in rest.pyiceberg_catalog().load_table("db.t").properties


def test_one_409_is_retried_by_pyiceberg(rest: RestCatalogServer, proxy: CatalogFaultProxy):
    via = rest.pyiceberg_catalog(uri=proxy.uri)
    table = make_table(via)
    proxy.fail_with(409, 1, match=is_commit)
    table.append(rows(range(3)))
    assert proxy.count(*COMMIT) == 2 and proxy.injected() == 1
    assert rest.pyiceberg_catalog().load_table("db.t").scan().to_arrow().num_rows == 3


def test_fail_with_503_and_other_errors(rest: RestCatalogServer, proxy: CatalogFaultProxy):
    from pyiceberg.exceptions import NoSuchTableError, ServiceUnavailableError

    via = rest.pyiceberg_catalog(uri=proxy.uri)
    make_table(via)
    proxy.fail_with(503, 1, match=lambda m, p: m == "GET" and p.endswith("/tables/t"))
    with pytest.raises(ServiceUnavailableError):
        via.load_table("db.t")
    proxy.fail_with(404, 1, match=lambda m, p: m == "GET" and p.endswith("/tables/t"))
    with pytest.raises(NoSuchTableError):
        via.load_table("db.t")
    via.load_table("db.t")
    assert proxy.count("GET", "/v1/namespaces/{namespace}/tables/{table}") == 3


def test_random_faults_are_seeded(rest: RestCatalogServer):
    def run(seed: int) -> list[str]:
        p = CatalogFaultProxy(rest.port)
        try:
            p.random_faults(seed, 0.5, kinds=("lose", 503))
            for _ in range(30):
                conn = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
                try:
                    conn.request("GET", "/v1/config")
                    conn.getresponse().read()
                except (OSError, http.client.HTTPException):
                    pass
                finally:
                    conn.close()
            assert p.count("GET", "/v1/config") == 30
            return [a for _, _, a in p.events]
        finally:
            p.close()

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert first != other
    assert {"forward", "lose", "fail 503"} <= set(first)


def test_path_patterns():
    assert path_pattern("/v1/namespaces/db/tables/t") == COMMIT[1]
    assert path_pattern("/v1/cat/namespaces/a%1Fb/tables/t/metrics") == \
        "/v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics"
    assert path_pattern("/v1/tables/rename") == "/v1/tables/rename"
    assert path_pattern("/v1/namespaces/db/register") == "/v1/namespaces/{namespace}/register"
    assert is_commit("POST", "/v1/namespaces/db/tables/t")
    assert is_commit("POST", "/v1/cat/namespaces/db/tables/t")
    assert not is_commit("POST", "/v1/namespaces/db/tables")
    assert not is_commit("POST", "/v1/namespaces/db/tables/t/metrics")
    assert not is_commit("GET", "/v1/namespaces/db/tables/t")


def test_bearer_token(tmp_path: Path, s3: S3Server):
    server = RestCatalogServer(tmp_path / "rest", s3, f"s3://{BUCKET}/tok", token="s3cr3t")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/v1/config")
        resp = conn.getresponse()
        assert resp.status == 401
        assert b"NotAuthorizedException" in resp.read()
        conn.close()
        cat = server.pyiceberg_catalog()
        cat.create_namespace("db")
        assert ("db",) in cat.list_namespaces()
    finally:
        server.stop()


# -- what Iceberg's REST server answers, where floe's client depends on it ------------


def test_failed_requirement_is_409_commit_failed(rest: RestCatalogServer):
    cat = rest.pyiceberg_catalog()
    make_table(cat).append(rows(range(1)))
    snap = cat.load_table("db.t").current_snapshot().snapshot_id
    status, body = rest.request("POST", "/v1/namespaces/db/tables/t", {
        "identifier": {"namespace": ["db"], "name": "t"},
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                          "snapshot-id": snap + 1}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}]})
    assert status == 409, body
    assert body["error"]["type"] == "CommitFailedException"
    assert body["error"]["code"] == 409
    assert "k" not in cat.load_table("db.t").properties


def test_register_namespace_properties_and_pages(rest: RestCatalogServer):
    cat = rest.pyiceberg_catalog()
    location = make_table(cat).metadata_location
    make_table(cat, "db.u")
    status, body = rest.request("POST", "/v1/namespaces/db/register",
                                {"name": "again", "metadata-location": location})
    assert status == 200, body
    assert body["metadata-location"] == location
    assert cat.load_table("db.again").metadata_location == location

    status, body = rest.request("POST", "/v1/namespaces/db/properties",
                                {"removals": [], "updates": {"owner": "floe"}})
    assert status == 200 and body["updated"] == ["owner"], body
    assert cat.load_namespace_properties("db")["owner"] == "floe"

    status, body = rest.request("GET", "/v1/namespaces/db/tables?pageSize=2")
    assert status == 200 and len(body["identifiers"]) == 2, body
    token = body["next-page-token"]
    status, body = rest.request("GET", f"/v1/namespaces/db/tables?pageSize=2&pageToken={token}")
    assert status == 200 and len(body["identifiers"]) == 1, body

    status, body = rest.request("GET", "/v1/config")
    assert status == 200
    assert "POST /v1/{prefix}/namespaces/{namespace}/register" in body["endpoints"]
    assert "prefix" not in body.get("overrides", {})
