// Arrow's compute kernels (comparisons, is_in, cast, take) live in libarrow_compute
// since Arrow 21 and must be registered once per process before the first call.
#pragma once

#include <arrow/status.h>

namespace floe::iceberg {

/// Registers Arrow's compute kernels (arrow::compute::Initialize) the first time it
/// is called; every later call returns the first one's status. Thread-safe.
arrow::Status EnsureComputeInitialized();

}  // namespace floe::iceberg
