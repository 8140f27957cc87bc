// The CDC metadata columns of a Bronze table, after its row columns, in order:
// cdc_op, cdc_ts, cdc_processed_at, cdc_source_lsn, cdc_source_tx_id,
// cdc_commit_lsn, cdc_seq, cdc_unchanged (docs/design.md). The change stream
// (source/postgres/change_stream.h) produces all but cdc_processed_at, which the
// Bronze writer adds; their names are declared there, once, and reach every module
// above the source through this header.
#pragma once

#include "floe/source/postgres/change_stream.h"

namespace floe::lake {

using postgres::kCdcCommitLsn;
using postgres::kCdcOp;
using postgres::kCdcSeq;
using postgres::kCdcSourceLsn;
using postgres::kCdcSourceTxId;
using postgres::kCdcTs;
using postgres::kCdcUnchanged;
/// When floe wrote the row (timestamptz): the Bronze writer's own column.
inline constexpr const char* kCdcProcessedAt = "cdc_processed_at";

}  // namespace floe::lake
