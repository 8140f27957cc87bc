"""The integration tests' one "Silver equals the source" oracle (not a test file).

The oracle is the source table read with psycopg (psql's view of it), never floe's
own fold or verify. Silver is read by two independent readers, PyIceberg's scan and
DuckDB's iceberg_scan on the table's current metadata file, and each must equal the
source row for row and column for column:

* the same columns: the source's (less `leave_out`, source columns Silver is meant
  to lack, such as a generated column), plus Silver's debugging column
  `cdc_commit_lsn` and nothing else (no other cdc_* column), read from the table
  schema, so an empty table is checked too;
* no key twice, no key missing, no key extra;
* equal values of the same Python type (an int is not a float, a date not a
  datetime, Decimal('1.50') not Decimal('1.5'), a naive timestamp not an aware
  one); a difference names the key and the columns, with values cut short (a
  TOASTed body is tens of KB);
* `cdc_commit_lsn` (unless the source has a column of that name, then compared
  like any other) set on every row, the same for both readers, and not above the
  Silver snapshot's watermark `floe.bronze-commit-lsn`.

Normalisation is kept to what the readers need: a uuid is compared as its text
(DuckDB returns it as text), element by element in arrays. Floats NaN equal NaN.

`check_silver(run, pg, con, table, key)` asserts all that and returns Silver's rows
(PyIceberg, without `cdc_commit_lsn`) in key order; `silver_differences` returns the
problems instead (for polling). `table` is "schema.table", "table" (public) or a
(schema, table) pair. `want=` replaces the whole table by rows the caller read from
the source (a row filter's rows, a column list's columns).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from typing import Any

from psycopg import sql as psql

SERVICE = "svc"
LSN = "cdc_commit_lsn"
WATERMARK = "floe.bronze-commit-lsn"


def table_name(table: str | tuple[str, str]) -> tuple[str, str]:
    """(schema, table) of "schema.table", "table" (public) or a (schema, table) pair."""
    if isinstance(table, tuple):
        schema, name = table
        return schema, name
    schema, dot, name = table.partition(".")
    return (schema, name) if dot else ("public", schema)


def source_columns_and_rows(pg, table) -> tuple[list[str], list[dict]]:
    schema, name = table_name(table)
    with pg.connect() as conn:
        cur = conn.execute(psql.SQL("SELECT * FROM {}.{}").format(
            psql.Identifier(schema), psql.Identifier(name)))
        names = [d.name for d in cur.description]
        return names, [dict(zip(names, r)) for r in cur.fetchall()]


def source_rows(pg, table) -> list[dict]:
    """The source table's rows read with psycopg (the oracle), in no order."""
    return source_columns_and_rows(pg, table)[1]


def by_key(rows: list[dict], key: list[str]) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in key))


def norm(v: Any) -> Any:
    """A value as compared: uuids as text (DuckDB reads them as text), recursively."""
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    return v


def same_value(a: Any, b: Any) -> bool:
    """Equal normalised values of the same type (Python's == lets 1 == 1.0 == True,
    Decimal('1.5') == Decimal('1.50') and date == datetime pass)."""
    a, b = norm(a), norm(b)
    if a is None or b is None:
        return a is None and b is None
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, decimal.Decimal):
        if a.is_nan() or b.is_nan():
            return a.is_nan() and b.is_nan()
        return a == b and a.as_tuple().exponent == b.as_tuple().exponent
    if isinstance(a, (dt.datetime, dt.time)):
        return a == b and (a.tzinfo is None) == (b.tzinfo is None)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


def _show(v: Any, width: int = 40) -> str:
    text = repr(v)
    if len(text) > width:
        text = text[:width] + f"... ({len(text)} chars)"
    if v is None or text.startswith(type(v).__name__):
        return text
    return f"{type(v).__name__} {text}"


def silver_table(run, table, service: str = SERVICE):
    return run.catalog().load_table(("silver", service, *table_name(table)))


