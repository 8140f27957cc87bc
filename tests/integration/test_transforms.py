"""floe's partition transforms agree with PyIceberg's for random values of every
type they apply to (bucket[N] with the spec's Murmur3 hash, truncate[W], and the
time transforms)."""

import decimal
import json
import random
import subprocess
import uuid

import pytest
from pyiceberg import transforms as T
from pyiceberg import types as I

RNG_SEED = 20261130
WIDE = decimal.Context(prec=80)  # exact for 38-digit decimals
N = 300


def rand_values(kind, rng):
    if kind == "int":
        return [rng.randint(-2**31, 2**31 - 1) for _ in range(N)]
    if kind == "long":
        return [rng.randint(-2**63, 2**63 - 1) for _ in range(N)]
    if kind == "date":
        # within Python's date range (years 1..9999), which PyIceberg converts through
        return [rng.randint(-700_000, 2_900_000) for _ in range(N)]
    if kind == "time":
        return [rng.randint(0, 86_400_000_000 - 1) for _ in range(N)]
    if kind in ("timestamp", "timestamptz"):
        return [rng.randint(-2**55, 2**55) for _ in range(N)]
    if kind == "string":
        alphabet = "abcXYZ09 _-éß漢字🙂"
        return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
                for _ in range(N)]
    if kind == "uuid":
        return [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(N)]
    if kind in ("binary", "fixed[8]"):
        size = 8 if kind == "fixed[8]" else None
        return [bytes(rng.getrandbits(8) for _ in range(size or rng.randint(0, 20))).hex()
                for _ in range(N)]
    if kind.startswith("decimal"):
        precision, scale = map(int, kind[8:-1].split(","))
        values = []
        for _ in range(N):
            unscaled = rng.randint(-(10**precision - 1), 10**precision - 1)
            values.append(format(decimal.Decimal(unscaled).scaleb(-scale, WIDE), "f"))
        return values
    raise AssertionError(kind)


ICEBERG_TYPES = {
    "int": I.IntegerType(), "long": I.LongType(), "date": I.DateType(),
    "time": I.TimeType(), "timestamp": I.TimestampType(),
    "timestamptz": I.TimestamptzType(), "string": I.StringType(),
    "uuid": I.UUIDType(), "binary": I.BinaryType(), "fixed[8]": I.FixedType(8),
    "decimal(9,2)": I.DecimalType(9, 2), "decimal(38,10)": I.DecimalType(38, 10),
}


def to_python(kind, value):
    if kind == "uuid":
        return uuid.UUID(value)
    if kind in ("binary", "fixed[8]"):
        return bytes.fromhex(value)
    if kind.startswith("decimal"):
        return decimal.Decimal(value)
    return value


def from_python(kind, result):
    if isinstance(result, bytes):
        return result.hex()
    if isinstance(result, decimal.Decimal):
        scale = -result.as_tuple().exponent
        return f"{int(result.scaleb(scale, WIDE))}e-{scale}"
    return result


CASES = [(k, "bucket[16]") for k in ICEBERG_TYPES] + [(k, "bucket[1000]") for k in
                                                       ("long", "string", "decimal(38,10)")]
CASES += [(k, "truncate[10]") for k in ("int", "long", "string", "binary",
                                        "decimal(9,2)", "decimal(38,10)")]
CASES += [(k, t) for k in ("date", "timestamp", "timestamptz")
          for t in ("year", "month", "day")] + [("timestamp", "hour"),
                                                ("timestamptz", "hour")]


@pytest.mark.parametrize("kind,transform", CASES)
def test_transform_matches_pyiceberg(kind, transform, tool):
    rng = random.Random(f"{RNG_SEED}-{kind}-{transform}")
    values = rand_values(kind, rng) + [None]
    lines = "".join(json.dumps({"type": kind, "transform": transform, "value": v}) + "\n"
                    for v in values)
    out = subprocess.run([str(tool("transform_tool"))], input=lines, capture_output=True,
                         text=True, check=True)
    ours = [json.loads(line) for line in out.stdout.splitlines()]
    assert all("error" not in o for o in ours), [o for o in ours if "error" in o][:3]

    py = T.parse_transform(transform).transform(ICEBERG_TYPES[kind])
    theirs = [from_python(kind, py(to_python(kind, v))) if v is not None else py(None)
              for v in values]
    mismatches = [(v, o["result"], t) for v, o, t in zip(values, ours, theirs)
                  if o["result"] != t]
    assert not mismatches, mismatches[:5]
