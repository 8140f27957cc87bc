// What verify.cc, verify_digests.cc and verify_source.cc share (not the module's
// interface).
#pragma once

#include <arrow/status.h>

namespace floe::silver::verify_internal {

/// Arrow's compute functions registered (once), as casts need.
arrow::Status EnsureCompute();

}  // namespace floe::silver::verify_internal
