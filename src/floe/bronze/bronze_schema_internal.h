// Helpers shared by bronze_schema.cc (types, new tables, evolution) and
// batch_conformer.cc; not part of the module's interface.

#pragma once

#include <array>
#include <string_view>
#include <vector>

#include "floe/bronze/bronze_schema.h"

namespace floe::bronze::internal {

// The CDC columns of a change-stream batch, in order, after the row columns
// (postgres::CdcMetadataFields): the Bronze ones without cdc_processed_at.
constexpr std::array<const char*, 7> kStreamCdcColumns = {
    kCdcOp, kCdcTs, kCdcSourceLsn, kCdcSourceTxId, kCdcCommitLsn, kCdcSeq, kCdcUnchanged};

bool IsCdcName(std::string_view name);

// A top-level field by id, or null (also for nested ids).
const iceberg::NestedField* TopLevelField(const iceberg::Schema& schema, int32_t id);

arrow::Status CheckSourceColumns(const std::vector<SourceColumn>& columns);

// For each source column, the index of its binding in `bound`, or -1: by attnum
// where both sides know it, then by name where either side does not.
std::vector<int> MatchBindings(const std::vector<SourceColumn>& source,
                               const std::vector<ColumnBinding>& bound);

}  // namespace floe::bronze::internal
