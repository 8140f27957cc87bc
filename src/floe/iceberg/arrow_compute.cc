#include "floe/iceberg/arrow_compute.h"

#include <mutex>

#include <arrow/compute/initialize.h>

namespace floe::iceberg {

arrow::Status EnsureComputeInitialized() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] { status = arrow::compute::Initialize(); });
  return status;
}

}  // namespace floe::iceberg
