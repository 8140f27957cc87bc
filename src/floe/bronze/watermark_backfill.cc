#include "floe/bronze/watermark_backfill.h"

#include <algorithm>
#include <utility>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/scalar.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "floe/bronze/table_appender.h"
#include "floe/common/parse.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::bronze {

namespace pg = floe::postgres;

namespace {

}  // namespace

// ---------------------------------------------------------------------------
// Watermark

std::string Watermark::ToContent() const {
  nlohmann::json j;
  j["table"] = table;
  j["chunk"] = chunk;
  j["mark"] = kind == Kind::kLow ? "low" : "high";
  return j.dump();
}

std::optional<Watermark> Watermark::Parse(const std::string& content) {
  auto j = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto table = j.find("table");
  auto chunk = j.find("chunk");
  auto mark = j.find("mark");
  if (table == j.end() || chunk == j.end() || mark == j.end() || !table->is_string() ||
      !chunk->is_string() || !mark->is_string()) {
    return std::nullopt;
  }
  Watermark w;
  w.table = table->get<std::string>();
  w.chunk = chunk->get<std::string>();
  const std::string m = mark->get<std::string>();
  if (m == "low") {
    w.kind = Kind::kLow;
  } else if (m == "high") {
    w.kind = Kind::kHigh;
  } else {
    return std::nullopt;
  }
  return w;
}

// ---------------------------------------------------------------------------
// SnapshotXids