def silver_by_reader(run, con, table, service: str = SERVICE):
    """Silver's Iceberg table and its (columns, rows) by reader."""
    t = silver_table(run, table, service)
    names = [f.name for f in t.schema().fields]
    path = t.metadata_location.removeprefix("file://")
    dk = con.execute("SELECT * FROM iceberg_scan(?)", [path]).fetch_arrow_table()
    # DuckDB's names are case-insensitive (of `Flag` and `flag` it calls the second
    # `flag_1`); its columns come in the schema's order: take the schema's names.
    if dk.num_columns == len(names):
        dk = dk.rename_columns(names)
    py = t.scan().to_arrow()
    return t, {"PyIceberg": (py.column_names, py.to_pylist()),
               "DuckDB": (dk.column_names, dk.to_pylist())}


def _key_part(v: Any) -> Any:
    """A key value as a dict key: NaN (which equals nothing in Python, itself
    included) as a marker, as PostgreSQL's float equality has NaN = NaN."""
    v = norm(v)
    if isinstance(v, float) and math.isnan(v):
        return ("NaN",)
    return v


def _keyed(rows: list[dict], key: list[str]) -> tuple[dict[tuple, dict], list[tuple]]:
    out: dict[tuple, dict] = {}
    dupes = []
    for r in rows:
        k = tuple(_key_part(r[c]) for c in key)
        if k in out:
            dupes.append(k)
        out[k] = r
    return out, dupes


def _differing(want: dict[tuple, dict], got: dict[tuple, dict],
               columns: list[str]) -> list[tuple[tuple, list[str]]]:
    out = []
    for k in sorted(want.keys() & got.keys(), key=str):
        cols = [c for c in columns if not same_value(want[k].get(c), got[k].get(c))]
        if cols:
            out.append((k, cols))
    return out


def _describe(differing, want, got, first: str, second: str) -> str:
    lines = [f"{len(differing)} keys with differing values, e.g. (key, columns) "
             f"{differing[:5]}"]
    for k, cols in differing[:3]:
        for c in cols[:3]:
            lines.append(f"    {k} {c}: {first} {_show(want[k].get(c))}, "
                         f"{second} {_show(got[k].get(c))}")
    return "\n".join(lines)


