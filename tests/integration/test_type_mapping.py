"""floe's Postgres type mapping against a real server: a table with a column of
every mapped type is read with tests/tools/type_tool (catalog resolution, text
SELECT, floe's converters, Arrow arrays back to JSON), and every value is compared
with what PostgreSQL itself renders for it. Values the Arrow type cannot hold
must come back as null plus an issue with the documented reason."""

from __future__ import annotations

import json
import struct
import subprocess

import psycopg
import pytest

# Postgres renders the expected values: ISO 8601 with astronomical years (44 BC =
# -0043), the same form type_tool prints.
HELPERS = r"""
CREATE FUNCTION iso_year(y int) RETURNS text IMMUTABLE LANGUAGE sql AS $$
  SELECT CASE WHEN a < 0 THEN '-' ELSE '' END ||
         CASE WHEN length(abs(a)::text) >= 4 THEN abs(a)::text
              ELSE lpad(abs(a)::text, 4, '0') END
  FROM (SELECT CASE WHEN y < 0 THEN y + 1 ELSE y END AS a) s $$;
CREATE FUNCTION iso(d date) RETURNS text IMMUTABLE LANGUAGE sql AS $$
  SELECT CASE WHEN NOT isfinite(d) THEN d::text ELSE
         iso_year(extract(year FROM d)::int) || '-' ||
         lpad(extract(month FROM d)::text, 2, '0') || '-' ||
         lpad(extract(day FROM d)::text, 2, '0') END $$;
CREATE FUNCTION iso(t timestamp) RETURNS text IMMUTABLE LANGUAGE sql AS $$
  SELECT CASE WHEN NOT isfinite(t) THEN t::text ELSE
         iso_year(extract(year FROM t)::int) || to_char(t, '-MM-DD"T"HH24:MI:SS.US') END $$;
CREATE FUNCTION iso(t timestamptz) RETURNS text STABLE LANGUAGE sql AS $$
  SELECT iso(t AT TIME ZONE 'UTC') || 'Z' $$;
CREATE FUNCTION iso(t time) RETURNS text IMMUTABLE LANGUAGE sql AS $$
  SELECT to_char(t::interval, 'HH24:MI:SS.US') $$;
CREATE FUNCTION item_json(x item) RETURNS json IMMUTABLE LANGUAGE sql AS $$
  SELECT CASE WHEN x::text IS NULL THEN NULL ELSE
    json_build_object('id', (x).id, 'label', (x).label, 'price', (x).price::text,
                      'tags', (x).tags) END $$;
"""

TYPES = r"""
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN price AS numeric(12,4);
CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
CREATE TYPE item AS (id int4, label text, price numeric(6,2), tags text[]);
"""


def arr(expr: str) -> str:
    """Postgres' elements of a 1-D array in order (lower bounds dropped), each
    rendered by `expr` over x."""
    return (f"CASE WHEN {{c}} IS NULL THEN NULL ELSE "
            f"to_json(ARRAY(SELECT {expr} FROM generate_subscripts({{c}}, 1) AS s, "
            f"LATERAL (SELECT ({{c}})[s] AS x) l ORDER BY s)) END")


def rng(bound: str) -> str:
    return (f"CASE WHEN {{c}} IS NULL THEN NULL ELSE json_build_object("
            f"'lower', (SELECT {bound} FROM (SELECT lower({{c}}) AS x) s), "
            f"'upper', (SELECT {bound} FROM (SELECT upper({{c}}) AS x) s), "
            f"'lower_inclusive', lower_inc({{c}}), 'upper_inclusive', upper_inc({{c}}), "
            f"'empty', isempty({{c}})) END")


INTERVAL = ("CASE WHEN {c} IS NULL THEN NULL ELSE json_build_object("
            "'months', (extract(year FROM {c}) * 12 + extract(month FROM {c}))::int, "
            "'days', extract(day FROM {c})::int, "
            "'microseconds', (extract(hour FROM {c}) * 3600000000 + "
            "extract(minute FROM {c}) * 60000000 + extract(microseconds FROM {c}))::int8) END")