arrow::Result<SnapshotXids> SnapshotXids::Parse(const std::string& text) {
  const size_t a = text.find(':');
  const size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos) {
    return arrow::Status::Invalid("not a pg_snapshot: '", text, "'");
  }
  SnapshotXids out;
  auto xmin = ParseUint64(std::string_view(text).substr(0, a));
  auto xmax = ParseUint64(std::string_view(text).substr(a + 1, b - a - 1));
  if (!xmin || !xmax) return arrow::Status::Invalid("not a pg_snapshot: '", text, "'");
  out.xmin = *xmin;
  out.xmax = *xmax;
  std::string_view rest = std::string_view(text).substr(b + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    auto xid = ParseUint64(rest.substr(0, comma));
    if (!xid) return arrow::Status::Invalid("not a pg_snapshot: '", text, "'");
    out.xip.push_back(*xid);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

bool SnapshotXids::Invisible(pg::TransactionId xid) const {
  // 32-bit xids compare modulo 2^32 (TransactionIdFollowsOrEquals): a transaction
  // at or after xmax had not started.
  const auto xmax32 = static_cast<pg::TransactionId>(xmax);
  if (static_cast<int32_t>(xid - xmax32) >= 0) return true;
  for (uint64_t x : xip) {
    if (static_cast<pg::TransactionId>(x) == xid) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------
// ChunkWindow

ChunkWindow::ChunkWindow(std::string table, std::string chunk, SnapshotXids snapshot,
                         std::vector<std::string> row_keys)
    : table_(std::move(table)),
      chunk_(std::move(chunk)),
      snapshot_(std::move(snapshot)),
      row_keys_(std::move(row_keys)) {}

bool ChunkWindow::Counts(pg::TransactionId xid) const {
  switch (phase_) {
    case Phase::kIssued:
      return snapshot_.Invisible(xid);
    case Phase::kOpen:
      return true;
    case Phase::kClosed:
      return false;
  }
  return false;
}

void ChunkWindow::OnChanges(pg::TransactionId xid, const std::vector<std::string>& keys) {
  if (!Counts(xid)) return;
  changed_.insert(keys.begin(), keys.end());
}

void ChunkWindow::OnTruncate(pg::TransactionId xid) {
  if (Counts(xid)) truncated_ = true;
}

bool ChunkWindow::OnWatermark(const Watermark& mark) {
  if (mark.table != table_ || mark.chunk != chunk_) return false;
  if (mark.kind == Watermark::Kind::kLow) {
    if (phase_ == Phase::kIssued) phase_ = Phase::kOpen;
  } else {
    // A high watermark always follows its low one in the stream (both committed
    // in this order by one session).
    phase_ = Phase::kClosed;
  }
  return true;
}

std::vector<int64_t> ChunkWindow::RowsToEmit() const {
  std::vector<int64_t> out;
  if (truncated_) return out;
  for (size_t i = 0; i < row_keys_.size(); ++i) {
    if (!changed_.contains(row_keys_[i])) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Keys

arrow::Result<std::vector<std::string>> RowKeys(
    const arrow::RecordBatch& batch, const std::vector<std::string>& key_columns) {
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  for (const auto& name : key_columns) {
    auto array = batch.GetColumnByName(name);
    if (!array) return arrow::Status::KeyError("no key column ", name, " in the batch");
    arrays.push_back(std::move(array));
  }
  std::vector<std::string> out(static_cast<size_t>(batch.num_rows()));
  for (const auto& array : arrays) {
    for (int64_t r = 0; r < batch.num_rows(); ++r) {
      std::string& key = out[static_cast<size_t>(r)];
      if (array->IsNull(r)) {
        key += "N;";
        continue;
      }
      ARROW_ASSIGN_OR_RAISE(auto scalar, array->GetScalar(r));
      const std::string text = scalar->ToString();
      key += std::to_string(text.size());
      key += ':';
      key += text;
      key += ';';
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Progress

std::string BackfillProgress::ToJson() const {
  nlohmann::json j;
  j["id"] = id;
  j["after"] = after;
  if (!retry.empty()) j["retry"] = retry;
  if (!key_columns.empty()) j["key_columns"] = key_columns;
  j["done"] = done;
  j["rows"] = rows;
  j["chunks"] = chunks;
  return j.dump();
}

std::string BackfillProgress::SummaryJson() const {
  nlohmann::json j;
  j["id"] = id;
  j["done"] = done;
  j["rows"] = rows;
  j["chunks"] = chunks;
  return j.dump();
}

arrow::Result<BackfillProgress> BackfillProgress::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return arrow::Status::Invalid(lake::kBackfillSummaryKey, " is not a JSON object");
  }
  try {
    BackfillProgress p;
    p.id = j.at("id").get<std::string>();
    if (j.contains("after")) p.after = j.at("after").get<std::vector<std::string>>();
    if (j.contains("retry")) {
      p.retry = j.at("retry").get<std::vector<std::vector<std::string>>>();
    }
    if (j.contains("key_columns")) {
      p.key_columns = j.at("key_columns").get<std::vector<std::string>>();
    }
    p.done = j.at("done").get<bool>();
    p.rows = j.value("rows", int64_t{0});
    p.chunks = j.value("chunks", int64_t{0});
    return p;
  } catch (const nlohmann::json::exception& e) {
    // The text is not quoted: an older summary, or a keys file, holds key values.
    return arrow::Status::Invalid(lake::kBackfillSummaryKey, " is malformed (", e.what(),
                                  ")");
  }
}

arrow::Result<std::string> WriteBackfillKeys(iceberg::FileIO& io,
                                             const std::string& table_location,
                                             const BackfillProgress& progress) {
  const std::string location =
      table_location + "/data/floe-backfill/" + iceberg::GenerateUuidV4() + ".json";
  ARROW_RETURN_NOT_OK(
      io.WriteAtomically(location, progress.ToJson(), /*exclusive=*/true));
  return location;
}

arrow::Result<std::optional<BackfillProgress>> BackfillProgressOf(
    iceberg::FileIO& io, const iceberg::TableMetadata& metadata) {
  const iceberg::Snapshot* snapshot = lake::LatestBackfillRecord(metadata);
  if (snapshot == nullptr) return std::nullopt;
  ARROW_ASSIGN_OR_RAISE(
      auto progress,
      BackfillProgress::FromJson(snapshot->summary.at(lake::kBackfillSummaryKey)));
  auto keys = snapshot->summary.find(lake::kBackfillKeysSummaryKey);
  if (keys == snapshot->summary.end()) return std::optional<BackfillProgress>(progress);
  ARROW_ASSIGN_OR_RAISE(bool exists, io.Exists(keys->second));
  if (!exists) {
    spdlog::warn(
        "{}: the backfill's keys file {} is gone (removed by hand?); the backfill "
        "starts again from the first key",
        metadata.location, keys->second);
    return std::optional<BackfillProgress>(progress);
  }
  ARROW_ASSIGN_OR_RAISE(std::string text, io.ReadAll(keys->second));
  auto read = BackfillProgress::FromJson(text);
  if (!read.ok() || read->id != progress.id || read->chunks != progress.chunks) {
    // Damaged, or not this record's: the keys cannot be trusted, and the table's
    // rows are all still in the source.
    spdlog::warn(
        "{}: the backfill's keys file {} is unreadable or does not match the "
        "snapshot's {} ({}); the backfill starts again from the first key",
        metadata.location, keys->second, lake::kBackfillSummaryKey,
        progress.SummaryJson());
    return std::optional<BackfillProgress>(progress);
  }
  progress.after = std::move(read->after);
  progress.retry = std::move(read->retry);
  progress.key_columns = std::move(read->key_columns);
  return std::optional<BackfillProgress>(std::move(progress));
}

// ---------------------------------------------------------------------------
// Chunk rows

namespace {

// Converts column `c` of `rows` (only `selected`, in order) as the stream would.
arrow::Result<std::shared_ptr<arrow::Array>> ConvertColumn(
    const SourceColumn& column, size_t c, const std::vector<pg::PgRow>& rows,
    const std::vector<int64_t>& selected, std::vector<pg::ConversionIssue>* issues,
    std::vector<int64_t>* issue_rows) {
  pg::ColumnConverter converter(column.name, column.mapping);
  ARROW_ASSIGN_OR_RAISE(auto builder, converter.MakeBuilder());
  std::vector<pg::ConversionIssue> local;
  for (size_t i = 0; i < selected.size(); ++i) {
    const auto& value = rows[static_cast<size_t>(selected[i])].at(c);
    if (value) {
      const size_t before = local.size();
      ARROW_RETURN_NOT_OK(converter.Append(*value, builder.get(), &local));
      if (local.size() > before && issues != nullptr) {
        for (size_t k = before; k < local.size(); ++k) {
          issues->push_back(std::move(local[k]));
          if (issue_rows != nullptr) issue_rows->push_back(static_cast<int64_t>(i));
        }
      }
    } else {
      ARROW_RETURN_NOT_OK(converter.AppendNull(builder.get()));
    }
  }
  std::shared_ptr<arrow::Array> array;
  ARROW_RETURN_NOT_OK(builder->Finish(&array));
  return array;
}

std::vector<int64_t> AllRows(size_t n) {
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(i);
  return out;
}

}  // namespace

arrow::Result<std::vector<std::string>> ChunkRowKeys(
    const std::vector<SourceColumn>& columns, const std::vector<pg::PgRow>& rows,
    const std::vector<std::string>& key_columns) {
  const std::vector<int64_t> all = AllRows(rows.size());
  arrow::FieldVector fields;
  arrow::ArrayVector arrays;
  for (const auto& name : key_columns) {
    auto it = std::find_if(columns.begin(), columns.end(),
                           [&](const SourceColumn& c) { return c.name == name; });
    if (it == columns.end()) return arrow::Status::KeyError("no key column ", name);
    const size_t c = static_cast<size_t>(it - columns.begin());
    ARROW_ASSIGN_OR_RAISE(auto array, ConvertColumn(*it, c, rows, all, nullptr, nullptr));
    fields.push_back(arrow::field(name, array->type()));
    arrays.push_back(std::move(array));
  }
  auto batch = arrow::RecordBatch::Make(arrow::schema(fields),
                                        static_cast<int64_t>(rows.size()), arrays);
  return RowKeys(*batch, key_columns);
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> ChunkRowsBatch(
    const std::vector<SourceColumn>& columns, const std::vector<pg::PgRow>& rows,
    const std::vector<int64_t>& selected, const RowsPosition& at,
    std::vector<pg::ConversionIssue>* issues, std::vector<int64_t>* issue_rows) {
  const auto n = static_cast<int64_t>(selected.size());
  arrow::ArrayVector arrays;
  for (size_t c = 0; c < columns.size(); ++c) {
    ARROW_ASSIGN_OR_RAISE(
        auto array, ConvertColumn(columns[c], c, rows, selected, issues, issue_rows));
    arrays.push_back(std::move(array));
  }
  SyntheticPosition position;
  position.op = "r";
  position.ts_us = at.commit_time_us;
  position.source_lsn = at.source_lsn;
  position.xid = static_cast<int64_t>(at.xid);
  position.commit_lsn = at.commit_lsn;
  return WithCdcColumns(columns, std::move(arrays), n, position);
}

}  // namespace floe::bronze