def silver_differences(run, pg, con, table, key: list[str],
                       leave_out: tuple[str, ...] = (), service: str = SERVICE,
                       want: list[dict] | None = None,
                       _rows: list | None = None) -> list[str]:
    """How Silver (PyIceberg and DuckDB) differs from the source table; [] when equal.
    `want`: the rows Silver must hold instead of the whole source table, read from
    the source by the caller (a row filter's rows, a column list's columns, rows
    read before a partition was detached), every row with the same columns; an
    empty `want` checks that Silver has no rows, its columns unchecked."""
    schema, name = table_name(table)
    label = f"Silver {schema}.{name}"
    if want is None:
        src_names, src = source_columns_and_rows(pg, table)
    else:
        src_names, src = (list(want[0]) if want else None), want
        assert all(list(r) == src_names for r in want), "`want` rows differ in columns"
    if src_names is None:  # nothing to expect but no rows
        src_names = []
    missing_out = [c for c in leave_out if c not in src_names]
    assert not missing_out, f"leave_out names no source column: {missing_out}"
    columns = [c for c in src_names if c not in leave_out]
    lsn_is_ours = LSN not in src_names
    want, dupes = _keyed([{c: r[c] for c in columns} for r in src], key)
    assert not dupes, f"the source {schema}.{name} repeats keys {dupes[:5]}"

    t, readers = silver_by_reader(run, con, table, service)
    snap = t.current_snapshot()
    mark = snap.summary.get(WATERMARK) if snap is not None and snap.summary else None
    problems = []
    lsns: dict[str, dict[tuple, Any]] = {}
    for reader, (names, rows) in readers.items():
        extra_cols = [c for c in names if c not in columns and not (lsn_is_ours and c == LSN)]
        lacking = [c for c in columns if c not in names]
        if lsn_is_ours and LSN not in names:
            lacking.append(LSN)
        if (extra_cols or lacking) and (columns or want is None):
            problems.append(f"{reader}: {label} has columns the source lacks {extra_cols}, "
                            f"lacks {lacking} (Silver's columns: {names})")
        got, dupes = _keyed(rows, key)
        if dupes:
            problems.append(f"{reader}: {label}: {len(dupes)} keys more than once, e.g. "
                            f"{sorted(set(dupes), key=str)[:5]}")
        missing = sorted(want.keys() - got.keys(), key=str)
        extra = sorted(got.keys() - want.keys(), key=str)
        if missing:
            problems.append(f"{reader}: {label}: {len(missing)} source keys missing, e.g. "
                            f"{missing[:5]}")
        if extra:
            problems.append(f"{reader}: {label}: {len(extra)} keys not in the source, "
                            f"e.g. {extra[:5]}")
        differing = _differing(want, got, columns)
        if differing:
            problems.append(f"{reader}: {label}: "
                            + _describe(differing, want, got, "source", "Silver"))
        if lsn_is_ours and LSN in names:
            lsns[reader] = {k: r[LSN] for k, r in got.items()}
            bad = [(tuple(norm(r[c]) for c in key), r[LSN]) for r in rows
                   if type(r[LSN]) is not int or r[LSN] <= 0
                   or (mark is not None and r[LSN] > int(mark))]
            if bad:
                problems.append(
                    f"{reader}: {label}: {len(bad)} rows whose {LSN} is null, not "
                    f"positive or above the watermark {WATERMARK}={mark}, e.g. "
                    + ", ".join(f"{k}: {v!r}" for k, v in sorted(bad, key=str)[:5]))
        if reader == "PyIceberg" and _rows is not None:
            _rows.extend(by_key([{c: v for c, v in r.items()
                                  if not (lsn_is_ours and c == LSN)} for r in rows], key))
    if len(lsns) == 2:
        py, dk = lsns["PyIceberg"], lsns["DuckDB"]
        apart = sorted((k for k in py.keys() & dk.keys() if py[k] != dk[k]), key=str)
        if apart:
            problems.append(f"{label}: PyIceberg and DuckDB read different {LSN} for "
                            f"{len(apart)} keys, e.g. "
                            + ", ".join(f"{k}: {py[k]} vs {dk[k]}" for k in apart[:5]))
    return problems


def check_silver(run, pg, con, table, key: list[str], leave_out: tuple[str, ...] = (),
                 service: str = SERVICE, want: list[dict] | None = None) -> list[dict]:
    """Asserts that Silver, read by PyIceberg and by DuckDB, equals the source table
    (or `want`, see silver_differences; the module's docstring says how); returns
    Silver's rows (PyIceberg, without cdc_commit_lsn) in key order."""
    rows: list[dict] = []
    problems = silver_differences(run, pg, con, table, key, leave_out, service, want,
                                  _rows=rows)
    assert not problems, "\n".join(problems)
    return rows


def reader_differences(label: str, names: list[str], rows: list[dict], pg, table,
                       key: list[str]) -> list[str]:
    """How a Silver table read by another engine (its column `names` and `rows`, values
    turned into psycopg's Python types) differs from the source `table`: the source's
    columns plus cdc_commit_lsn, no key twice, missing or extra, equal values of the
    same type (same_value)."""
    schema, name = table_name(table)
    src_names, src = source_columns_and_rows(pg, table)
    want, _ = _keyed(src, key)
    problems = []
    if sorted(names) != sorted([*src_names, LSN]):
        problems.append(f"{label}: columns {names}, the source's {src_names} + {LSN}")
    got, dupes = _keyed([{c: r[c] for c in src_names if c in r} for r in rows], key)
    if dupes:
        problems.append(f"{label}: keys more than once, e.g. {dupes[:5]}")
    missing = sorted(want.keys() - got.keys(), key=str)
    extra = sorted(got.keys() - want.keys(), key=str)
    if missing or extra:
        problems.append(f"{label}: {len(missing)} source keys missing (e.g. {missing[:5]}), "
                        f"{len(extra)} not in the source (e.g. {extra[:5]})")
    differing = _differing(want, got, [c for c in src_names if c in names])
    if differing:
        problems.append(f"{label} against {schema}.{name}: "
                        + _describe(differing, want, got, "source", "the reader"))
    return problems