# (column, type, SQL rendering the expected JSON value from {c}, literals for rows 1-3)
COLUMNS = [
    ("c_bool", "bool", "{c}", ["true", "false", "true"]),
    ("c_int2", "int2", "{c}", ["1", "-32768", "32767"]),
    ("c_int4", "int4", "{c}", ["42", "-2147483648", "2147483647"]),
    ("c_int8", "int8", "{c}", ["-1", "-9223372036854775808", "9223372036854775807"]),
    ("c_oid", "oid", "{c}::int8", ["12345", "4294967295", "0"]),
    ("c_float4", "float4", "{c}::text", ["3.14", "'NaN'", "'-Infinity'"]),
    ("c_float8", "float8", "{c}::text",
     ["2.718281828459045", "'Infinity'", "1e-300"]),
    ("c_num10_2", "numeric(10,2)", "{c}::text", ["12345678.9", "-0.05", "0"]),
    ("c_num10_3", "numeric(10,3)", "{c}::text", ["1.5", "-1.5", "9999999.999"]),
    ("c_num", "numeric", "{c}::text",
     ["'NaN'", "123456789012345678901234567890.123456789", "'-Infinity'"]),
    ("c_num50", "numeric(50,5)", "{c}::text",
     ["1234567890123456789012345678901234567890.12345", "-1", "'NaN'"]),
    ("c_money", "money", "{c}::text", ["12.34", "-1000000.5", "0"]),
    ("c_text", "text", "{c}", ["$$a \"b\", c\\d {e} (f)$$", "$$ünïcödé ✓\n\ttab$$", "''"]),
    ("c_varchar", "varchar(20)", "{c}", ["'x'", "'NULL'", "' spaced '"]),
    ("c_bpchar", "char(5)", "{c}", ["'ab'", "'abcde'", "''"]),
    ("c_name", "name", "{c}::text", ["'pg_class'", "'Ab C'", "''"]),
    ("c_bytea", "bytea", "encode({c}, 'hex')",
     ["'\\x00ff10'", "''", "decode(repeat('ab', 3000), 'hex')"]),
    ("c_date", "date", "iso({c})", ["'2024-02-29'", "'0044-03-15 BC'", "'5874897-12-31'"]),
    ("c_time", "time", "iso({c})", ["'03:04:05.123456'", "'00:00:00'", "'23:59:59.5'"]),
    ("c_timetz", "timetz", "{c}::text",
     ["'03:04:05+05:30'", "'23:59:59.999999-08'", "'00:00:00+00'"]),
    ("c_ts", "timestamp", "iso({c})",
     ["'2024-01-02 03:04:05.1'", "'0044-03-15 12:00:00 BC'",
      "'294247-01-10 04:00:54.775807'"]),
    ("c_tstz", "timestamptz", "iso({c})",
     ["'2024-01-02 03:04:05.123456+05:30'", "'1969-12-31 23:59:59.999999+00'",
      "'0001-01-01 00:00:00+00 BC'"]),
    ("c_interval", "interval", INTERVAL,
     ["'1 year 2 mons 3 days 04:05:06.789'", "'-1 days +02:03:00'",
      "'-1 years -2 mons +3 days -04:05:06.000001'"]),
    ("c_uuid", "uuid", "replace({c}::text, '-', '')",
     ["'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'",
      "'ffffffff-ffff-ffff-ffff-ffffffffffff'"]),
    ("c_json", "json", "{c}::text", ["'{\"a\": [1, 2.50, \"x\"]}'", "'null'", "'\"s\"'"]),
    ("c_jsonb", "jsonb", "{c}::text", ["'{\"b\": 1, \"a\": \"x\"}'", "'[]'", "'1.0'"]),
    ("c_xml", "xml", "{c}::text", ["'<a x=\"1\">t &amp; u</a>'", "'text'", "''"]),
    # inet's ::text cast always shows the mask; its output function does not.
    ("c_inet", "inet", "CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END", ["'192.168.0.1/24'", "'::1'", "'10.0.0.1'"]),
    ("c_cidr", "cidr", "{c}::text", ["'10.0.0.0/8'", "'2001:db8::/32'", "'1.2.3.4/32'"]),
    ("c_macaddr", "macaddr", "{c}::text",
     ["'08:00:2b:01:02:03'", "'ff-ff-ff-ff-ff-ff'", "'000000000000'"]),
    ("c_macaddr8", "macaddr8", "{c}::text",
     ["'08:00:2b:01:02:03:04:05'", "'08:00:2b:01:02:03'", "'0000000000000000'"]),
    ("c_enum", "mood", "{c}::text", ["'happy'", "'sad'", "'ok'"]),
    ("c_domain", "price", "{c}::text", ["1.5", "-99999999.9999", "0"]),
    ("c_posint", "posint", "{c}", ["1", "2147483647", "7"]),
    ("c_composite", "item", "item_json({c})",
     ["ROW(1, $$a,b \"c\" \\ d$$, 1.5, ARRAY['x', 'y z', NULL])::item",
      "ROW(NULL, NULL, NULL, NULL)::item", "ROW(3, '', -0.01, '{}')::item"]),
    ("c_int4range", "int4range", rng("x"), ["'[1,10)'", "'empty'", "'(,5]'"]),
    ("c_tstzrange", "tstzrange", rng("iso(x)"),
     ["'[2024-01-01,2024-01-02)'", "'(,)'", "'[0044-03-15 BC,)'"]),
    ("c_numrange", "numrange", rng("x::text"), ["'[1.5,2.25]'", "'(,0)'", "'empty'"]),
    ("c_int4_arr", "int4[]", arr("x"), ["'{1,NULL,3}'", "'[0:2]={7,8,9}'", "'{}'"]),
    ("c_text_arr", "text[]", arr("x"),
     ["ARRAY[$$a,b$$, $$c\"d$$, $$e\\f$$, NULL, 'NULL', '', ' lead', '{x}']", "'{}'",
      "ARRAY['ünï']"]),
    ("c_num_arr", "numeric(8,2)[]", arr("x::text"),
     ["'{1.5,-2,NULL}'", "'{}'", "'[-1:-1]={999999.99}'"]),
    ("c_tstz_arr", "timestamptz[]", arr("iso(x)"),
     ["ARRAY['2024-01-02 03:04:05+00'::timestamptz, NULL]", "'{}'",
      "ARRAY['0044-03-15 BC'::timestamptz]"]),
    ("c_date_arr", "date[]", arr("iso(x)"),
     ["'{2024-01-01,NULL,0001-01-01 BC}'", "'{}'", "'{1970-01-01}'"]),
    ("c_uuid_arr", "uuid[]", arr("replace(x::text, '-', '')"),
     ["ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, NULL]", "'{}'", "NULL"]),
    ("c_enum_arr", "mood[]", arr("x::text"), ["'{happy,sad}'", "'{}'", "'{ok,NULL}'"]),
    ("c_item_arr", "item[]", arr("item_json(x)"),
     ["ARRAY[ROW(1, 'x,y', 2.5, ARRAY['q'])::item, NULL, ROW(NULL, NULL, NULL, NULL)::item]",
      "'{}'", "NULL"]),
    ("c_varchar_arr", "varchar(3)[]", arr("x"), ["'{ab,\"a b\"}'", "'{}'", "'{\"\"}'"]),
    ("c_point", "point", "{c}::text", ["'(1,2)'", "'(-1.5,0)'", "'(0,0)'"]),
]

