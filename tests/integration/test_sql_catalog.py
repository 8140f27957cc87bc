"""floe's SQL catalog and PyIceberg's SqlCatalog share one catalog database
(SQLite file or PostgreSQL): each sees the other's namespaces and tables, and
floe's commits are compare-and-swap."""

import json
import subprocess

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog


@pytest.fixture(params=["sqlite", "postgres"])
def env(request, tmp_path, tool):
    if request.param == "sqlite":
        db = tmp_path / "catalog.db"
        uri, target = f"sqlite:///{db}", ["--db", str(db)]
    else:
        pg = request.getfixturevalue("pg")
        c = pg.cluster
        uri = f"postgresql+psycopg://postgres@127.0.0.1:{c.port}/{pg.name}"
        target = ["--pg", pg.dsn]
    py = SqlCatalog("floe", uri=uri, warehouse=f"file://{tmp_path}/wh")

    def floe(*args, expect_rc=0):
        out = subprocess.run([str(tool("catalog_tool")), *target, *args],
                             capture_output=True, text=True)
        assert out.returncode == expect_rc, out.stdout + out.stderr
        return json.loads(out.stdout)

    return py, floe


def make_table(py, ident, rows):
    data = pa.table({"id": pa.array(rows, pa.int64())})
    table = py.create_table(ident, schema=data.schema)
    table.append(data)
    return table


def ids(table):
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def test_floe_reads_what_pyiceberg_registered(env):
    py, floe = env
    py.create_namespace(("bronze", "shop"))
    table = make_table(py, "bronze.shop.orders", [1, 2, 3])
    assert floe("load", "bronze.shop.orders") == {
        "metadata_location": table.metadata_location}
    assert floe("list-namespaces") == {"namespaces": [["bronze"]]}
    assert floe("list-namespaces", "bronze") == {"namespaces": [["bronze", "shop"]]}
    assert floe("list-tables", "bronze.shop") == {"tables": ["orders"]}
    missing = floe("load", "bronze.shop.nope", expect_rc=3)
    assert missing["kind"] == "no such table"


def test_pyiceberg_reads_what_floe_registered_and_committed(env):
    py, floe = env
    py.create_namespace("src")
    source = make_table(py, "src.t", [1, 2])
    first = source.metadata_location
    source.append(pa.table({"id": pa.array([3], pa.int64())}))
    second = py.load_table("src.t").metadata_location

    floe("create-namespace", "bronze.copy", "--property", "owner=floe")
    assert ("bronze",) in py.list_namespaces()
    assert py.load_namespace_properties("bronze.copy")["owner"] == "floe"

    floe("register", "bronze.copy.t", first)
    assert ids(py.load_table("bronze.copy.t")) == [1, 2]

    floe("commit", "bronze.copy.t", first, second)
    assert ids(py.load_table("bronze.copy.t")) == [1, 2, 3]

    # A commit from a stale base is refused and changes nothing.
    stale = floe("commit", "bronze.copy.t", first, first, expect_rc=3)
    assert stale["kind"] == "commit failed"
    assert py.load_table("bronze.copy.t").metadata_location == second


def test_pyiceberg_commits_are_visible_to_floe_and_fence_it(env):
    py, floe = env
    py.create_namespace("ns")
    table = make_table(py, "ns.t", [1])
    seen = floe("load", "ns.t")["metadata_location"]
    table.append(pa.table({"id": pa.array([2], pa.int64())}))  # PyIceberg moves on
    now = py.load_table("ns.t").metadata_location
    assert floe("load", "ns.t")["metadata_location"] == now != seen
    assert floe("commit", "ns.t", seen, seen, expect_rc=3)["kind"] == "commit failed"
    assert ids(py.load_table("ns.t")) == [1, 2]


def test_a_failed_postgres_connection_never_shows_the_password(tool):
    out = subprocess.run(
        [str(tool("catalog_tool")), "--pg",
         "host=127.0.0.1 port=1 user=floe password=s3cret-Pa55 connect_timeout=2",
         "list-namespaces"], capture_output=True, text=True)
    assert out.returncode == 3
    err = json.loads(out.stdout)
    assert "cannot connect to the PostgreSQL catalog" in err["error"]
    assert "s3cret" not in out.stdout + out.stderr
