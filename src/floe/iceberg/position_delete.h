// One row of a position delete file (spec "Position Delete Files"), and the
// reserved field ids of its two columns: what the writer (position_delete_writer.h)
// and the readers (scan.h, key_scan.h) share.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace floe::iceberg {

/// Reserved field ids of the position delete schema.
inline constexpr int32_t kDeleteFilePathFieldId = 2147483546;
inline constexpr int32_t kDeletePosFieldId = 2147483545;

/// One deleted row: the data file's location as the manifest holds it, and the
/// row's 0-based position in that file.
struct PositionDelete {
  std::string file_path;
  int64_t pos = 0;

  friend auto operator<=>(const PositionDelete&, const PositionDelete&) = default;
};

}  // namespace floe::iceberg
