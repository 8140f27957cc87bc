// libFuzzer target for what Bronze parses out of text that others write: a logical
// message's content (SourceTableOf, and the pg_logical_messages row built from it by
// LogicalMessagesBatch), watermark messages (Watermark::Parse), the backfill progress
// kept in a snapshot summary (BackfillProgress::FromJson), the source column bindings
// kept in a table property (ColumnMap::FromJson) and pg_current_snapshot()'s text
// (SnapshotXids::Parse). The whole input is given to each.
//
// Asserted (std::abort, besides ASan/UBSan): no exception escapes; a failure is an
// Invalid status, never anything else; a source table, when found, is not empty; what
// Watermark::Parse, BackfillProgress::FromJson and ColumnMap::FromJson accept comes
// back unchanged through its own writer (ToContent / ToJson) and parser; the
// pg_logical_messages batch of a message with this content builds, is valid
// (ValidateFull) and keeps the content as bytes, as text exactly when it is UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/array.h>
#include <arrow/record_batch.h>

#include "floe/bronze/bronze_schema.h"
#include "floe/bronze/system_tables.h"
#include "floe/bronze/watermark_backfill.h"

namespace {

namespace bronze = floe::bronze;
namespace pg = floe::postgres;

void FuzzSourceTable(const std::string& content) {
  const auto table = bronze::SourceTableOf(content);
  if (table && table->empty()) std::abort();
}

void FuzzWatermark(const std::string& content) {
  const auto mark = bronze::Watermark::Parse(content);
  if (!mark) return;
  const auto again = bronze::Watermark::Parse(mark->ToContent());
  if (!again || again->table != mark->table || again->chunk != mark->chunk ||
      again->kind != mark->kind) {
    std::abort();
  }
}

void FuzzBackfillProgress(const std::string& json) {
  auto progress = bronze::BackfillProgress::FromJson(json);
  if (!progress.ok()) {
    if (!progress.status().IsInvalid()) std::abort();
    return;
  }
  auto again = bronze::BackfillProgress::FromJson(progress->ToJson());
  if (!again.ok() || !(*again == *progress)) std::abort();
}

void FuzzColumnMap(const std::string& json) {
  auto map = bronze::ColumnMap::FromJson(json);
  if (!map.ok()) {
    if (!map.status().IsInvalid()) std::abort();
    return;
  }
  auto again = bronze::ColumnMap::FromJson(map->ToJson());
  if (!again.ok() || !(*again == *map)) std::abort();
}

void FuzzSnapshotXids(const std::string& text) {
  auto xids = bronze::SnapshotXids::Parse(text);
  if (!xids.ok() && !xids.status().IsInvalid()) std::abort();
}

void FuzzLogicalMessage(const std::string& content, bool transactional) {
  pg::CapturedMessage m;
  m.transactional = transactional;
  m.prefix = "floe.fuzz";
  m.content = content;
  if (transactional) m.xid = 1234;
  auto batch =
      bronze::LogicalMessagesBatch({m}, {1'700'000'000'000'000}, 1'700'000'000'000'001);
  if (!batch.ok()) std::abort();
  const arrow::RecordBatch& b = **batch;
  if (b.num_rows() != 1 || !b.ValidateFull().ok()) std::abort();
  const auto* bytes =
      dynamic_cast<const arrow::BinaryArray*>(b.GetColumnByName("content_bytes").get());
  if (bytes == nullptr || bytes->IsNull(0) || bytes->GetView(0) != content) std::abort();
  const auto* text =
      dynamic_cast<const arrow::StringArray*>(b.GetColumnByName("content").get());
  if (text == nullptr) std::abort();
  if (!text->IsNull(0) && text->GetView(0) != content) std::abort();
  const auto* source_table =
      dynamic_cast<const arrow::StringArray*>(b.GetColumnByName("source_table").get());
  if (source_table == nullptr) std::abort();
  if (text->IsNull(0) && !source_table->IsNull(0)) std::abort();
  if (!text->IsNull(0)) {
    const auto expected = bronze::SourceTableOf(content);
    if (expected.has_value() == source_table->IsNull(0)) std::abort();
    if (expected && source_table->GetView(0) != *expected) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  // An escaping exception ends in std::terminate (a crash for libFuzzer, with its
  // what() printed): it would stop `floe run` too.
  FuzzSourceTable(input);
  FuzzWatermark(input);
  FuzzBackfillProgress(input);
  FuzzColumnMap(input);
  FuzzSnapshotXids(input);
  FuzzLogicalMessage(input, size % 2 == 0);
  return 0;
}
