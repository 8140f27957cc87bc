// Shared by manifest.cc (reading) and manifest_write.cc (writing); not part of the
// module's interface.

#pragma once

#include <arrow/status.h>

#include "floe/iceberg/avro_file_internal.h"
#include "floe/iceberg/schema.h"

/// Returns from the calling function when an Avro C call fails.
#define FLOE_AVRO_OK(expr) \
  ARROW_RETURN_NOT_OK(::floe::iceberg::avro_internal::AvroStatus((expr), #expr))

namespace floe::iceberg::manifest_internal {

/// A manifest's partition type must be a struct.
arrow::Status CheckPartitionType(const Type& partition_type);

}  // namespace floe::iceberg::manifest_internal
