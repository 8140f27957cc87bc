"""Regenerates the fuzz targets' seed corpora in tests/fuzz/corpus/ (see README.md).

Seeds come from the real producers of each input:
  * a throwaway PostgreSQL 15 (tests/integration/pgcluster.py): binary and text COPY
    messages (copy_binary), the text form of values of every converter kind
    (type_text), pgoutput messages from pg_logical_slot_peek_binary_changes
    (pgoutput);
  * floe's own writers, through build/fuzz/fuzz_seed_writer (manifest,
    table_metadata, message_json);
  * PyIceberg, a foreign writer: manifests, manifest lists and metadata JSON
    (manifest, table_metadata).

Run after building the fuzz targets (make fuzz, or cmake --build build/fuzz):
    .venv/bin/python tests/fuzz/make_corpus.py [--out tests/fuzz/corpus]
Existing seeds with the same names are overwritten; others are kept.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

SEP_MESSAGES = b"\xff\xfe"  # between CopyData / pgoutput messages (copy_binary, pgoutput)
SEP_VALUES = b"\xff"  # between text values (type_text)


def write(out: Path, target: str, name: str, data: bytes) -> None:
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def join_messages(messages: list[bytes]) -> bytes | None:
    """The messages behind 0xff 0xfe separators, or None when one holds the separator."""
    if any(SEP_MESSAGES in m for m in messages):
        return None
    return SEP_MESSAGES.join(messages)


# ---- PostgreSQL -------------------------------------------------------------------

# copy_binary_fuzz's kTypes, in order: (type, how the snapshot selects it).
COPY_TYPES = [
    "int4", "text", "int8", "bool", "int2", "oid", "float4", "float8", "numeric(10,2)",
    "numeric", "date", "time", "timestamp", "timestamptz", "uuid", "bytea", "varchar",
    "interval", "int4[]", "jsonb", "mood",
]
# Types read as text in a binary COPY (no BinaryFormat): selected as their text.
COPY_AS_TEXT = {"interval", "int4[]", "jsonb"}

COPY_ROWS = {
    "int4": ["0", "'-2147483648'", "2147483647", "42"],
    "text": ["''", "'caf\u00e9 \\ tab\there'", "'line\nbreak'", "'x'"],
    "int8": ["0", "'-9223372036854775808'", "9223372036854775807", "7"],
    "bool": ["true", "false", "true", "false"],
    "int2": ["0", "'-32768'", "32767", "5"],
    "oid": ["0", "4294967295", "1", "16384"],
    "float4": ["0", "'NaN'", "'-Infinity'", "1.5"],
    "float8": ["0", "'NaN'", "'Infinity'", "-2.25e300"],
    "numeric(10,2)": ["0", "'NaN'", "-12345678.90", "0.01"],
    "numeric": ["0", "'Infinity'", "'-Infinity'", "123456789012345678901234567890.123456789"],
    "date": ["'2000-01-01'", "'infinity'", "'-infinity'", "'4713-01-01 BC'"],
    "time": ["'00:00'", "'24:00'", "'23:59:59.999999'", "'12:34:56.5'"],
    "timestamp": ["'2000-01-01'", "'infinity'", "'294276-12-31 23:59:59'",
                  "'4713-01-01 00:00 BC'"],
    "timestamptz": ["'2024-01-02 03:04:05.5+00'", "'-infinity'", "'1970-01-01 00:00+00'",
                    "'2000-02-29 12:00+05:30'"],
    "uuid": ["'0f8fad5b-d9cb-469f-a165-70867728950e'", "'00000000-0000-0000-0000-000000000000'",
             "'ffffffff-ffff-ffff-ffff-ffffffffffff'", "gen_random_uuid()"],
    "bytea": ["''", "'\\x00ff10'", "'\\xdeadbeef'", "'abc'"],
    "varchar": ["''", "'v'", "'\u00fc'", "'long value'"],
    "interval": ["'0'", "'1 year 2 mons 3 days 04:05:06.7'", "'-1 day'", "'178000000 years'"],
    "int4[]": ["'{}'", "'{1,NULL,3}'", "'{{1,2},{3,4}}'", "'[0:1]={5,6}'"],
    "jsonb": ["'{}'", "'{\"a\": [1, null]}'", "'\"s\"'", "'null'"],
    "mood": ["'happy'", "'sad'", "'ok'", "'happy'"],
}


def copy_table(conn, name: str, types: list[str]) -> None:
    cols = ", ".join(f"c{i} {t}" for i, t in enumerate(types))
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {name} ({cols})")
        for r in range(4):
            values = ", ".join(f"{COPY_ROWS[t][r]}::{t}" for t in types)
            cur.execute(f"INSERT INTO {name} VALUES ({values})")
        cur.execute(f"INSERT INTO {name} VALUES ({', '.join('NULL' for _ in types)})")
    conn.commit()


def copy_messages(conn, query: str) -> list[bytes]:
    out = []
    with conn.cursor() as cur:
        with cur.copy(query) as copy:
            for data in copy:
                out.append(bytes(data))
    return out


def postgres_seeds(out: Path) -> None:
    import psycopg
    from pgcluster import PgCluster

    with PgCluster(extra_conf={"logical_decoding_work_mem": "64kB"}) as pg:
        with psycopg.connect(pg.dsn()) as conn:
            with conn.cursor() as cur:
                cur.execute("CREATE TYPE mood AS ENUM ('happy', 'sad', 'ok')")
                cur.execute("CREATE TYPE item AS (id int4, label text, price numeric(6,2),"
                            " tags text[])")
                cur.execute("CREATE TYPE outer_t AS (inner_v item, span int8range,"
                            " at timestamp, uuids uuid[])")
                cur.execute("CREATE PUBLICATION pub FOR ALL TABLES")
            conn.commit()
            with conn.cursor() as cur:
                cur.execute("SELECT pg_create_logical_replication_slot('seeds', 'pgoutput')")
            conn.commit()
            copy_seeds(out, conn)
            type_text_seeds(out, conn)
            pgoutput_seeds(out, conn)


def copy_seeds(out: Path, conn) -> None:
    groups = [COPY_TYPES[0:7], COPY_TYPES[7:14], COPY_TYPES[14:21]]
    for g, types in enumerate(groups):
        table = f"copy{g}"
        copy_table(conn, table, types)
        first = COPY_TYPES.index(types[0])
        header = bytes([len(types)]) + bytes(range(first, first + len(types)))
        select = ", ".join(f"c{i}::text" if t in COPY_AS_TEXT else f"c{i}"
                           for i, t in enumerate(types))
        binary = copy_messages(conn, f"COPY (SELECT {select} FROM {table}) TO STDOUT"
                                     " (FORMAT binary)")
        joined = join_messages(binary)
        if joined is not None:
            write(out, "copy_binary", f"binary_{table}", header + joined)
        # The whole COPY in one message (several tuples and the trailer together).
        write(out, "copy_binary", f"binary_{table}_one_message", header + b"".join(binary))
        text = copy_messages(conn, f"COPY {table} TO STDOUT")
        joined = join_messages(text)
        if joined is not None:
            write(out, "copy_binary", f"text_{table}", bytes([0x80 | header[0]]) +
                  header[1:] + joined)
    # A zero-column table: the header, empty tuples and the trailer.
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE empty_cols ()")
        cur.execute("INSERT INTO empty_cols DEFAULT VALUES")
    conn.commit()
    binary = copy_messages(conn, "COPY empty_cols TO STDOUT (FORMAT binary)")
    write(out, "copy_binary", "binary_no_columns", b"\x00" + join_messages(binary))


# type_text_fuzz's kTypes, by index: SQL expressions whose ::text is a seed value.
TYPE_TEXT_VALUES = {
    0: ["true", "false"],
    1: ["'-32768'::int2", "32767", "0"],
    2: ["'-2147483648'::int4", "2147483647", "17"],
    3: ["'-9223372036854775808'::int8", "9223372036854775807"],
    4: ["4294967295::oid", "0::oid"],
    5: ["'NaN'::float4", "'-Infinity'::float4", "1.17549435e-38::float4", "3.4e38::float4"],
    6: ["'NaN'::float8", "'Infinity'::float8", "2.2250738585072014e-308::float8",
        "-1.5e300::float8"],
    7: ["12345678.90::numeric(10,2)", "'NaN'::numeric", "-0.01::numeric(10,2)",
        "1e20::numeric"],
    8: ["1234567890123456789012345678.0123456789::numeric(38,10)",
        "0.00000000001::numeric", "'Infinity'::numeric"],
    9: ["999::numeric(3,0)", "-5::numeric(3,0)", "1000.5::numeric"],
    10: ["123456789012345678901234567890.123456789::numeric", "'-Infinity'::numeric"],
    11: ["'caf\u00e9'::text", "''::text", "E'tab\\there'::text"],
    12: ["'\\x00ff'::bytea", "''::bytea", "'abc'::bytea"],
    13: ["'2000-01-01'::date", "'infinity'::date", "'4713-01-01 BC'::date",
         "'5874897-12-31'::date"],
    14: ["'00:00'::time", "'24:00'::time", "'23:59:59.999999'::time"],
    15: ["'2000-01-01 00:00'::timestamp", "'infinity'::timestamp",
         "'294276-12-31 23:59:59.999999'::timestamp", "'4713-01-01 00:00 BC'::timestamp"],
    16: ["'2024-01-02 03:04:05.5+00'::timestamptz", "'-infinity'::timestamptz",
         "'1970-01-01 00:00+00'::timestamptz"],
    17: ["'1 year 2 mons 3 days 04:05:06.7'::interval", "'-1 day -00:00:01'::interval",
         "'178000000 years'::interval", "'0'::interval"],
    18: ["'0f8fad5b-d9cb-469f-a165-70867728950e'::uuid"],
    19: ["'{1,NULL,3}'::int4[]", "'{}'::int4[]", "'{{1,2},{3,4}}'::int4[]",
          "'[0:1]={5,6}'::int4[]"],
    20: ["ARRAY['a', 'b,c', 'NULL', NULL, '', 'q\"uote', 'back\\slash']::text[]",
          "'{\"\"}'::text[]"],
    21: ["ARRAY['2024-01-01 00:00+00', 'infinity']::timestamptz[]",
          "'{}'::timestamptz[]"],
    22: ["ARRAY[1.5, NULL, 999.99]::numeric(5,2)[]", "ARRAY['NaN']::numeric[]"],
    23: ["ARRAY['(1,1),(0,0)'::box, '(2,2),(1,1)'::box]"],
    24: ["ROW(1, 'a,b \"c\"', 1.50, ARRAY['x', 'y z'])::item", "ROW(2, NULL, NULL, NULL)::item",
          "ROW(3, '', 'NaN', '{}')::item"],
    25: ["'[1,10)'::int4range", "'empty'::int4range", "'(,5]'::int4range",
          "'[3,)'::int4range"],
    26: ["'[2024-01-01 00:00+00,infinity)'::tstzrange", "'(,)'::tstzrange"],
    27: ["'[2000-01-01,2000-02-01)'::daterange", "'[-infinity,2000-01-01)'::daterange"],
    28: ["'[1.5,NaN]'::numrange", "'(,)'::numrange"],
    29: ["ARRAY[ROW(1, 'x', 2.50, ARRAY['t'])::item, NULL, ROW(2, 'y,\"z\"', NULL, NULL)::item]"],
    30: ["ROW(ROW(1, 'in', 1.00, ARRAY['a'])::item, '[1,5)'::int8range,"
          " '2000-01-01 00:00'::timestamp,"
          " ARRAY['0f8fad5b-d9cb-469f-a165-70867728950e']::uuid[])::outer_t",
          "ROW(NULL, 'empty'::int8range, 'infinity'::timestamp, '{}')::outer_t"],
    31: ["ARRAY['1 day'::interval, '-2 mons'::interval, NULL]"],
    32: ["ARRAY['\\x00ff'::bytea, ''::bytea, NULL]"],
    33: ["ARRAY['2000-01-01'::date, 'infinity'::date]"],
    34: ["ARRAY[1.5::float8, 'NaN', '-Infinity', NULL]"],
    35: ["ARRAY[true, false, NULL]"],
    36: ["ARRAY['[1,2)'::int4range, 'empty', NULL]"],
    37: ["123.4::numeric(4,1)", "-0.5::numeric(4,1)"],
}


def type_text_seeds(out: Path, conn) -> None:
    with conn.cursor() as cur:
        for index, exprs in TYPE_TEXT_VALUES.items():
            values = []
            for e in exprs:
                cur.execute(f"SELECT ({e})::text")
                values.append(cur.fetchone()[0].encode())
            write(out, "type_text", f"type{index:02d}", bytes([index]) + SEP_VALUES.join(values))


def pgoutput_seeds(out: Path, conn) -> None:
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE po (id int PRIMARY KEY, name text, price numeric(10,2),"
                    " at timestamptz, big text)")
        cur.execute("ALTER TABLE po REPLICA IDENTITY FULL")
    conn.commit()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO po VALUES (1, 'a', 1.50, '2024-01-01 00:00+00', NULL),"
                    " (2, NULL, 'NaN', 'infinity', repeat('x', 3000))")
        cur.execute("UPDATE po SET name = 'b' WHERE id = 1")
        cur.execute("DELETE FROM po WHERE id = 2")
        cur.execute("SELECT pg_logical_emit_message(true, 'floe.watermark',"
                    " '{\"table\":\"public.po\",\"chunk\":\"c1\",\"mark\":\"low\"}')")
        cur.execute("SELECT pg_logical_emit_message(false, 'app', '\\x00ff'::bytea)")
    conn.commit()
    with conn.cursor() as cur:
        cur.execute("TRUNCATE po")
        cur.execute("ALTER TABLE po ADD COLUMN extra int4[]")
        cur.execute("INSERT INTO po VALUES (3, 'c', 0, now(), NULL, '{1,2}')")
    conn.commit()
    # A transaction big enough to be streamed (logical_decoding_work_mem = 64kB).
    with conn.cursor() as cur:
        cur.execute("INSERT INTO po SELECT g, 'n' || g, g, now(), NULL, NULL"
                    " FROM generate_series(10, 1500) g")
    conn.commit()

    def peek(*options: str) -> list[bytes]:
        with conn.cursor() as cur:
            args = ", ".join(f"'{o}'" for o in options)
            cur.execute("SELECT data FROM pg_logical_slot_peek_binary_changes("
                        f"'seeds', NULL, NULL, 'publication_names', 'pub', {args})")
            rows = [bytes(r[0]) for r in cur.fetchall()]
        conn.commit()
        return rows

    for version, extra in [(1, []), (2, ["streaming", "on"]), (3, ["binary", "true"])]:
        messages = peek("proto_version", str(version), "messages", "true", *extra)
        # One seed per transaction (B ... C), and the small ones whole.
        txns, cur = [], []
        for m in messages:
            cur.append(m)
            if m[:1] in (b"C", b"c", b"M") and not (m[:1] == b"M" and len(cur) > 1):
                txns.append(cur)
                cur = []
        if cur:
            txns.append(cur)
        for i, txn in enumerate(txns):
            if sum(len(m) for m in txn) > 8192:
                # The streamed transaction: its first chunk only.
                txn = txn[:24]
            joined = join_messages(txn)
            if joined is not None:
                write(out, "pgoutput", f"v{version}_txn{i}", bytes([version - 1]) + joined)
    # CopyData envelopes as the walsender sends them: XLogData ('w') around a
    # pgoutput message, and a primary keepalive ('k').
    first = peek("proto_version", "1")[0]
    xlog = b"w" + struct.pack(">QQQ", 0x16B3740, 0x16B3760, 757_000_000_000_000) + first
    keepalive = b"k" + struct.pack(">QQB", 0x16B3760, 757_000_000_000_000, 1)
    write(out, "pgoutput", "copydata_envelopes", b"\x00" + SEP_MESSAGES.join([xlog, keepalive]))


# ---- floe's writers ------------------------------------------------------------------

def floe_seeds(out: Path, build_dir: Path) -> None:
    writer = build_dir / "fuzz_seed_writer"
    if not writer.exists():
        raise SystemExit(f"{writer} is missing: cmake --build {build_dir} "
                         "--target fuzz_seed_writer")
    subprocess.run([str(writer), str(out)], check=True)


# ---- PyIceberg -------------------------------------------------------------------

def pyiceberg_seeds(out: Path) -> None:
    from datetime import datetime, timezone

    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    shutil.copy(ROOT / "src/floe/iceberg/testdata/pyiceberg_v2_metadata.json",
                out / "table_metadata" / "pyiceberg_v2_metadata.json")
    warehouse = Path(tempfile.mkdtemp(prefix="floe-fuzz-seeds-"))
    try:
        catalog = SqlCatalog("seeds", uri=f"sqlite:///{warehouse}/catalog.db",
                             warehouse=f"file://{warehouse}")
        catalog.create_namespace("db")
        schema = Schema(NestedField(1, "id", LongType(), required=False),
                        NestedField(2, "name", StringType(), required=False),
                        NestedField(3, "ts", TimestamptzType(), required=False))
        # day(ts) and identity(name) as fields 1000 and 1001: manifest_fuzz's
        # partition type 1 (selector 0x04).
        spec = PartitionSpec(
            PartitionField(source_id=3, field_id=1000, transform=DayTransform(),
                           name="ts_day"),
            PartitionField(source_id=2, field_id=1001, transform=IdentityTransform(),
                           name="name"))
        for name, table_spec, selector in [("pyice_plain", PartitionSpec(), 0x00),
                                           ("pyice_by_day", spec, 0x04)]:
            table = catalog.create_table(f"db.{name}", schema=schema,
                                         partition_spec=table_spec)
            rows = pa.Table.from_pylist(
                [{"id": i, "name": f"n{i % 2}",
                  "ts": datetime(2024, 1, 1 + i % 2, tzinfo=timezone.utc)}
                 for i in range(4)],
                schema=table.schema().as_arrow())
            table.append(rows)
            table.append(rows.slice(0, 1))
            table = catalog.load_table(f"db.{name}")
            meta_path = table.metadata_location.removeprefix("file://")
            (out / "table_metadata" / f"{name}.metadata.json").write_bytes(
                Path(meta_path).read_bytes())
            snapshot = table.current_snapshot()
            list_bytes = Path(snapshot.manifest_list.removeprefix("file://")).read_bytes()
            write(out, "manifest", f"{name}_list", b"\x01" + list_bytes)
            for i, m in enumerate(snapshot.manifests(table.io)[:2]):
                data = Path(m.manifest_path.removeprefix("file://")).read_bytes()
                write(out, "manifest", f"{name}_manifest{i}", bytes([selector]) + data)
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests/fuzz/corpus")
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build/fuzz")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    floe_seeds(args.out, args.build_dir)
    pyiceberg_seeds(args.out)
    postgres_seeds(args.out)
    for d in sorted(args.out.iterdir()):
        files = list(d.iterdir())
        print(f"{d.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
