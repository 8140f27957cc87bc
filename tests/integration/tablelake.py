"""The table_tool lake shared by the Iceberg table tests (not a test file): a SQLite
catalog and a warehouse in the test's tmp dir, `floe(...)` running
tests/tools/table_tool on them, PyIceberg's SqlCatalog on the same file, and the
rows table_tool writes."""

import datetime as dt
import json
import subprocess

import pytest
from pyiceberg.catalog.sql import SqlCatalog

BASE = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def expected(ids):
    return [{"id": i, "name": f"name-{i}", "amount": i * 1.5,
             "ts": BASE + dt.timedelta(hours=i)} for i in sorted(ids)]


@pytest.fixture
def lake(tmp_path, tool):
    db = tmp_path / "catalog.db"
    warehouse = f"file://{tmp_path}/wh"

    def floe(*args, check=True):
        out = subprocess.run([str(tool("table_tool")), "--db", str(db),
                              "--warehouse", warehouse, *args],
                             capture_output=True, text=True)
        if check:
            assert out.returncode == 0, out.stderr
            return json.loads(out.stdout)
        return out

    catalog = SqlCatalog("floe", uri=f"sqlite:///{db}", warehouse=warehouse)
    return floe, catalog, tmp_path / "wh"
