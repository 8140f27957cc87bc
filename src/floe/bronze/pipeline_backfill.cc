// The watermark-backfill driver (watermark_backfill.h has the database-free
// parts): starting backfills, issuing chunks between polls, tracking the
// stream's changes of a backfilled table, and finishing a chunk at its high
// watermark.

#include "floe/bronze/pipeline_internal.h"

#include <algorithm>

#include <arrow/array.h>
#include <nlohmann/json.hpp>

#include "floe/common/failpoint.h"
#include "floe/lake/keys.h"
#include "floe/source/postgres/table_description.h"

namespace floe::bronze {

namespace {

// Most keys of BackfillProgress::retry selected again with one chunk.
constexpr size_t kMaxRetryKeys = 256;

}  // namespace

arrow::Status Pipeline::CopyLater(BronzeTable* table) {
  ARROW_ASSIGN_OR_RAISE(auto key, KeyColumnsOf(table->source));
  if (key.empty()) {
    // Its rows are covered by the copy, taken at a later point than what the
    // stream delivered so far; until that copy commits they are skipped.
    spdlog::info("{} has no primary key or replica identity index: copying it "
                 "through an exported snapshot (the stream waits for the copy)",
                 SourceName(table->source));
    table->awaiting_copy = true;
    to_copy_.push_back(table);
    return arrow::Status::OK();
  }
  ARROW_RETURN_NOT_OK(BindFromCatalogIfUnbound(table));
  // The relation and publication membership this backfill reads, recorded at its
  // start: a removal from the publication and a re-add while it runs (or before the
  // next discovery after it) changes them, and Rejoined copies the table again (the
  // changes made meanwhile were never in the stream). Recorded later, the membership
  // after the re-add would be taken for the one copied.
  ARROW_ASSIGN_OR_RAISE(auto identities,
                        source_->PublishedIdentities(config_.source.publication));
  if (auto it = identities.find(table->source); it != identities.end()) {
    ARROW_RETURN_NOT_OK(table->appender->table().UpdateMetadata(
        [&](const ice::TableMetadata&, ice::TableMetadataBuilder* b) {
          b->SetProperties({{lake::kSourceIdentityProperty, it->second}});
          return arrow::Status::OK();
        }));
  }
  BackfillProgress progress;
  progress.id = chunk_nonce_ + "." + std::to_string(++chunk_counter_);
  spdlog::info("{}: backfilling it in chunks of {} row(s) by ({}) while streaming",
               SourceName(table->source), config_.source.backfill_chunk_rows,
               nlohmann::json(key).dump());
  return StartBackfill(table, std::move(key), std::move(progress), "");
}

arrow::Status Pipeline::BackfillOnRequest(const std::set<pg::QualifiedName>& held) {
  if (options_.backfill_tables.empty()) return arrow::Status::OK();
  ARROW_ASSIGN_OR_RAISE(auto published,
                        source_->PublishedTables(config_.source.publication));
  for (const auto& t : options_.backfill_tables) {
    const pg::QualifiedName name{t.schema, t.table};
    if (std::find(published.begin(), published.end(), name) == published.end()) {
      return Fatal("--backfill-table " + SourceName(name) +
                   ": not a table of publication " + config_.source.publication);
    }
    if (!held.contains(name)) {
      spdlog::info("--backfill-table {}: Bronze did not hold it yet, so it was copied",
                   SourceName(name));
      continue;
    }
    if (backfills_.contains(name)) {
      spdlog::info("--backfill-table {}: its unfinished backfill goes on",
                   SourceName(name));
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(BronzeTable * table, TableFor(name));
    if (!table->unnamed.empty()) {
      return Fatal("--backfill-table " + SourceName(name) + ": " + table->unnamed);
    }
    ARROW_ASSIGN_OR_RAISE(auto key, KeyColumnsOf(name));
    if (key.empty()) {
      return Fatal("--backfill-table " + SourceName(name) +
                   ": it has no primary key or replica identity index, so it cannot be "
                   "backfilled while streaming; floe run --resnapshot copies every "
                   "table instead");
    }
    BackfillProgress progress;
    progress.id = chunk_nonce_ + "." + std::to_string(++chunk_counter_);
    spdlog::info("--backfill-table {}: backfilling it in chunks of {} row(s) by ({}) "
                 "while streaming",
                 SourceName(name), config_.source.backfill_chunk_rows,
                 nlohmann::json(key).dump());
    ARROW_RETURN_NOT_OK(StartBackfill(table, std::move(key), std::move(progress), ""));
  }
  return arrow::Status::OK();
}

arrow::Status Pipeline::StartBackfill(BronzeTable* table,
                                      std::vector<std::string> key_columns,
                                      BackfillProgress progress, std::string committed) {
  ARROW_RETURN_NOT_OK(BindFromCatalogIfUnbound(table));
  auto backfill = std::make_unique<Backfill>();
  backfill->table = table;
  backfill->key_columns = std::move(key_columns);
  backfill->progress = std::move(progress);
  backfill->progress.key_columns = backfill->key_columns;
  backfill->committed = std::move(committed);
  backfills_[table->source] = std::move(backfill);
  return arrow::Status::OK();
}

namespace {

// The columns a chunk may read: none when the table is gone or out of the publication.
std::vector<pg::DescribedColumn> ReadableColumns(
    const std::optional<pg::TableDescription>& described) {
  if (!described || !described->in_publication) return {};
  return described->Replicated();
}

// How the catalog's replicated columns differ from `columns` (Bronze's view of the
// table, from the stream): in order, the same names and types; empty when they do
// not.
std::string ColumnsDiffer(const std::vector<SourceColumn>& columns,
                          const std::vector<pg::DescribedColumn>& catalog) {
  std::string bronze_names, catalog_names;
  for (const SourceColumn& c : columns) {
    bronze_names += (bronze_names.empty() ? "" : ", ") + c.name;
  }
  for (const pg::DescribedColumn& c : catalog) {
    catalog_names += (catalog_names.empty() ? "" : ", ") + c.name;
  }
  bool same = columns.size() == catalog.size();
  for (size_t i = 0; same && i < columns.size(); ++i) {
    same = columns[i].name == catalog[i].name &&
           columns[i].type_oid == catalog[i].type_oid &&
           columns[i].type_modifier == catalog[i].type_modifier;
  }
  if (same) return "";
  return "the columns are (" + catalog_names + ") in the catalog, (" + bronze_names +
         ") as the stream last described them";
}

// The backfill's key columns under the names `shape` gives them. A key column
// renamed since the backfill started (or, after a restart, named otherwise in the
// older changes the stream replays) is the shape's row-key column at its place, when
// the key columns that kept their names confirm the order; otherwise the names as
// they are (RowKeys then says which one the batch lacks).
std::vector<std::string> KeyNamesIn(const pg::TableShape& shape, const Backfill& backfill) {
  const pg::RelationInfo& relation = shape.relation;
  const std::vector<std::string>& names = backfill.key_columns;
  if (std::all_of(names.begin(), names.end(), [&](const std::string& n) {
        return relation.FindColumn(n) >= 0;
      })) {
    return names;
  }
  const std::vector<int> row_key = relation.row_key();
  if (row_key.size() != names.size()) return names;
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& at = relation.columns[static_cast<size_t>(row_key[i])].name;
    if (relation.FindColumn(names[i]) >= 0 && names[i] != at) return names;
    out.push_back(at);
  }
  return out;
}

}  // namespace

arrow::Status Pipeline::IssueChunks() {
  for (auto& [name, backfill] : backfills_) {
    if (backfill->window || backfill->progress.done || backfill->gone) continue;
    // To be copied (again): the copy ends the backfill.
    if (backfill->table->recopy_queued || backfill->table->awaiting_copy) continue;
    ARROW_RETURN_NOT_OK(IssueChunk(backfill.get()));
  }
  return arrow::Status::OK();
}

// The query of `backfill`'s next chunk: `columns` by name in key order, within the
// publication's row filter, after the last chunk's key, and the keys to select again.
arrow::Result<pg::KeyChunkQuery> Pipeline::ChunkQuery(
    Backfill* backfill, const std::vector<SourceColumn>& columns) {
  BronzeTable* table = backfill->table;
  const std::string table_name = SourceName(table->source);
  pg::KeyChunkQuery query;
  query.table = table->source;
  for (const SourceColumn& column : columns) query.columns.push_back(column.name);
  query.key_columns = backfill->key_columns;
  query.publication = config_.source.publication;
  if (!backfill->row_filter) {
    ARROW_ASSIGN_OR_RAISE(auto described,
                          source_->Describe(table->source, config_.source.publication));
    backfill->row_filter = described ? described->row_filter : "";
  }
  query.row_filter = *backfill->row_filter;
  const auto& after = backfill->progress.after;
  if (!after.empty() && after.size() != backfill->key_columns.size()) {
    return arrow::Status::Invalid(table_name, ": the backfill's last key has ",
                                  after.size(), " value(s) for ",
                                  backfill->key_columns.size(), " key column(s)");
  }
  query.after = after;
  query.limit = config_.source.backfill_chunk_rows;
  // Keys whose earlier chunk row lost to a partial update: selected again.
  const auto& retry = backfill->progress.retry;
  const size_t retried = std::min(retry.size(), kMaxRetryKeys);
  for (size_t i = 0; i < retried; ++i) {
    if (retry[i].size() != backfill->key_columns.size()) {
      return arrow::Status::Invalid(table_name, ": a retried key has ", retry[i].size(),
                                    " value(s) for ", backfill->key_columns.size(),
                                    " key column(s)");
    }
    query.keys_again.push_back(retry[i]);
  }
  return query;
}

// A chunk that could not be read as Bronze knows the table: a column renamed,
// dropped or changed (`moved`, or the server's 42703) before the stream delivered
// that, so the table is copied again from the catalog's columns instead, which ends
// this backfill (CopyTables); or the table is gone (42P01). Otherwise the error.
arrow::Status Pipeline::ChunkNotRead(Backfill* backfill, const arrow::Status& status,
                                     const std::string& moved) {
  BronzeTable* table = backfill->table;
  if (status.ok() || pg::GetSqlState(status) == "42703") {
    if (table->recopy_reason.empty()) {
      table->recopy_reason =
          status.ok() ? "during its backfill, before the stream delivered it: " + moved
                      : "a column the backfill selects was renamed or dropped "
                        "before the stream delivered the change";
    }
    RecopyIfMoved(table);
    return arrow::Status::OK();
  }
  if (pg::GetSqlState(status) == "42P01") return BackfilledTableGone(backfill);
  return status;
}

// Low watermark, the chunk in a fresh snapshot, high watermark (watermark_backfill.h).
arrow::Status Pipeline::IssueChunk(Backfill* backfill) {
  Failpoint("backfill.before-chunk");  // the previous chunk finished, no watermark yet
  if (!backfill_sql_) {
    ARROW_ASSIGN_OR_RAISE(backfill_sql_,
                          pg::PgConnection::Connect(config_.source.conninfo));
    backfill_source_ = pg::MakeSourceSession(backfill_sql_.get());
  }
  pg::SourceSession& source = *backfill_source_;
  BronzeTable* table = backfill->table;
  const std::string table_name = SourceName(table->source);
  std::vector<SourceColumn> columns = table->columns;
  ARROW_ASSIGN_OR_RAISE(pg::KeyChunkQuery query, ChunkQuery(backfill, columns));

  Watermark mark{table_name, chunk_nonce_ + "." + std::to_string(++chunk_counter_),
                 Watermark::Kind::kLow};
  const std::string prefix(lake::kWatermarkPrefix);
  // A standby's watermarks are written on its primary (pipeline_standby.cc). Its
  // chunk may be read before it replayed the low one: the window still counts every
  // change the chunk's snapshot could not see (watermark_backfill.h).
  pg::SourceSession* writer = &source;
  if (standby_) {
    ARROW_ASSIGN_OR_RAISE(writer, PrimarySession());
  }
  ARROW_RETURN_NOT_OK(writer->EmitMessage(prefix, mark.ToContent()));
  // Selected by name, a chunk reads the columns Bronze knows under those names. A
  // rename, a swap of names or a type change the stream has not delivered yet (it
  // may not until the table's next change) would put values under the wrong field
  // or type: checked under the chunk's snapshot.
  auto chunk = source.ReadKeyChunk(
      query, [&](const std::optional<pg::TableDescription>& described) {
        return ColumnsDiffer(columns, ReadableColumns(described));
      });
  if (!chunk.ok() || !chunk->refused.empty()) {
    return ChunkNotRead(backfill, chunk.status(), chunk.ok() ? chunk->refused : "");
  }
  ARROW_ASSIGN_OR_RAISE(SnapshotXids snapshot, SnapshotXids::Parse(chunk->snapshot));
  for (pg::TransactionId xid : backfill->recent_xids) {
    if (snapshot.Invisible(xid)) {
      // Delivered, yet not visible to the snapshot (its commit was still being
      // published): try again with a later snapshot.
      spdlog::debug("{}: chunk {} retried (transaction {} not visible yet)", table_name,
                    mark.chunk, xid);
      return arrow::Status::OK();
    }
  }
  backfill->recent_xids.clear();
  const size_t range_rows = chunk->range_rows;
  std::vector<pg::PgRow> rows = std::move(chunk->rows);
  ARROW_ASSIGN_OR_RAISE(auto keys, ChunkRowKeys(columns, rows, backfill->key_columns));
  // A key selected again that the range selected too (a key later in the order), or
  // twice: one row.
  if (rows.size() > range_rows) {
    std::unordered_set<std::string> seen(
        keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(range_rows));
    size_t kept = range_rows;
    for (size_t i = range_rows; i < rows.size(); ++i) {
      if (!seen.insert(keys[i]).second) continue;
      if (kept != i) {
        rows[kept] = std::move(rows[i]);
        keys[kept] = std::move(keys[i]);
      }
      ++kept;
    }
    rows.resize(kept);
    keys.resize(kept);
  }
  backfill->chunk_last = static_cast<int64_t>(range_rows) < query.limit;
  backfill->chunk_range_rows = range_rows;
  backfill->chunk_retried = query.keys_again.size();
  backfill->chunk_rows = std::move(rows);
  backfill->chunk_columns = std::move(columns);
  backfill->window.emplace(table_name, mark.chunk, std::move(snapshot), std::move(keys));
  // The chunk read and its transaction ended, its high watermark not yet emitted.
  Failpoint("backfill.before-high-watermark");
  mark.kind = Watermark::Kind::kHigh;
  return writer->EmitMessage(prefix, mark.ToContent());
}

arrow::Status Pipeline::TrackBackfill(Backfill* backfill, const pg::TransactionInfo& tx,
                                      const pg::TableChanges& changes) {
  backfill->recent_xids.insert(tx.xid);
  const bool counts = backfill->window && backfill->window->Counts(tx.xid);
  // By position: the CDC columns follow the row columns (CdcMetadataFields), and a
  // source column may have a CDC column's name.
  const int first_cdc = static_cast<int>(changes.shape->relation.columns.size());
  const auto cdc_fields = pg::CdcMetadataFields();
  if (changes.batch->num_columns() != first_cdc + static_cast<int>(cdc_fields.size())) {
    return arrow::Status::Invalid("change batch of ", changes.batch->num_columns(),
                                  " columns for a table of ", first_cdc);
  }
  auto column_of = [&](const char* name) {
    for (size_t i = 0; i < cdc_fields.size(); ++i) {
      if (cdc_fields[i]->name() == name) {
        return changes.batch->column(first_cdc + static_cast<int>(i));
      }
    }
    return std::shared_ptr<arrow::Array>();
  };
  auto ops = std::dynamic_pointer_cast<arrow::StringArray>(column_of(pg::kCdcOp));
  auto unchanged =
      std::dynamic_pointer_cast<arrow::ListArray>(column_of(pg::kCdcUnchanged));
  if (!ops || !unchanged) {
    return arrow::Status::Invalid("change batch without ", pg::kCdcOp, " or ",
                                  pg::kCdcUnchanged);
  }
  for (int64_t i = 0; i < ops->length(); ++i) {
    if (ops->GetView(i) == "t") {
      backfill->truncated = true;
      if (counts) backfill->window->OnTruncate(tx.xid);
      return arrow::Status::OK();
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto keys,
                        RowKeys(*changes.batch, KeyNamesIn(*changes.shape, *backfill)));
  if (backfill->made_xid != tx.xid) {
    backfill->made_xid = tx.xid;
    backfill->made_keys.clear();
  }
  for (int64_t i = 0; i < ops->length(); ++i) {
    const std::string_view op = ops->GetView(i);
    const std::string& key = keys[static_cast<size_t>(i)];
    const bool sent_all = unchanged->IsNull(i) || unchanged->value_length(i) == 0;
    // A `c` can lack values too: the new row of a key-changing update does not
    // carry its unchanged TOAST values. Its key's history is not complete then,
    // even after a delete of that key: the values it lacks are another key's.
    bool whole = (op == "c" || op == "u") && sent_all;
    if (op == "d") {
      // A delete of a key its own transaction made may delete the row that held the
      // key before (one statement swapping or shifting keys of a deferrable key
      // streams `d a, c b, d b, c a`): not the key's last word.
      whole = !backfill->made_keys.contains(key);
    } else if (op == "c") {
      backfill->made_keys.insert(key);
    }
    if (whole) {
      backfill->complete_keys.insert(key);
    } else if (op != "u") {
      backfill->complete_keys.erase(key);
    }
  }
  if (counts) backfill->window->OnChanges(tx.xid, keys);
  if (!changes.partial.empty() && !backfill->progress.done &&
      tx.commit_lsn > backfill->table->appender->committed_lsn()) {
    RetryPartialRows(backfill, changes, keys);
  }
  return arrow::Status::OK();
}

// An insert or update without some of its values (the new row of a key-changing
// update, or an update, leaving a TOAST value unchanged) whose key Bronze holds no
// whole row of: no chunk may select the row later (its key is in a range already
// done, or was not in the chunk's snapshot), and the change alone leaves the value
// null in Silver. The key is selected again with a later chunk; recorded in the
// progress committed with the change, so a restart keeps it.
void Pipeline::RetryPartialRows(Backfill* backfill, const pg::TableChanges& changes,
                                const std::vector<std::string>& keys) {
  const pg::RelationInfo& relation = changes.shape->relation;
  const std::vector<int> row_key = relation.row_key();
  // Where each backfill key column is in the partial rows' keys.
  std::vector<size_t> at;
  for (const std::string& name : KeyNamesIn(*changes.shape, *backfill)) {
    const int column = relation.FindColumn(name);
    auto it = std::find(row_key.begin(), row_key.end(), column);
    if (column < 0 || it == row_key.end()) break;
    at.push_back(static_cast<size_t>(it - row_key.begin()));
  }
  std::vector<std::vector<std::string>>& retry = backfill->progress.retry;
  for (const pg::PartialRow& partial : changes.partial) {
    if (backfill->complete_keys.contains(keys[static_cast<size_t>(partial.row)])) {
      continue;
    }
    std::vector<std::string> key;
    for (size_t k = 0; k < at.size() && at.size() == backfill->key_columns.size(); ++k) {
      if (at[k] >= partial.key.size() || !partial.key[at[k]]) break;
      key.push_back(*partial.key[at[k]]);
    }
    if (key.size() != backfill->key_columns.size()) {
      if (!backfill->warned_partial) {
        spdlog::warn(
            "{}: an update during the backfill left a TOAST value unchanged "
            "in a row floe cannot select again (its key did not arrive as "
            "text): that value stays null in Silver until the table is "
            "copied again (floe run --backfill-table {})",
            SourceName(backfill->table->source), SourceName(backfill->table->source));
        backfill->warned_partial = true;
      }
      continue;
    }
    if (std::find(retry.begin(), retry.end(), key) == retry.end()) {
      retry.push_back(std::move(key));
    }
  }
}

arrow::Status Pipeline::BackfilledTableGone(Backfill* backfill) {
  BronzeTable* table = backfill->table;
  spdlog::warn(
      "{}: its backfill stops after {} chunk(s): the table is no longer in the "
      "source under this name (dropped or renamed). A table published under "
      "this name later is copied then",
      SourceName(table->source), backfill->progress.chunks);
  backfill->gone = true;
  return MarkGone(table, "gone during its backfill");
}

arrow::Status Pipeline::OnWatermark(const pg::CapturedMessage& message) {
  auto mark = Watermark::Parse(message.content);
  if (!mark) return arrow::Status::OK();
  for (auto& [name, backfill] : backfills_) {
    if (!backfill->window || !backfill->window->OnWatermark(*mark)) continue;
    if (backfill->window->phase() == ChunkWindow::Phase::kClosed) {
      return FinishChunk(backfill.get(), message);
    }
    return arrow::Status::OK();
  }
  // Another chunk's, another run's or another pipeline's: nothing to do.
  return arrow::Status::OK();
}

// The high watermark of the chunk in flight: its rows whose keys did not change in
// the window become `r` changes in the high watermark's transaction.
arrow::Status Pipeline::FinishChunk(Backfill* backfill, const pg::CapturedMessage& high) {
  BronzeTable* table = backfill->table;
  ChunkWindow window = std::move(*backfill->window);
  backfill->window.reset();
  std::vector<pg::PgRow> rows = std::move(backfill->chunk_rows);
  std::vector<SourceColumn> columns = std::move(backfill->chunk_columns);
  backfill->chunk_rows.clear();
  backfill->chunk_columns.clear();
  // The stream replayed an older shape of the table (OnRelationChange) and brought
  // no change of it since: the chunk's columns, read from the catalog, are its shape.
  if (!table->conformer) ARROW_RETURN_NOT_OK(SetShape(table, columns));
  bool same_shape = columns.size() == table->columns.size();
  for (size_t c = 0; same_shape && c < columns.size(); ++c) {
    same_shape = columns[c].name == table->columns[c].name &&
                 columns[c].mapping.type->Equals(*table->columns[c].mapping.type);
  }
  if (!same_shape) {
    // The table changed shape while the chunk was out: select it again.
    spdlog::info("{}: chunk {} selected again (the table's columns changed)",
                 SourceName(table->source), window.chunk());
    return arrow::Status::OK();
  }
  std::vector<int64_t> emit;
  if (!backfill->truncated) {
    for (int64_t i : window.RowsToEmit()) {
      if (!backfill->complete_keys.contains(window.row_keys()[static_cast<size_t>(i)])) {
        emit.push_back(i);
      }
    }
  }
  // The text form of row i's key.
  auto key_text = [&](size_t i) {
    std::vector<std::string> out;
    for (const auto& key : backfill->key_columns) {
      for (size_t c = 0; c < columns.size(); ++c) {
        if (columns[c].name == key) out.push_back(rows[i].at(c).value_or(""));
      }
    }
    return out;
  };
  // A row that lost to a change in the window while Bronze holds no whole row of
  // its key (the change was an update without its unchanged TOAST values) is
  // selected again with a later chunk.
  std::vector<std::vector<std::string>> retry(
      backfill->progress.retry.begin() +
          static_cast<std::ptrdiff_t>(backfill->chunk_retried),
      backfill->progress.retry.end());
  if (!backfill->truncated) {
    size_t next = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (next < emit.size() && emit[next] == static_cast<int64_t>(i)) {
        ++next;
        continue;
      }
      if (!backfill->complete_keys.contains(window.row_keys()[i])) {
        retry.push_back(key_text(i));
      }
    }
  }
  RowsPosition at;
  at.commit_lsn = high.commit_lsn;
  at.source_lsn = high.lsn;
  at.xid = high.xid.value_or(0);
  at.commit_time_us = pg::PgTimestampToUnixMicros(high.commit_time);
  std::vector<pg::ConversionIssue> issues;
  std::vector<int64_t> issue_rows;
  ARROW_ASSIGN_OR_RAISE(auto batch,
                        ChunkRowsBatch(columns, rows, emit, at, &issues, &issue_rows));
  if (batch->num_rows() > 0) {
    ARROW_ASSIGN_OR_RAISE(auto conformed,
                          table->conformer->Conform(*batch, NowUnixMicros()));
    ARROW_RETURN_NOT_OK(table->appender->Write(*conformed));
    metrics_->snapshot_rows.Inc({SourceName(table->source)},
                                static_cast<double>(batch->num_rows()));
    metrics_->events.Inc({SourceName(table->source), "r"},
                         static_cast<double>(batch->num_rows()));
  }
  if (!issues.empty()) {
    std::vector<pg::QuarantineCandidate> quarantined;
    for (size_t i = 0; i < issues.size(); ++i) {
      pg::QuarantineCandidate q;
      q.schema_name = table->source.schema;
      q.table_name = table->source.table;
      q.source_lsn = at.source_lsn;
      q.commit_lsn = at.commit_lsn;
      q.xid = at.xid;
      q.seq = static_cast<int32_t>(issue_rows[i]);
      q.issue = std::move(issues[i]);
      quarantined.push_back(std::move(q));
    }
    pending_quarantine_.emplace_back(std::move(quarantined), at.commit_time_us);
  }
  BackfillProgress& progress = backfill->progress;
  if (backfill->chunk_range_rows > 0) {
    progress.after = key_text(backfill->chunk_range_rows - 1);
  }
  progress.retry = std::move(retry);
  progress.rows += batch->num_rows();
  progress.chunks += 1;
  progress.done = backfill->chunk_last && progress.retry.empty();
  spdlog::debug("{}: chunk {} at {}: {} row(s), {} emitted, {} key(s) changed in the "
                "window",
                SourceName(table->source), window.chunk(), at.commit_lsn.ToString(),
                rows.size(), batch->num_rows(), window.changed_keys());
  if (progress.chunks % 50 == 0 || progress.done) {
    spdlog::info("{}: backfill {} {} chunk(s), {} row(s){}", SourceName(table->source),
                 progress.done ? "done:" : "at", progress.chunks, progress.rows,
                 progress.done ? " (committed with the next checkpoint)" : "");
  }
  return arrow::Status::OK();
}

}  // namespace floe::bronze
