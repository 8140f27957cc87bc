// Typed reads of floe's keys (keys.h) from Iceberg table metadata.
#pragma once

#include <string>
#include <vector>

#include "floe/common/lsn.h"
#include "floe/iceberg/table_metadata.h"

namespace floe::lake {

/// The highest `floe.commit-lsn` on the current snapshot's ancestry (snapshots
/// without it, such as compactions, are skipped); the invalid LSN when none: every
/// source transaction at or below it is in the Bronze table.
Lsn CommittedLsnOf(const iceberg::TableMetadata& metadata);

/// The snapshot holding a Bronze table's latest watermark-backfill record
/// (kBackfillSummaryKey): the first snapshot back from the current one that carries
/// it, unless one carrying a full copy (kSnapshotLsnSummaryKey) comes first; null
/// when none. Where expiry removed a parent, the walk goes on with the newest
/// remaining snapshot older than it (`floe expire` keeps the snapshot of an
/// unfinished backfill, not the compactions between it and the head).
const iceberg::Snapshot* LatestBackfillRecord(const iceberg::TableMetadata& metadata);

/// Whether `snapshot`'s backfill record says the backfill goes on (`"done": false`,
/// or a record that cannot be read: kept, to be reported when floe resumes).
bool BackfillUnfinished(const iceberg::Snapshot& snapshot);

/// Silver's watermark: the `floe.bronze-commit-lsn` (kWatermarkSummaryKey) of the
/// newest snapshot on the current snapshot's ancestry that has one; 0 when none does.
uint64_t SilverWatermark(const iceberg::TableMetadata& metadata);

/// The snapshot of the last merge (or backfill) of a Silver table: the newest on the
/// current snapshot's ancestry that carries the watermark and is not a compaction
/// (`replace`, which carries the watermark forward but merges nothing); null when
/// there is none. Its time is how fresh Silver is.
const iceberg::Snapshot* LastMergeSnapshot(const iceberg::TableMetadata& metadata);

/// The strings of a table property holding a JSON array of names (kPrimaryKeyProperty,
/// kSilverKeyProperty, ...); empty when the property is missing or not such an array.
std::vector<std::string> NamesProperty(const iceberg::TableMetadata& metadata,
                                       const char* key);

}  // namespace floe::lake
