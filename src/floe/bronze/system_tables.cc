#include "floe/bronze/system_tables.h"

#include <mutex>
#include <utility>

#include <arrow/api.h>
#include <arrow/util/utf8.h>
#include <nlohmann/json.hpp>

namespace floe::bronze {

namespace {

namespace ice = floe::iceberg;
namespace pg = floe::postgres;

using ice::NestedField;
using ice::Type;

// The schemas are constants: a failure here is a bug in this file, caught by the
// unit tests, not something a caller could act on.
ice::Schema MakeSchemaOrDie(std::vector<NestedField> fields) {
  return ice::Schema::Make(0, std::move(fields)).ValueOrDie();
}

bool IsValidUtf8(std::string_view text) {
  static std::once_flag once;
  std::call_once(once, [] { arrow::util::InitializeUTF8(); });
  return arrow::util::ValidateUTF8(text);
}

int64_t LsnValue(Lsn lsn) { return static_cast<int64_t>(lsn.value()); }

std::string QualifiedTable(const pg::QuarantineCandidate& c) {
  return c.schema_name + "." + c.table_name;
}

// Column indexes of the two tables, in schema order.
enum MessageColumn {
  kMsgPrefix,
  kMsgContent,
  kMsgContentBytes,
  kMsgTransactional,
  kMsgSourceTable,
  kMsgCdcTs,
  kMsgCdcProcessedAt,
  kMsgCdcSourceLsn,
  kMsgCdcSourceTxId,
  kMsgCdcCommitLsn,
};

enum QuarantineColumn {
  kQSourceTable,
  kQColumnName,
  kQRawText,
  kQReason,
  kQDetail,
  kQCdcSourceLsn,
  kQCdcCommitLsn,
  kQCdcSourceTxId,
  kQCdcSeq,
  kQCdcTs,
  kQCdcProcessedAt,
};

arrow::Result<std::unique_ptr<arrow::RecordBatchBuilder>> MakeBuilder(
    const ice::Schema& schema, int64_t rows) {
  ARROW_ASSIGN_OR_RAISE(auto arrow_schema, ice::ToArrowSchema(schema));
  return arrow::RecordBatchBuilder::Make(arrow_schema, arrow::default_memory_pool(),
                                         rows);
}

}  // namespace

// ---- pg_logical_messages ------------------------------------------------------------

const ice::Schema& LogicalMessagesSchema() {
  static const ice::Schema schema = MakeSchemaOrDie({
      NestedField::Required(1, "prefix", Type::String()),
      NestedField::Optional(2, "content", Type::String(),
                            "the content, when it is valid UTF-8"),
      NestedField::Required(3, "content_bytes", Type::Binary(), "the content, always"),
      NestedField::Required(4, "transactional", Type::Boolean()),
      NestedField::Optional(5, "source_table", Type::String(),
                            "the table a JSON content names (source_table, or "
                            "schema.table)"),
      NestedField::Required(6, "cdc_ts", Type::TimestampTz(),
                            "commit time (transactional) or receive time"),
      NestedField::Required(7, "cdc_processed_at", Type::TimestampTz()),
      NestedField::Required(8, "cdc_source_lsn", Type::Long(), "the message's LSN"),
      NestedField::Optional(9, "cdc_source_tx_id", Type::Long()),
      NestedField::Optional(10, "cdc_commit_lsn", Type::Long()),
  });
  return schema;
}

arrow::Result<ice::PartitionSpec> LogicalMessagesSpec(const ice::Schema& schema) {
  return ice::PartitionSpecBuilder(schema).Day("cdc_ts").Identity("source_table").Build();
}

std::optional<std::string> SourceTableOf(std::string_view content) {
  std::optional<std::string> named = NamedTableOf(content);
  // No PostgreSQL table has a longer qualified name (two identifiers of at most 63
  // bytes, quoted): a longer one stays in `content` only, as it would otherwise
  // become a partition value in every manifest (a 4 MB name made a manifest
  // entry larger than an Avro block and stopped every commit).
  if (named && named->size() > kMaxSourceTableBytes) return std::nullopt;
  return named;
}

std::optional<std::string> NamedTableOf(std::string_view content) {
  const nlohmann::json doc =
      nlohmann::json::parse(content, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;  // also a parse error (discarded)
  auto non_empty_string = [&](const char* key) -> const std::string* {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_string()) return nullptr;
    const std::string& s = it->get_ref<const std::string&>();
    return s.empty() ? nullptr : &s;
  };
  if (const std::string* source_table = non_empty_string("source_table")) {
    return *source_table;
  }
  const std::string* table = non_empty_string("table");
  if (table == nullptr) return std::nullopt;
  if (const std::string* schema = non_empty_string("schema")) {
    return *schema + "." + *table;
  }
  return *table;
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> LogicalMessagesBatch(
    const std::vector<pg::CapturedMessage>& messages,
    const std::vector<int64_t>& received_at_us, int64_t processed_at_us) {
  if (received_at_us.size() != messages.size()) {
    return arrow::Status::Invalid("LogicalMessagesBatch: ", received_at_us.size(),
                                  " receive times for ", messages.size(),
                                  " messages; pass one per message");
  }
  const auto n = static_cast<int64_t>(messages.size());
  ARROW_ASSIGN_OR_RAISE(auto builder, MakeBuilder(LogicalMessagesSchema(), n));
  auto* prefix = builder->GetFieldAs<arrow::StringBuilder>(kMsgPrefix);
  auto* content = builder->GetFieldAs<arrow::StringBuilder>(kMsgContent);
  auto* content_bytes = builder->GetFieldAs<arrow::BinaryBuilder>(kMsgContentBytes);
  auto* transactional = builder->GetFieldAs<arrow::BooleanBuilder>(kMsgTransactional);
  auto* source_table = builder->GetFieldAs<arrow::StringBuilder>(kMsgSourceTable);
  auto* cdc_ts = builder->GetFieldAs<arrow::TimestampBuilder>(kMsgCdcTs);
  auto* processed_at = builder->GetFieldAs<arrow::TimestampBuilder>(kMsgCdcProcessedAt);
  auto* source_lsn = builder->GetFieldAs<arrow::Int64Builder>(kMsgCdcSourceLsn);
  auto* tx_id = builder->GetFieldAs<arrow::Int64Builder>(kMsgCdcSourceTxId);
  auto* commit_lsn = builder->GetFieldAs<arrow::Int64Builder>(kMsgCdcCommitLsn);

  for (size_t i = 0; i < messages.size(); ++i) {
    const pg::CapturedMessage& m = messages[i];
    ARROW_RETURN_NOT_OK(prefix->Append(m.prefix));
    std::optional<std::string> table;
    if (IsValidUtf8(m.content)) {
      ARROW_RETURN_NOT_OK(content->Append(m.content));
      table = SourceTableOf(m.content);
    } else {
      ARROW_RETURN_NOT_OK(content->AppendNull());
    }
    ARROW_RETURN_NOT_OK(content_bytes->Append(m.content));
    ARROW_RETURN_NOT_OK(transactional->Append(m.transactional));
    ARROW_RETURN_NOT_OK(table ? source_table->Append(*table)
                              : source_table->AppendNull());
    ARROW_RETURN_NOT_OK(cdc_ts->Append(m.transactional
                                           ? pg::PgTimestampToUnixMicros(m.commit_time)
                                           : received_at_us[i]));
    ARROW_RETURN_NOT_OK(processed_at->Append(processed_at_us));
    ARROW_RETURN_NOT_OK(source_lsn->Append(LsnValue(m.lsn)));
    ARROW_RETURN_NOT_OK(m.xid ? tx_id->Append(*m.xid) : tx_id->AppendNull());
    ARROW_RETURN_NOT_OK(m.transactional ? commit_lsn->Append(LsnValue(m.commit_lsn))
                                        : commit_lsn->AppendNull());
  }
  return builder->Flush();
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> LogicalMessagesBatch(
    const std::vector<pg::CapturedMessage>& messages, int64_t processed_at_us) {
  return LogicalMessagesBatch(
      messages, std::vector<int64_t>(messages.size(), processed_at_us), processed_at_us);
}

// ---- quarantine -----------------------------------------------------------------------

const ice::Schema& QuarantineSchema() {
  static const ice::Schema schema = MakeSchemaOrDie({
      NestedField::Required(1, "source_table", Type::String(), "schema.table"),
      NestedField::Required(2, "column_name", Type::String()),
      NestedField::Required(3, "raw_text", Type::String(),
                            "the value as Postgres printed it"),
      NestedField::Required(4, "reason", Type::String(), "see docs/type-mapping.md"),
      NestedField::Required(5, "detail", Type::String()),
      NestedField::Required(6, "cdc_source_lsn", Type::Long()),
      NestedField::Required(7, "cdc_commit_lsn", Type::Long()),
      NestedField::Required(8, "cdc_source_tx_id", Type::Long()),
      NestedField::Required(9, "cdc_seq", Type::Int(),
                            "cdc_seq of the Bronze row holding the null"),
      NestedField::Required(10, "cdc_ts", Type::TimestampTz(), "commit time"),
      NestedField::Required(11, "cdc_processed_at", Type::TimestampTz()),
  });
  return schema;
}

arrow::Result<ice::PartitionSpec> QuarantineSpec(const ice::Schema& schema) {
  return ice::PartitionSpecBuilder(schema).Day("cdc_processed_at").Build();
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> QuarantineBatch(
    const std::vector<pg::QuarantineCandidate>& candidates,
    const std::vector<int64_t>& cdc_ts_us, int64_t processed_at_us) {
  if (cdc_ts_us.size() != candidates.size()) {
    return arrow::Status::Invalid("QuarantineBatch: ", cdc_ts_us.size(),
                                  " commit times for ", candidates.size(),
                                  " candidates; pass one per candidate");
  }
  const auto n = static_cast<int64_t>(candidates.size());
  ARROW_ASSIGN_OR_RAISE(auto builder, MakeBuilder(QuarantineSchema(), n));
  auto* source_table = builder->GetFieldAs<arrow::StringBuilder>(kQSourceTable);
  auto* column_name = builder->GetFieldAs<arrow::StringBuilder>(kQColumnName);
  auto* raw_text = builder->GetFieldAs<arrow::StringBuilder>(kQRawText);
  auto* reason = builder->GetFieldAs<arrow::StringBuilder>(kQReason);
  auto* detail = builder->GetFieldAs<arrow::StringBuilder>(kQDetail);
  auto* source_lsn = builder->GetFieldAs<arrow::Int64Builder>(kQCdcSourceLsn);
  auto* commit_lsn = builder->GetFieldAs<arrow::Int64Builder>(kQCdcCommitLsn);
  auto* tx_id = builder->GetFieldAs<arrow::Int64Builder>(kQCdcSourceTxId);
  auto* seq = builder->GetFieldAs<arrow::Int32Builder>(kQCdcSeq);
  auto* cdc_ts = builder->GetFieldAs<arrow::TimestampBuilder>(kQCdcTs);
  auto* processed_at = builder->GetFieldAs<arrow::TimestampBuilder>(kQCdcProcessedAt);

  for (size_t i = 0; i < candidates.size(); ++i) {
    const pg::QuarantineCandidate& c = candidates[i];
    // raw_text is the value's text: Postgres sends it in the database encoding, which
    // floe pins to UTF8 (client_encoding), so it is a valid string.
    ARROW_RETURN_NOT_OK(source_table->Append(QualifiedTable(c)));
    ARROW_RETURN_NOT_OK(column_name->Append(c.issue.column));
    ARROW_RETURN_NOT_OK(raw_text->Append(c.issue.raw_text));
    ARROW_RETURN_NOT_OK(reason->Append(pg::IssueReasonName(c.issue.reason)));
    ARROW_RETURN_NOT_OK(detail->Append(c.issue.detail));
    ARROW_RETURN_NOT_OK(source_lsn->Append(LsnValue(c.source_lsn)));
    ARROW_RETURN_NOT_OK(commit_lsn->Append(LsnValue(c.commit_lsn)));
    ARROW_RETURN_NOT_OK(tx_id->Append(c.xid));
    ARROW_RETURN_NOT_OK(seq->Append(c.seq));
    ARROW_RETURN_NOT_OK(cdc_ts->Append(cdc_ts_us[i]));
    ARROW_RETURN_NOT_OK(processed_at->Append(processed_at_us));
  }
  return builder->Flush();
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> QuarantineBatch(
    const std::vector<pg::QuarantineCandidate>& candidates, int64_t cdc_ts_us,
    int64_t processed_at_us) {
  return QuarantineBatch(candidates, std::vector<int64_t>(candidates.size(), cdc_ts_us),
                         processed_at_us);
}

}  // namespace floe::bronze
