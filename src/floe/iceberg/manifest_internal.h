// Shared by manifest.cc (reading) and manifest_write.cc (writing); not part of the
// module's interface.

#pragma once

#include <arrow/status.h>

#include "floe/iceberg/schema.h"

namespace floe::iceberg::manifest_internal {

/// A manifest's partition type must be a struct.
arrow::Status CheckPartitionType(const Type& partition_type);

}  // namespace floe::iceberg::manifest_internal
