#include "floe/lake/metadata.h"

#include "floe/common/parse.h"
#include "floe/lake/keys.h"

namespace floe::lake {

Lsn CommittedLsnOf(const iceberg::TableMetadata& metadata) {
  const iceberg::Snapshot* snapshot = metadata.CurrentSnapshot();
  while (snapshot != nullptr) {
    auto it = snapshot->summary.find(kCommitLsnSummaryKey);
    if (it != snapshot->summary.end()) {
      if (auto value = ParseUint64(it->second)) return Lsn(*value);
    }
    if (!snapshot->parent_snapshot_id) break;
    snapshot = metadata.FindSnapshot(*snapshot->parent_snapshot_id);
  }
  return Lsn();
}

}  // namespace floe::lake
