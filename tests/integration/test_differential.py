"""The randomized differential test (differential.py): per seed, a random schema and a
random concurrent workload against a real PostgreSQL while `floe run` streams and is
SIGKILLed at random moments; after each round `floe silver` runs and Silver must
equal the source row for row (PyIceberg and DuckDB against psql) and Bronze must hold
exactly the changes an audit trigger recorded, per committed transaction.

CI runs a fixed set of seeds, and one more with the cases of differential.PENDING on
too (fixed, slower: they wait for floe's discovery); FLOE_DIFF_SEEDS=1,2,3 runs others,
FLOE_DIFF_ENABLE=name switches on a PENDING case, FLOE_DIFF_DISABLE=name switches off an
ON one. `make soak` runs random seeds, every case on, for SOAK_SECONDS."""

from __future__ import annotations

import pytest

from differential import CI_PENDING_SEEDS, ci_seeds, enabled_features, run_seed
from floerun import duckdb_setup


@pytest.mark.parametrize("seed", ci_seeds())
def test_differential(seed, floe_bin, pg, tmp_path, duckdb_con):
    duckdb_setup(duckdb_con)
    stats = run_seed(seed, floe_bin, pg, tmp_path / f"seed-{seed}", duckdb_con,
                     features=enabled_features())
    print(stats.line())
    assert stats.rounds > 0 and stats.changes > 0, stats.line()


@pytest.mark.parametrize("seed", CI_PENDING_SEEDS)
def test_differential_with_every_case(seed, floe_bin, pg, tmp_path, duckdb_con):
    """The PENDING cases too: a table re-created, renamed, out of the publication and
    back, partitions attached and detached, a dotted schema, generated columns,
    REPLICA IDENTITY USING INDEX, a type change Iceberg cannot promote."""
    duckdb_setup(duckdb_con)
    stats = run_seed(seed, floe_bin, pg, tmp_path / f"seed-{seed}", duckdb_con,
                     features=enabled_features(every_case=True))
    print(stats.line())
    assert stats.rounds > 0 and stats.changes > 0, stats.line()
