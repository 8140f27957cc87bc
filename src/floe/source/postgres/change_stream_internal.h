// ChangeStream's state (change_stream.h), shared by change_stream.cc (the read loop,
// spills, delivery) and change_rows.cc (building rows); not part of the module's
// interface.

#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include <arrow/builder.h>

#include "floe/source/postgres/change_stream.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::postgres {

struct ChangeStream::TableBuilder {
  std::shared_ptr<const TableShape> shape;
  std::vector<std::unique_ptr<arrow::ArrayBuilder>> columns;
  // The CDC columns never hold nulls (cdc_unchanged aside): plain vectors, turned
  // into exactly sized buffers by FinishBuilder (one allocation per column instead
  // of a builder's value + validity buffers, each grown and then shrunk).
  std::string op;
  std::vector<int64_t> ts;
  std::vector<int64_t> source_lsn;
  std::vector<int64_t> xid;
  std::vector<int64_t> commit_lsn;
  std::vector<int32_t> seq;
  std::shared_ptr<arrow::StringBuilder> unchanged_names =
      std::make_shared<arrow::StringBuilder>();
  arrow::ListBuilder unchanged{arrow::default_memory_pool(), unchanged_names,
                               arrow::list(arrow::utf8())};
  int64_t rows = 0;
  /// Bytes of the values appended (as sent): a batch is sealed before its string
  /// and binary columns near Arrow's 2 GiB offset limit.
  int64_t value_bytes = 0;
  std::vector<QuarantineCandidate> issues;
  /// The builder row of each issue.
  std::vector<int64_t> issue_rows;
  std::vector<ConversionIssue> found;
  /// Rows without some of their values (builder row numbers), with their keys.
  std::vector<PartialRow> partial;
};

struct ChangeStream::TableState {
  std::shared_ptr<const TableShape> shape;
  std::vector<ColumnConverter> converters;
  /// The columns whose change makes an update a delete + insert.
  std::vector<int> key_columns;
  /// The shape the sink was last given.
  std::shared_ptr<const TableShape> delivered;
  /// Per column: how a binary-mode (pgoutput `binary`) value is decoded; kNone:
  /// it cannot be, and such a value is an error.
  std::vector<BinaryFormat> binary_formats;
  std::vector<std::string> type_names;
  /// A finished, empty builder of `shape`, kept for the next batch.
  std::unique_ptr<TableBuilder> spare;
};

/// The rows one transaction appended to one table's open builder: [start, start +
/// rows). Sealing the builder turns it into a TableChanges (a slice of the batch).
struct ChangeStream::Segment {
  Oid relation_id = 0;
  TableBuilder* builder = nullptr;
  int64_t start = 0;
  int64_t rows = 0;
  /// Deferred transactions: the sealed rows, delivered with the transaction.
  std::optional<TableChanges> done;
};

struct ChangeStream::Transaction {
  TransactionInfo info;
  /// Committed at or below start_after: decoded, not delivered.
  bool skip = false;
  /// A streamed transaction being replayed after its commit: batches go to the sink
  /// as soon as they are full.
  bool deliver_now = false;
  bool begun = false;
  int32_t next_seq = 0;
  /// The relation of the transaction's last row (0: none yet).
  Oid last_relation = 0;
  /// Rows in open builders, in the order the transaction first touched each table.
  std::vector<Segment> segments;
  std::vector<std::variant<TableChanges, CapturedMessage>> pending;
};

struct ChangeStream::Spill {
  std::filesystem::path path;
  std::FILE* file = nullptr;
  int64_t bytes = 0;
  /// Subtransactions aborted while streaming: their changes are skipped on replay.
  std::unordered_set<TransactionId> aborted;
};

namespace internal {

/// A logical message as the sink gets it (owning its prefix and content).
CapturedMessage Capture(const LogicalMessage& m);

}  // namespace internal

}  // namespace floe::postgres
