// The fold at the heart of Silver: a run of Bronze changes (in any order) reduced to
// the latest state of every key it touches (docs/design.md §3). Pure functions over Arrow
// arrays, so every rule is unit-tested without a table:
//
//  * the total order is (cdc_commit_lsn, cdc_seq); per key the greatest change wins;
//  * `d` removes the key; `c`, `u` and `r` upsert it;
//  * `t` empties the table as of its position: earlier changes and every row Silver
//    held before are gone, later changes apply;
//  * a column listed in `cdc_unchanged` (an unchanged TOAST value that was not sent)
//    keeps the previous value: that of an earlier change of the key, else that of
//    the row Silver already holds (nothing after a delete or a truncate). The new row
//    of a key-changing update (the `c` right after the `d` of the old key, same
//    transaction, consecutive cdc_seq) takes it from the old key's row: Postgres
//    does not send an unchanged TOAST value even when the key changes.
//
// Keys are unique when a transaction commits, not inside it: a deferrable key, or
// one statement that shifts or swaps keys (UPDATE t SET id = id + 1), holds two rows
// of one key for a moment, and Bronze then reads `d1 c2 d2 c3`, where `d2` deletes
// the row that was key 2 before the statement, not the one `c2` just made. So the
// fold follows the rows of each key, not only its last change: a `c` adds a row, a
// `d` removes the row whose values it carries (a delete under REPLICA IDENTITY FULL
// carries them all), else the oldest, a `u` changes the oldest and makes it the newest (a
// statement changes each row once), `r` leaves exactly its own. Whether a key
// starts with Silver's row or none is what makes every transaction end with at most
// one row per key; when both starts do (`c2 d2` within one transaction: an insert
// and delete of a new key, or a key moved in and the old row moved out), only
// Silver can tell, and the fold asks for it (FoldResult::undecided).

#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>
#include <arrow/table.h>

#include "floe/lake/cdc_columns.h"

namespace floe::silver {

/// Bronze CDC columns the fold reads (lake/cdc_columns.h).
using lake::kCdcCommitLsn;
using lake::kCdcOp;
using lake::kCdcSeq;
using lake::kCdcUnchanged;

/// Whether `name` is one of Bronze's CDC metadata columns.
bool IsCdcColumn(const std::string& name);

/// A run of changes: the row columns (in the types Silver stores them) and the CDC
/// columns the fold needs, all of the same length.
struct Changes {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<arrow::Array>> columns;
  std::shared_ptr<arrow::Array> op;          // utf8
  std::shared_ptr<arrow::Array> commit_lsn;  // int64
  std::shared_ptr<arrow::Array> seq;         // int32
  std::shared_ptr<arrow::Array> unchanged;   // list<utf8>, may be null (all null)
  /// Per row column (or empty): the names it had before renames, which the
  /// cdc_unchanged lists of older changes use, and per name the (cdc_commit_lsn,
  /// cdc_seq) of the last change written under it ({0, 0} or missing: not known).
  /// A change through that position means this column by that name, even when
  /// another column holds the name now; otherwise a current name wins.
  std::vector<std::vector<std::string>> former_names;
  std::vector<std::vector<std::pair<int64_t, int32_t>>> former_through;

  int64_t length() const { return op ? op->length() : 0; }
};

/// `table`'s columns `row_columns` (by name, in that order) and the CDC columns, each
/// as one array.
arrow::Result<Changes> ChangesFromTable(const arrow::Table& table,
                                        const std::vector<std::string>& row_columns);

/// Where a value of a folded row comes from: a change (row index >= 0) or one of:
inline constexpr int64_t kFromExisting = -1;  // the row Silver holds for the key
inline constexpr int64_t kNullValue = -2;     // no previous value: null

/// The final state of one key.
struct FoldedKey {
  /// EncodeKey of the key columns.
  std::string key;
  /// A change carrying the key's values (for building filters and literals).
  int64_t key_row = 0;
  /// The key ends deleted (by `d`); otherwise it is upserted with `sources`.
  bool deleted = false;
  /// Per row column of Changes: where its value comes from.
  std::vector<int64_t> sources;
  /// kFromExisting values come from Silver's row of this key (encoded); empty means
  /// `key` itself. Set when a key-changing update carries values over from the old
  /// key.
  std::string existing_key;
  /// cdc_commit_lsn of the winning change.
  int64_t commit_lsn = 0;
  /// When the changes show the key starting without a row (Silver was not asked), its
  /// first change inserts it and no `r` (a copy's row) follows: that change (a row
  /// Silver holds for the key would be a second one); else -1.
  int64_t inserted_by = -1;
};

struct FoldResult {
  /// A `t` was among the changes: every row Silver held before is gone.
  bool truncated = false;
  /// When non-empty, nothing else is set: a row of each key whose outcome depends on
  /// whether Silver holds it before these changes. Fold again with `held`.
  std::vector<int64_t> undecided;
  /// One entry per key touched after the last truncate, in order of first touch.
  std::vector<FoldedKey> keys;
  /// Some upserted key takes a value from the row Silver already holds.
  bool needs_existing = false;
  /// A change that the changes show gave its key a second row (the key is not unique
  /// in the source), or -1: two `r` rows of one copy, a key that ends with several
  /// rows, or one whose changes fit neither start (the change that ruled out the last
  /// one); not a key none of whose rows is left at the end.
  int64_t duplicate = -1;
  /// How the changes show it.
  const char* duplicate_why = "";

  int64_t upserts() const;
  int64_t deletes() const;
};

/// Folds `changes` on the key columns `key_columns` (indexes into changes.columns).
/// `silver_has_rows`: whether Silver may already hold rows for these keys (false for
/// a backfill, where previous values are null). `held`: the encoded keys (EncodeKey)
/// Silver holds, of those a previous call listed as undecided; keys absent from it are
/// taken as not held. Errors on an unknown cdc_op or a row whose ordering columns are
/// null.
arrow::Result<FoldResult> Fold(const Changes& changes,
                               const std::vector<int>& key_columns, bool silver_has_rows,
                               const std::unordered_set<std::string>* held = nullptr);

/// The rows Silver already holds for some keys, for values kept by cdc_unchanged:
/// columns aligned with Changes::names, and the row of each encoded key.
struct ExistingRows {
  std::vector<std::shared_ptr<arrow::Array>> columns;
  std::unordered_map<std::string, int64_t> row_of_key;
};

/// The upserted rows of `fold` as one batch of `schema` (Silver's Arrow schema):
/// each field is the row column of the same name in `changes`, or, for a field named
/// cdc_commit_lsn, the winning change's commit LSN; fields with neither are null.
/// Rows are in fold order (callers sort them). `existing` may be null when
/// !fold.needs_existing; a key it lacks gets nulls.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> BuildUpserts(
    const Changes& changes, const FoldResult& fold, const ExistingRows* existing,
    const std::shared_ptr<arrow::Schema>& schema);

/// A byte string identifying the values of `columns` at `row`, equal for equal values
/// of the same Arrow types (null is a value of its own). Supports the primitive types
/// Silver keys can have.
arrow::Result<std::string> EncodeKey(const std::vector<const arrow::Array*>& columns,
                                     int64_t row);

}  // namespace floe::silver
