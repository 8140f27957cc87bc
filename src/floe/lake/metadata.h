// Typed reads of floe's keys (keys.h) from Iceberg table metadata.
#pragma once

#include "floe/common/lsn.h"
#include "floe/iceberg/table_metadata.h"

namespace floe::lake {

/// The highest `floe.commit-lsn` on the current snapshot's ancestry (snapshots
/// without it, such as compactions, are skipped); the invalid LSN when none: every
/// source transaction at or below it is in the Bronze table.
Lsn CommittedLsnOf(const iceberg::TableMetadata& metadata);

}  // namespace floe::lake