# Row 4: values the Arrow type cannot hold -> (literal, expected issue reason).
SPECIAL = {
    "c_num10_2": ("'NaN'", "not_a_number"),
    "c_num10_3": ("'NaN'", "not_a_number"),
    "c_domain": ("'NaN'", "not_a_number"),
    "c_date": ("'infinity'", "infinite"),
    "c_ts": ("'infinity'", "infinite"),
    "c_tstz": ("'-infinity'", "infinite"),
    "c_time": ("'24:00:00'", "out_of_range"),
    "c_int4_arr": ("'{{1,2},{3,4}}'", "multidimensional_array"),
    "c_num_arr": ("'{1.5,NaN}'", "not_a_number"),
    "c_tstzrange": ("'[2024-01-01,infinity)'", "infinite"),
    "c_composite": ("ROW(1, 'x', 'NaN', NULL)::item", "not_a_number"),
    "c_date_arr": ("'{2024-01-01,-infinity}'", "infinite"),
}
# Row 5: a timestamp after Arrow's last microsecond (294247-01-10 04:00:54.775807).
SPECIAL_2 = {"c_ts": ("'294276-12-31 23:59:59.999999'", "out_of_range")}

EXPECTED_ARROW = {
    "c_bool": "bool", "c_int2": "int16", "c_int4": "int32", "c_int8": "int64",
    "c_oid": "int64", "c_float4": "float", "c_float8": "double",
    "c_num10_2": "decimal128(10, 2)", "c_num10_3": "decimal128(10, 3)",
    "c_num": "string", "c_num50": "string", "c_money": "string", "c_text": "string",
    "c_bytea": "binary", "c_date": "date32[day]", "c_time": "time64[us]",
    "c_timetz": "string", "c_ts": "timestamp[us]", "c_tstz": "timestamp[us, tz=UTC]",
    "c_interval": "struct<months: int32, days: int32, microseconds: int64>",
    "c_uuid": "fixed_size_binary[16]", "c_enum": "string",
    "c_domain": "decimal128(12, 4)", "c_posint": "int32",
    "c_composite": "struct<id: int32, label: string, price: decimal128(6, 2), "
                   "tags: list<item: string>>",
    "c_int4range": "struct<lower: int32, upper: int32, lower_inclusive: bool, "
                   "upper_inclusive: bool, empty: bool>",
    "c_int4_arr": "list<item: int32>", "c_num_arr": "list<item: decimal128(8, 2)>",
    "c_tstz_arr": "list<item: timestamp[us, tz=UTC]>",
}


