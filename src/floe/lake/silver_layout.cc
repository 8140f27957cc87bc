#include "floe/lake/silver_layout.h"

#include <optional>

namespace floe::lake {

arrow::Result<iceberg::PartitionSpec> RebucketSpec(const iceberg::TableMetadata& metadata,
                                                   const std::string& column,
                                                   int32_t buckets) {
  const iceberg::Schema* schema = metadata.CurrentSchema();
  const iceberg::NestedField* field = schema->FindField(column);
  if (field == nullptr) {
    return arrow::Status::Invalid("the key column ", column, " is not in the table");
  }
  const iceberg::Transform transform = iceberg::Transform::Bucket(buckets);
  // A field an older spec had (same column, same bucket count) keeps its id and name,
  // as Java's UpdatePartitionSpec does; otherwise a new id and `<column>_bucket_<N>`.
  std::string name = column + "_bucket_" + std::to_string(buckets);
  std::optional<int32_t> field_id;
  for (const iceberg::PartitionSpec& spec : metadata.partition_specs) {
    for (const iceberg::PartitionField& f : spec.fields) {
      if (f.source_id == field->id && f.transform == transform) {
        name = f.name;
        field_id = f.field_id;
      }
    }
  }
  return iceberg::PartitionSpecBuilder(*schema, 0, metadata.last_partition_id)
      .Add(column, transform, name, field_id)
      .Build();
}

}  // namespace floe::lake
