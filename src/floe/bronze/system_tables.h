// The two tables floe writes beside the Bronze changelogs (docs/design.md §2,
// docs/audit-and-quarantine.md):
//
//  * `bronze.<service>.pg_logical_messages`: every `pg_logical_emit_message()` record,
//    for audit trails joined to the Bronze tables on cdc_source_tx_id. Partitioned by
//    `day(cdc_ts)` and `identity(source_table)`.
//  * `bronze.<service>.quarantine`: one row per value floe could not write as-is (it
//    was written as null; docs/type-mapping.md). Partitioned by
//    `day(cdc_processed_at)`.
//
// Their schemas, partition specs, and the Arrow batches (iceberg::ToArrowSchema form)
// of their rows. Field ids are 1..n in column order, which is what Table::Create
// assigns a flat schema, so the batches fit the created tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/schema.h"
#include "floe/source/postgres/change_stream.h"

namespace floe::bronze {


// ---- pg_logical_messages ------------------------------------------------------------

/// prefix string (required), content string (the content when it is valid UTF-8, else
/// null), content_bytes binary (required, always the content), transactional boolean
/// (required), source_table string (see SourceTableOf), cdc_ts timestamptz (required:
/// the commit time of a transactional message, the time floe received a
/// non-transactional one), cdc_processed_at timestamptz (required), cdc_source_lsn long
/// (required, the message's LSN), cdc_source_tx_id long (null when the server sent no
/// xid), cdc_commit_lsn long (null for non-transactional messages).
const iceberg::Schema& LogicalMessagesSchema();

/// `day(cdc_ts)` (cdc_ts_day), `identity(source_table)` (source_table), built against
/// `schema` (LogicalMessagesSchema() or the created table's schema).
arrow::Result<iceberg::PartitionSpec> LogicalMessagesSpec(const iceberg::Schema& schema);

/// The table a logical message's content names, when the content is a JSON object
/// with a non-empty string member `source_table` (taken as is), or else a non-empty
/// string member `table`, qualified by a non-empty string member `schema` when there is
/// one (`schema.table`). Anything else (not JSON, not an object, other members, other
/// JSON types) gives nullopt.
std::optional<std::string> SourceTableOf(std::string_view content);
/// The longest source_table SourceTableOf returns; a longer name gives none.
inline constexpr size_t kMaxSourceTableBytes = 1024;
/// The table `content` names, whatever its length (SourceTableOf bounds it).
std::optional<std::string> NamedTableOf(std::string_view content);

/// The rows of `messages`, in order. `received_at_us[i]` is when floe received
/// messages[i] (microseconds since the Unix epoch, UTC): its cdc_ts when it is not
/// transactional (ignored for transactional ones, whose cdc_ts is their commit time).
/// It must have one entry per message. `processed_at_us` fills cdc_processed_at.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> LogicalMessagesBatch(
    const std::vector<postgres::CapturedMessage>& messages,
    const std::vector<int64_t>& received_at_us, int64_t processed_at_us);

/// The same with `processed_at_us` as the receive time of every non-transactional
/// message: right when they are written as they arrive, late by however long they
/// were buffered otherwise.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> LogicalMessagesBatch(
    const std::vector<postgres::CapturedMessage>& messages, int64_t processed_at_us);

// ---- quarantine -----------------------------------------------------------------------

/// source_table string (`schema.table`), column_name string, raw_text string (the
/// value as Postgres printed it), reason string (postgres::IssueReasonName), detail
/// string, cdc_source_lsn long, cdc_commit_lsn long, cdc_source_tx_id long, cdc_seq int
/// (of the Bronze row that holds the null), cdc_ts timestamptz (the transaction's
/// commit time), cdc_processed_at timestamptz. Every column is required.
const iceberg::Schema& QuarantineSchema();

/// `day(cdc_processed_at)` (cdc_processed_at_day), built against `schema`.
arrow::Result<iceberg::PartitionSpec> QuarantineSpec(const iceberg::Schema& schema);

/// The rows of `candidates`, in order, all from one transaction (or one snapshot
/// copy) whose commit time is `cdc_ts_us`. Times are microseconds since the Unix
/// epoch, UTC (postgres::PgTimestampToUnixMicros of a commit time).
arrow::Result<std::shared_ptr<arrow::RecordBatch>> QuarantineBatch(
    const std::vector<postgres::QuarantineCandidate>& candidates, int64_t cdc_ts_us,
    int64_t processed_at_us);

/// The same with each candidate's own commit time: `cdc_ts_us[i]` goes with
/// candidates[i] and must have one entry per candidate.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> QuarantineBatch(
    const std::vector<postgres::QuarantineCandidate>& candidates,
    const std::vector<int64_t>& cdc_ts_us, int64_t processed_at_us);

}  // namespace floe::bronze