def float4(text: str) -> float:
    return struct.unpack("f", struct.pack("f", float(text)))[0]


def normalize(col: str, expected):
    """Postgres' rendering in the tool's JSON form, where the two differ."""
    if expected is None:
        return None
    if col in ("c_float4", "c_float8"):
        if expected in ("NaN", "Infinity", "-Infinity"):
            return expected
        return float4(expected) if col == "c_float4" else float(expected)
    return expected


def run_tool(tool, pg, table: str) -> dict:
    out = subprocess.run(
        [str(tool("type_tool")), "--conninfo", pg.dsn, "--table", table,
         "--order-by", "id"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def insert(conn, columns, row_id: int, values: dict[str, str]):
    names = ["id"] + list(values)
    conn.execute(f"INSERT INTO all_types ({', '.join(names)}) VALUES "
                 f"({row_id}, {', '.join(values.values())})")


def create_all_types(pg):
    """The all_types table (rows 1-3 ordinary values, 4-5 special values, 6 all
    nulls); returns Postgres' rendering of every value and its raw text, by id."""
    with pg.connect() as conn:
        try:
            conn.execute("SELECT '<a/>'::xml")
        except psycopg.errors.FeatureNotSupported:
            # A server built without libxml (the matrix's PostgreSQL 18 wheel) has
            # no xml values to decode: the column is left out, on that server only.
            COLUMNS[:] = [c for c in COLUMNS if c[1] != "xml"]
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute(TYPES)
        conn.execute(HELPERS)
        cols = ", ".join(f"{name} {typ}" for name, typ, _, _ in COLUMNS)
        conn.execute(f"CREATE TABLE all_types (id int PRIMARY KEY, {cols})")
        for r in range(3):
            insert(conn, COLUMNS, r + 1, {name: lits[r] for name, _, _, lits in COLUMNS})
        insert(conn, COLUMNS, 4, {k: v[0] for k, v in SPECIAL.items()})
        insert(conn, COLUMNS, 5, {k: v[0] for k, v in SPECIAL_2.items()})
        conn.execute("INSERT INTO all_types (id) VALUES (6)")
        exprs = ", ".join(expr.format(c=name) for name, _, expr, _ in COLUMNS)
        expected_rows = conn.execute(
            f"SELECT id, {exprs} FROM all_types ORDER BY id").fetchall()
        raw_text = {
            row[0]: row[1:] for row in conn.execute(
                f"SELECT id, {', '.join(name + '::text' for name, *_ in COLUMNS)} "
                f"FROM all_types ORDER BY id").fetchall()}
    return expected_rows, raw_text


def check_rows_and_issues(doc: dict, expected_rows, raw_text) -> None:
    """doc: {"rows": [...] in id order, "issues": [{"row": index, "column", "raw",
    "reason"}]} (type_tool's form)."""
    rows = doc["rows"]
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 5, 6]
    special = {4: SPECIAL, 5: SPECIAL_2}
    for row, expected in zip(rows, expected_rows):
        row_id = expected[0]
        for (col, *_), want in zip(COLUMNS, expected[1:]):
            if col in special.get(row_id, {}):
                assert row[col] is None, (row_id, col, row[col])
                continue
            assert row[col] == normalize(col, want), (row_id, col, row[col], want)

    # Each unrepresentable value: one issue, the documented reason, the raw text as
    # Postgres printed it; nothing else is reported.
    got = {(doc["rows"][i["row"]]["id"], i["column"]): i for i in doc["issues"]}
    assert len(got) == len(doc["issues"])
    want_keys = {(rid, col) for rid, cols in special.items() for col in cols}
    assert set(got) == want_keys
    col_index = {name: k for k, (name, *_) in enumerate(COLUMNS)}
    for (rid, col), issue in got.items():
        assert issue["reason"] == special[rid][col][1], issue
        assert issue["raw"] == raw_text[rid][col_index[col]], issue


def test_every_mapped_type_decodes_to_what_postgres_renders(tool, pg):
    expected_rows, raw_text = create_all_types(pg)
    doc = run_tool(tool, pg, "all_types")
    by_name = {c["name"]: c for c in doc["columns"]}
    for col, arrow_type in EXPECTED_ARROW.items():
        assert by_name[col]["arrow_type"] == arrow_type, col
    assert by_name["c_domain"]["kind"] == "domain"
    assert by_name["c_enum"]["kind"] == "enum"
    assert by_name["c_composite"]["kind"] == "composite"
    assert by_name["c_int4range"]["kind"] == "range"
    assert by_name["c_int4_arr"]["kind"] == "array"
    check_rows_and_issues(doc, expected_rows, raw_text)


@pytest.mark.parametrize("copy_format", ["binary", "text"])
def test_every_mapped_type_through_the_snapshot_equals_what_postgres_renders(
        tool, pg, tmp_path, copy_format):
    """The snapshot reader's Arrow output: binary COPY (send formats decoded by floe,
    every other type through its output function) and text COPY give the same values
    and the same issues as the text converters."""
    expected_rows, raw_text = create_all_types(pg)
    out = tmp_path / "rows.jsonl"
    slot = f"types_{copy_format}"
    proc = subprocess.run(
        [str(tool("snapshot_tool")), "--dsn", pg.dsn, "--slot", slot,
         "--tables-json", '[["public", "all_types"]]', "--workers", "1",
         "--output", "arrow", "--copy-format", copy_format, "--jsonl", str(out)],
        capture_output=True, text=True, timeout=120)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        pg.execute(f"SELECT pg_drop_replication_slot('{slot}')")
    lines = sorted((json.loads(line) for line in out.read_text().splitlines()),
                   key=lambda l: l["row"]["id"])
    doc = {"rows": [l["row"] for l in lines],
           "issues": [dict(i, row=k) for k, l in enumerate(lines) for i in l["issues"]]}
    check_rows_and_issues(doc, expected_rows, raw_text)


def test_citext_maps_to_text(tool, pg):
    with pg.connect() as conn:
        try:
            conn.execute("CREATE EXTENSION citext")
        except psycopg.Error as e:
            pytest.skip(f"the citext extension is not installed on this server: {e}")
        conn.execute("CREATE TABLE ci (id int PRIMARY KEY, c citext, a citext[])")
        conn.execute("INSERT INTO ci VALUES (1, 'MiXeD Case', ARRAY['A,b', NULL]), "
                     "(2, '', '{}'), (3, NULL, NULL)")
        expected = conn.execute(
            "SELECT c::text, CASE WHEN a IS NULL THEN NULL ELSE "
            "to_json(ARRAY(SELECT x::text FROM unnest(a) WITH ORDINALITY u(x, i) "
            "ORDER BY i)) END FROM ci ORDER BY id").fetchall()
    doc = run_tool(tool, pg, "ci")
    cols = {c["name"]: c for c in doc["columns"]}
    assert cols["c"]["arrow_type"] == "string"
    assert cols["c"]["pg_type"] == "citext"
    assert cols["a"]["arrow_type"] == "list<item: string>"
    assert [(r["c"], r["a"]) for r in doc["rows"]] == [tuple(e) for e in expected]
    assert doc["issues"] == []
