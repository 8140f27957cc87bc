"""Changes older than Bronze's bindings: a copy again reads the table's columns from
the catalog, which may be ahead of the stream. The stream then delivers the changes
made before the copy's point, described as the table was then (fewer columns, older
names or types). They must land in Bronze without binding that older shape again:
binding it took a column added since for a dropped one, gave it a new field when the
stream reached the column again, and Silver then read null where the copy's rows
held its values (soak seed 9471945: `UPPER` null in six rows of Silver, after an
internal "change batch has 13 columns, expected 14" and a reconnect). A restart
right after such a copy replays the same older changes and must not bind them
either (floe.source.columns-position).

The oracle is the source read with psql: Silver (PyIceberg and DuckDB) equals it,
and Bronze holds each audited change once."""

from __future__ import annotations

from floerun import floe  # noqa: F401
from oracle import check_silver
from test_divergences import wait_copied, wait_flushed
from test_silver import silver

SETUP = """
CREATE TABLE t (id int PRIMARY KEY, code text, v int);
INSERT INTO t SELECT g, g::text, g FROM generate_series(1, 40) g;
CREATE TABLE t_audit (n bigserial PRIMARY KEY, op text, id int);
CREATE FUNCTION t_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO t_audit (op, id) VALUES (left(TG_OP, 1),
    CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
  RETURN NULL;
END $$;
CREATE TRIGGER t_audit AFTER INSERT OR UPDATE OR DELETE ON t
  FOR EACH ROW EXECUTE FUNCTION t_audit();
"""

# Made while floe is stopped: the retype makes floe copy the table again when the
# stream reaches it.
BEHIND = [
    "UPDATE t SET v = v + 100 WHERE id <= 10",
    "ALTER TABLE t ALTER COLUMN code TYPE int USING code::int",
    "UPDATE t SET v = v + 1 WHERE id = 1",  # the stream sees the retype with it
]
# Made while floe pauses before taking that copy's snapshot: the copy's columns
# (from the catalog) and rows hold them, the stream has not reached them, and it
# delivers them after the copy, described as the table was then (an update without
# `stamp`, then `v` before its rename).
DURING = [
    "UPDATE t SET v = v + 1000 WHERE id BETWEEN 5 AND 15",
    "ALTER TABLE t ADD COLUMN stamp timestamptz",
    "UPDATE t SET stamp = '2030-01-02 03:04:05+00' WHERE id <= 8",
    "DELETE FROM t WHERE id = 20",
    "ALTER TABLE t RENAME COLUMN v TO value",
    "UPDATE t SET value = -value WHERE id BETWEEN 7 AND 9",
]
PAUSE = "copy.before-snapshot@1=sleep:3000"


def _start_behind_a_copy(run, pg, failpoints: str, during: list[str] = DURING):
    run.start().wait_streaming()
    run.stop()
    for statement in BEHIND:
        pg.execute(statement)
    run.start(env={"FLOE_FAILPOINT": failpoints})
    pausing = "failpoint copy.before-snapshot (hit 1): sleeping"
    run.wait_until(lambda: pausing in run.log_text().rsplit("===== floe run start", 1)[-1],
                   60, what=pausing, interval=0.05)
    for statement in during:
        pg.execute(statement)


def _check(run, pg, duckdb_con):
    pg.execute("INSERT INTO t (id, code, value, stamp) VALUES (100, 100, 100, now())")
    pg.execute("UPDATE t SET value = 7 WHERE id = 30")
    wait_flushed(run, pg)
    wait_copied(run, "t")
    silver(run)
    check_silver(run, pg, duckdb_con, "public.t", ["id"])
    audit = [({"I": "c", "U": "u", "D": "d"}[op], i)
             for op, i in pg.execute("SELECT op, id FROM t_audit ORDER BY n")]
    rows = sorted((r for r in run.rows_pyiceberg("public.t") if r["cdc_op"] in "cud"),
                  key=lambda r: (r["cdc_commit_lsn"], r["cdc_seq"]))
    assert [(r["cdc_op"], r["id"]) for r in rows] == audit
    log = run.log_text()
    assert "make a BatchConformer" not in log, run.log_tail()
    assert "stamp: dropped" not in log, run.log_tail()


def test_changes_behind_a_copy_again_keep_the_copys_columns(floe, pg, duckdb_con):
    """The stream reaches a retype Iceberg cannot promote (a copy again); while floe
    pauses before the copy's snapshot (copy.before-snapshot), a column is added and given values,
    another renamed: the copy binds the catalog's columns ahead of the stream."""
    pg.execute(SETUP)
    run = floe(tables=["public.t"])
    _start_behind_a_copy(run, pg, PAUSE)
    run.wait_streaming()
    _check(run, pg, duckdb_con)
    run.stop()


def test_a_restart_right_after_a_copy_again_replays_older_changes_unbound(
        floe, pg, duckdb_con):
    """The same, with floe killed right after the copy committed (copy.after-commit):
    the restart replays the changes before the copy's point in their older shapes."""
    pg.execute(SETUP)
    run = floe(tables=["public.t"])
    _start_behind_a_copy(run, pg, PAUSE + ",copy.after-commit")
    rc = run.wait_exit(120)
    assert rc == -9 and "failpoint copy.after-commit (hit 1): killing" in \
        run.log_text(), run.log_tail()
    run.start().wait_streaming()
    _check(run, pg, duckdb_con)
    run.stop()


def test_another_tables_quarantine_records_before_a_copy_agains_point_are_kept(
        floe, pg, duckdb_con):
    """A copy again that quarantines values commits the shared quarantine table. Its
    point lies ahead of what the stream delivered, and another table's transaction
    committed in between (while floe pauses before the copy's snapshot) brings a
    quarantined value the stream delivers after the copy. Committed at the copy's
    point, the quarantine table counted that record as held and filtered it out
    (code-read (c)); it commits at its own position, so the record lands, once."""
    pg.execute(SETUP + """
        ALTER TABLE t ADD COLUMN m int[];
        UPDATE t SET m = '{{1,2},{3,4}}' WHERE id = 3;  -- quarantined by each copy
        CREATE TABLE a (id int PRIMARY KEY, m int[]);
    """)
    run = floe(tables=["public.t", "public.a"])
    _start_behind_a_copy(run, pg, PAUSE, ["INSERT INTO a VALUES (1, '{{5,6},{7,8}}')"])
    run.wait_streaming()
    wait_copied(run, "t")
    pg.execute("INSERT INTO a VALUES (2, '{{9}}')")
    wait_flushed(run, pg)

    def quarantined():
        rows = run.catalog().load_table(("bronze", run.service, "quarantine")).scan() \
            .to_arrow().to_pylist()
        return sorted((r["source_table"], r["raw_text"]) for r in rows)

    # t's row 3: from the first copy, the update of BEHIND, and the copy again.
    want = [("public.a", "{{5,6},{7,8}}"), ("public.a", "{{9}}")] + \
        [("public.t", "{{1,2},{3,4}}")] * 3
    try:
        run.wait_until(lambda: quarantined() == want, 30, what="the quarantine records")
    except AssertionError as e:
        raise AssertionError(f"the quarantine holds {quarantined()}") from e
    # The copy's point passed, the two tables' rows are in Bronze as the source has
    # them (the arrays null), and a restart repeats no record.
    assert sorted(r["id"] for r in run.rows_pyiceberg("public.a")) == [1, 2]
    run.stop()
    run.start().wait_streaming()
    wait_flushed(run, pg)
    assert quarantined() == want
    run.stop()
