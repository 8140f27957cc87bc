"""Writes pyiceberg_v2_metadata.json: the table metadata PyIceberg produces for a
partitioned, sorted table with a nested schema after two appends, a schema change
and a partition spec change.

Run with the project's virtualenv: .venv/bin/python make_pyiceberg_metadata.py OUT.json
"""

import json
import shutil
import sys
import tempfile
from datetime import datetime, timezone

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from pyiceberg.types import (DoubleType, ListType, LongType, MapType, NestedField, StringType,
                             StructType, TimestamptzType)


def main(out_path: str) -> None:
    warehouse = tempfile.mkdtemp(prefix="floe-golden-")
    try:
        catalog = SqlCatalog("golden", uri=f"sqlite:///{warehouse}/catalog.db",
                             warehouse=f"file://{warehouse}")
        catalog.create_namespace("db")
        schema = Schema(
            NestedField(1, "id", LongType(), required=True),
            NestedField(2, "name", StringType(), required=False),
            NestedField(3, "ts", TimestamptzType(), required=False),
            NestedField(4, "location", StructType(
                NestedField(5, "lat", DoubleType(), required=False),
                NestedField(6, "lon", DoubleType(), required=False)), required=False),
            NestedField(7, "tags", ListType(8, StringType(), element_required=False),
                        required=False),
            NestedField(9, "props", MapType(10, StringType(), 11, StringType(),
                                            value_required=False), required=False),
            identifier_field_ids=[1],
        )
        spec = PartitionSpec(
            PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(),
                           name="name"),
        )
        order = SortOrder(
            SortField(source_id=1, transform=IdentityTransform(),
                      direction=SortDirection.ASC, null_order=NullOrder.NULLS_FIRST),
            SortField(source_id=3, transform=DayTransform(),
                      direction=SortDirection.DESC, null_order=NullOrder.NULLS_LAST),
        )
        table = catalog.create_table("db.events", schema=schema, partition_spec=spec,
                                     sort_order=order,
                                     properties={"write.metadata.previous-versions-max": "10",
                                                 "owner": "floe-tests"})
        arrow_schema = table.schema().as_arrow()

        def batch(ids):
            return pa.Table.from_pylist([
                {"id": i, "name": f"name-{i}",
                 "ts": datetime(2024, 3, 1 + i, 12, 0, tzinfo=timezone.utc),
                 "location": {"lat": 52.0 + i, "lon": 4.0 + i},
                 "tags": ["a", f"t{i}"], "props": {"k": f"v{i}"}} for i in ids
            ], schema=arrow_schema)

        table.append(batch([1, 2, 3]))
        table.append(batch([4, 5]))
        with table.update_schema() as update:
            update.add_column("score", DoubleType(), doc="added after two appends")
            update.add_column(("location", "alt"), DoubleType())
        # Writing day / bucket / truncate partitions needs pyiceberg-core (not installed),
        # so the spec gains them only after the appends, as a second spec.
        with table.update_spec() as update:
            update.add_field("ts", DayTransform(), "ts_day")
            update.add_field("id", BucketTransform(16), "id_bucket")
            update.add_field("name", TruncateTransform(4), "name_trunc")
        table = catalog.load_table("db.events")
        with open(table.metadata_location.removeprefix("file://")) as f:
            metadata = json.load(f)
        with open(out_path, "w") as f:
            json.dump(metadata, f, indent=2)
            f.write("\n")
    finally:
        shutil.rmtree(warehouse)


if __name__ == "__main__":
    main(sys.argv[1])
