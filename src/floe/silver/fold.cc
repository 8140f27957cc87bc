#include "floe/silver/fold.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>
#include <optional>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>

#include "floe/iceberg/arrow_compute.h"

namespace floe::silver {
namespace {

namespace cp = arrow::compute;

// One array of a column, chunks joined (an empty array of the column's type when it
// has no chunks).
arrow::Result<std::shared_ptr<arrow::Array>> Joined(const arrow::ChunkedArray& column) {
  if (column.num_chunks() == 1) return column.chunk(0);
  if (column.num_chunks() == 0) return arrow::MakeEmptyArray(column.type());
  return arrow::Concatenate(column.chunks());
}

// Per change: the row column indexes listed in its cdc_unchanged.
class UnchangedLookup {
 public:
  using Position = std::pair<int64_t, int32_t>;

  UnchangedLookup(const Changes& changes) : changes_(changes) {
    for (size_t i = 0; i < changes.names.size(); ++i) {
      index_[changes.names[i]] = static_cast<int>(i);
    }
    // A column renamed since an older change named it (emplace: a current name wins
    // unless the change is known to be older than the rename).
    for (size_t i = 0; i < changes.former_names.size(); ++i) {
      const auto& names = changes.former_names[i];
      for (size_t k = 0; k < names.size(); ++k) {
        const Position through = i < changes.former_through.size() &&
                                         k < changes.former_through[i].size()
                                     ? changes.former_through[i][k]
                                     : Position{0, 0};
        if (through != Position{0, 0}) {
          renamed_[names[k]].push_back({through, static_cast<int>(i)});
        } else {
          index_.emplace(names[k], static_cast<int>(i));
        }
      }
    }
    for (auto& [name, columns] : renamed_) std::sort(columns.begin(), columns.end());
  }

  arrow::Result<std::vector<int>> Of(int64_t row, Position at) const {
    std::vector<int> out;
    const auto* list = dynamic_cast<const arrow::ListArray*>(changes_.unchanged.get());
    if (changes_.unchanged == nullptr ||
        changes_.unchanged->type_id() == arrow::Type::NA) {
      return out;
    }
    if (list == nullptr) {
      return arrow::Status::TypeError("cdc_unchanged is ",
                                      changes_.unchanged->type()->ToString(),
                                      ", expected list<string>");
    }
    if (list->IsNull(row)) return out;
    const auto* values = dynamic_cast<const arrow::StringArray*>(list->values().get());
    if (values == nullptr) {
      return arrow::Status::TypeError("cdc_unchanged elements are not strings");
    }
    for (int64_t i = list->value_offset(row); i < list->value_offset(row + 1); ++i) {
      if (values->IsNull(i)) continue;
      const std::string name(values->GetView(i));
      // The column that had the name when the change was written: the first one
      // renamed away from it at or after the change, else the one holding it now.
      if (!renamed_.empty()) {
        if (auto r = renamed_.find(name); r != renamed_.end()) {
          auto first = std::lower_bound(r->second.begin(), r->second.end(),
                                        std::pair<Position, int>{at, -1});
          if (first != r->second.end()) {
            out.push_back(first->second);
            continue;
          }
        }
      }
      // A name neither current nor former (a column dropped since): nothing to keep.
      auto it = index_.find(name);
      if (it != index_.end()) out.push_back(it->second);
    }
    return out;
  }

 private:
  const Changes& changes_;
  std::unordered_map<std::string, int> index_;
  // Former names with a known last position: per name, (position, column) sorted.
  std::unordered_map<std::string, std::vector<std::pair<Position, int>>> renamed_;
};

}  // namespace

bool IsCdcColumn(const std::string& name) {
  static const char* const kNames[] = {
      "cdc_op",           "cdc_ts",         "cdc_processed_at", "cdc_source_lsn",
      "cdc_source_tx_id", "cdc_commit_lsn", "cdc_seq",          "cdc_unchanged"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](const char* n) { return name == n; });
}

int64_t FoldResult::upserts() const {
  return std::count_if(keys.begin(), keys.end(),
                       [](const FoldedKey& k) { return !k.deleted; });
}

int64_t FoldResult::deletes() const {
  return std::count_if(keys.begin(), keys.end(),
                       [](const FoldedKey& k) { return k.deleted; });
}

arrow::Result<Changes> ChangesFromTable(const arrow::Table& table,
                                        const std::vector<std::string>& row_columns) {
  auto column =
      [&](const std::string& name) -> arrow::Result<std::shared_ptr<arrow::Array>> {
    auto c = table.GetColumnByName(name);
    if (c == nullptr) {
      return arrow::Status::Invalid("the changes have no column `", name, "`");
    }
    return Joined(*c);
  };
  Changes out;
  out.names = row_columns;
  for (const auto& name : row_columns) {
    ARROW_ASSIGN_OR_RAISE(auto array, column(name));
    out.columns.push_back(std::move(array));
  }
  ARROW_ASSIGN_OR_RAISE(out.op, column(kCdcOp));
  ARROW_ASSIGN_OR_RAISE(out.commit_lsn, column(kCdcCommitLsn));
  ARROW_ASSIGN_OR_RAISE(out.seq, column(kCdcSeq));
  if (table.GetColumnByName(kCdcUnchanged) != nullptr) {
    ARROW_ASSIGN_OR_RAISE(out.unchanged, column(kCdcUnchanged));
  }
  return out;
}

namespace {

// Whether a key starts the run with the row Silver holds or with none, judged from
// the changes: each start is ruled out when it makes a transaction remove or change a
// row the key does not have, or end with two rows of the key.
class StartOfKey {
 public:
  explicit StartOfKey(bool may_be_held) : held_ok_(may_be_held) {}

  // The change at `row` of the key.
  void Apply(char op, int64_t row) {
    if (first_op_ == 0) first_op_ = op;
    last_row_ = row;
    switch (op) {
      case 'r':
        // Exactly its own row from here on: both starts lead to the same state.
        converged_ = true;
        absent_ = held_ = 1;
        return;
      case 'c':
        ++absent_;
        ++held_;
        return;
      case 'd':
        if (absent_ == 0)
          RuleOut(&absent_ok_);
        else
          --absent_;
        if (held_ == 0)
          RuleOut(&held_ok_);
        else
          --held_;
        return;
      default:  // 'u'
        if (absent_ == 0) RuleOut(&absent_ok_);
        if (held_ == 0) RuleOut(&held_ok_);
    }
  }

  // At the commit of a transaction that touched the key.
  void Commit() {
    if (absent_ > 1) RuleOut(&absent_ok_);
    if (held_ > 1) RuleOut(&held_ok_);
  }

  // Every row of the key is gone at the end, whichever start.
  bool Gone() const { return absent_ == 0 && held_ == 0; }
  // The change at which the last start was ruled out (when neither fits).
  int64_t ruled_out_at() const { return ruled_out_at_; }

  enum class Start { kAbsent, kHeld, kUndecided };
  // Neither start fits: some transaction ends with two rows of the key, or removes
  // one it does not have, either way.
  bool Fits() const { return converged_ || absent_ok_ || held_ok_; }
  char first_op() const { return first_op_; }
  // An `r` leaves the key exactly its own row, whatever came before.
  bool converged() const { return converged_; }

  Start Decide() const {
    if (converged_) return Start::kAbsent;  // either: the outcome is the same
    if (absent_ok_ && held_ok_) return Start::kUndecided;
    if (absent_ok_) return Start::kAbsent;
    if (held_ok_) return Start::kHeld;
    // Neither fits (a declared key that is not unique): a key whose first change
    // updates or deletes it is taken as held.
    return first_op_ == 'u' || first_op_ == 'd' ? Start::kHeld : Start::kAbsent;
  }

 private:
  void RuleOut(bool* ok) {
    if (*ok) ruled_out_at_ = last_row_;
    *ok = false;
  }

  int32_t absent_ = 0;
  int32_t held_ = 1;
  int64_t last_row_ = -1;
  int64_t ruled_out_at_ = -1;
  bool absent_ok_ = true;
  bool held_ok_;
  bool converged_ = false;
  char first_op_ = 0;
};

// One row of a key while the changes are folded: where each value comes from.
struct KeyRow {
  std::vector<int64_t> sources;
  std::string existing_key;
};

// The rows of each key, oldest first. Almost every key has at most one, kept in its
// FoldedKey (`deleted` when none); the others wait in `more_`.
class KeyRows {
 public:
  explicit KeyRows(std::vector<FoldedKey>* keys) : keys_(*keys) {}

  bool Empty(size_t slot) const { return keys_[slot].deleted; }

  void PushBack(size_t slot, KeyRow row) {
    FoldedKey& k = keys_[slot];
    if (k.deleted) {
      Set(k, std::move(row));
    } else {
      more_[slot].push_back(std::move(row));
    }
  }

  // Removes the oldest row (the key must have one).
  KeyRow PopFront(size_t slot) {
    FoldedKey& k = keys_[slot];
    KeyRow out{std::move(k.sources), std::move(k.existing_key)};
    k.sources.clear();
    k.existing_key.clear();
    auto it = more_.empty() ? more_.end() : more_.find(slot);
    if (it == more_.end()) {
      k.deleted = true;
      return out;
    }
    Set(k, std::move(it->second.front()));
    it->second.pop_front();
    if (it->second.empty()) more_.erase(it);
    return out;
  }

  // Removes the row `score` rates highest (the oldest of those), among several; the
  // oldest when the key has one. score(sources) > score of any other row wins.
  template <typename F>
  KeyRow PopBest(size_t slot, F&& score) {
    auto it = more_.empty() ? more_.end() : more_.find(slot);
    if (it == more_.end()) return PopFront(slot);
    FoldedKey& k = keys_[slot];
    int best = score(k.sources);
    size_t best_at = 0;
    for (size_t i = 0; i < it->second.size(); ++i) {
      const int s = score(it->second[i].sources);
      if (s > best) {
        best = s;
        best_at = i + 1;
      }
    }
    if (best_at == 0) return PopFront(slot);
    KeyRow out = std::move(it->second[best_at - 1]);
    it->second.erase(it->second.begin() + static_cast<std::ptrdiff_t>(best_at - 1));
    if (it->second.empty()) more_.erase(it);
    return out;
  }

  // Changes the oldest row (the key must have one), which becomes the newest.
  template <typename F>
  void Update(size_t slot, F&& change) {
    FoldedKey& k = keys_[slot];
    KeyRow changed = change(KeyRow{std::move(k.sources), std::move(k.existing_key)});
    auto it = more_.empty() ? more_.end() : more_.find(slot);
    if (it == more_.end()) {
      Set(k, std::move(changed));
      return;
    }
    it->second.push_back(std::move(changed));
    Set(k, std::move(it->second.front()));
    it->second.pop_front();
  }

  // Leaves exactly `row`.
  void Replace(size_t slot, KeyRow row) {
    if (!more_.empty()) more_.erase(slot);
    Set(keys_[slot], std::move(row));
  }

  // At the end: a key that still has several rows (a key that is not unique) keeps
  // the newest. Returns such keys' slots.
  std::vector<size_t> Finish() {
    std::vector<size_t> several;
    for (auto& [slot, rows] : more_) {
      Set(keys_[slot], std::move(rows.back()));
      several.push_back(slot);
    }
    more_.clear();
    return several;
  }

 private:
  static void Set(FoldedKey& k, KeyRow row) {
    k.deleted = false;
    k.sources = std::move(row.sources);
    k.existing_key = std::move(row.existing_key);
  }

  std::vector<FoldedKey>& keys_;
  std::unordered_map<size_t, std::deque<KeyRow>> more_;
};

// Values compared as the same value: a NaN is the NaN it was written as (a delete
// under REPLICA IDENTITY FULL carries the NaN of the row it removes).
const arrow::EqualOptions kSameValue = arrow::EqualOptions::Defaults().nans_equal(true);

// The row the last delete removed, for the new row of a key-changing update.
struct LastDelete {
  int64_t lsn = -1;
  int32_t seq = -1;
  size_t slot = 0;
  std::optional<KeyRow> row;
};

// One fold, pass by pass: the changes in commit order (from the last truncate on),
// each one's key, how each key starts and the rows each key ends with.
struct Folding {
  explicit Folding(const Changes& changes)
      : changes(changes), n(changes.length()), width(changes.columns.size()) {}

  // Checks the changes and sorts them into commit order (`order`).
  arrow::Status Order();
  // The key columns' arrays (`keys`).
  arrow::Status FindKeyColumns(const std::vector<int>& key_columns);
  // Starts after the last truncate, if any.
  void SkipTruncated(bool silver_has_rows);
  // Pass 1: each change's key, and how each key starts.
  arrow::Status FindKeys();
  // Decides how each key starts (`held`: the keys Silver holds, when known); false
  // when some key needs Silver asked (a row of each in result.undecided).
  bool StartKeys(const std::unordered_set<std::string>* held);
  // Pass 2: the rows of each key, change by change.
  arrow::Status FoldRows();
  // The delete at `row` of the key in `slot`: the row it removes, if the key has one.
  LastDelete Delete(int64_t row, size_t slot, const FoldedKey& state);
  // Names `row` as giving a key a second row (FoldResult::duplicate; the first such
  // in commit order) unless its key has a NULL: such rows are not one key in the source
  // (RefuseNullKeys refuses them).
  void Duplicate(int64_t row, const char* why) {
    for (const arrow::Array* k : keys) {
      if (k->IsNull(row)) return;
    }
    auto at = [&](int64_t r) { return std::pair(lsn->Value(r), seq->Value(r)); };
    if (result.duplicate < 0 || at(row) < at(result.duplicate)) {
      result.duplicate = row;
      result.duplicate_why = why;
    }
  }

  const Changes& changes;
  const int64_t n;
  const size_t width;
  const arrow::StringArray* op = nullptr;
  const arrow::Int64Array* lsn = nullptr;
  const arrow::Int32Array* seq = nullptr;
  std::vector<int64_t> order;
  std::vector<const arrow::Array*> keys;
  FoldResult result;
  size_t start = 0;
  bool may_be_held = false;
  std::vector<size_t> slot_of;
  std::vector<StartOfKey> starts;
  KeyRows rows{&result.keys};
};

arrow::Status Folding::Order() {
  for (const auto& c : changes.columns) {
    if (c->length() != n)
      return arrow::Status::Invalid("change columns differ in length");
  }
  op = dynamic_cast<const arrow::StringArray*>(changes.op.get());
  lsn = dynamic_cast<const arrow::Int64Array*>(changes.commit_lsn.get());
  seq = dynamic_cast<const arrow::Int32Array*>(changes.seq.get());
  if (op == nullptr || lsn == nullptr || seq == nullptr) {
    return arrow::Status::TypeError(
        "cdc_op, cdc_commit_lsn and cdc_seq must be string, long and int");
  }
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (lsn->IsNull(i) || seq->IsNull(i) || op->IsNull(i)) {
      return arrow::Status::Invalid(
          "a Bronze change has a null cdc_op, cdc_commit_lsn or "
          "cdc_seq; the table is not a floe Bronze changelog");
    }
    const std::string_view o = op->GetView(i);
    if (o != "c" && o != "u" && o != "d" && o != "r" && o != "t") {
      return arrow::Status::Invalid("unknown cdc_op `", std::string(o),
                                    "` at cdc_commit_lsn ", lsn->Value(i), ", cdc_seq ",
                                    seq->Value(i));
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::pair(lsn->Value(a), seq->Value(a)) <
           std::pair(lsn->Value(b), seq->Value(b));
  });
  return arrow::Status::OK();
}

arrow::Status Folding::FindKeyColumns(const std::vector<int>& key_columns) {
  for (int k : key_columns) {
    if (k < 0 || static_cast<size_t>(k) >= width) {
      return arrow::Status::Invalid("key column index ", k, " out of range");
    }
    keys.push_back(changes.columns[k].get());
  }
  return arrow::Status::OK();
}

void Folding::SkipTruncated(bool silver_has_rows) {
  // A truncate empties the table: only what follows the last one counts, from nothing.
  for (size_t i = order.size(); i-- > 0;) {
    if (op->GetView(order[i]) == "t") {
      result.truncated = true;
      start = i + 1;
      break;
    }
  }
  may_be_held = silver_has_rows && !result.truncated;
}

arrow::Status Folding::FindKeys() {
  std::unordered_map<std::string, size_t> slot_of_key;
  // A key of one integer column is looked up by its value (its non-null rows), not by
  // an encoded string per change: the fold's largest cost with millions of changes.
  std::unordered_map<int64_t, size_t> slot_of_int;
  const arrow::Array* int_key = nullptr;
  int int_width = 0;
  if (keys.size() == 1) {
    switch (keys[0]->type_id()) {
      case arrow::Type::INT32:
      case arrow::Type::DATE32:
        int_width = 32;
        break;
      case arrow::Type::INT64:
      case arrow::Type::TIME64:
      case arrow::Type::TIMESTAMP:
        int_width = 64;
        break;
      default:
        break;
    }
    if (int_width != 0) int_key = keys[0];
  }
  if (int_key != nullptr) {
    slot_of_int.reserve(order.size() - start);
  } else {
    slot_of_key.reserve(order.size() - start);
  }
  auto slot_for = [&](int64_t row) -> arrow::Result<std::pair<size_t, bool>> {
    if (int_key != nullptr && !int_key->IsNull(row)) {
      const int64_t v = int_width == 32 ? int_key->data()->GetValues<int32_t>(1)[row]
                                        : int_key->data()->GetValues<int64_t>(1)[row];
      auto [it, inserted] = slot_of_int.emplace(v, result.keys.size());
      return std::pair(it->second, inserted);
    }
    ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(keys, row));
    auto [it, inserted] = slot_of_key.emplace(std::move(key), result.keys.size());
    return std::pair(it->second, inserted);
  };
  slot_of.resize(order.size() - start);
  std::vector<size_t> touched;          // keys the current transaction touched
  std::vector<int64_t> touched_in;      // per key: the commit LSN that last touched it
  auto commit = [&] {
    for (size_t slot : touched) starts[slot].Commit();
    touched.clear();
  };
  for (size_t i = start; i < order.size(); ++i) {
    const int64_t row = order[i];
    if (i > start && lsn->Value(row) != lsn->Value(order[i - 1])) commit();
    ARROW_ASSIGN_OR_RAISE(const auto found, slot_for(row));
    const auto [slot, inserted] = found;
    if (inserted) {
      FoldedKey fresh;
      ARROW_ASSIGN_OR_RAISE(fresh.key, EncodeKey(keys, row));
      fresh.key_row = row;  // its first change until FoldRows
      fresh.deleted = true;
      result.keys.push_back(std::move(fresh));
      starts.emplace_back(may_be_held);
      touched_in.push_back(-1);
    }
    slot_of[i - start] = slot;
    if (may_be_held) {
      starts[slot].Apply(op->GetView(row)[0], row);
      if (touched_in[slot] != lsn->Value(row)) {
        touched_in[slot] = lsn->Value(row);
        touched.push_back(slot);
      }
    }
  }
  commit();
  touched_in = {};
  slot_of_key = {};
  slot_of_int = {};
  return arrow::Status::OK();
}

bool Folding::StartKeys(const std::unordered_set<std::string>* held) {
  if (may_be_held) {
    std::vector<StartOfKey::Start> start_of(result.keys.size());
    bool undecided = false;
    for (size_t slot = 0; slot < result.keys.size(); ++slot) {
      start_of[slot] = starts[slot].Decide();
      // A key none of whose rows is left is right in Silver (deleted) whatever the
      // changes show of it.
      const bool gone = starts[slot].Gone();
      if (!starts[slot].Fits() && !gone) {
        Duplicate(starts[slot].ruled_out_at(),
                  "with it, a transaction leaves two rows of the key, or updates or "
                  "deletes a row that neither a row Silver holds nor the changes "
                  "before it give the key");
      }
      if (start_of[slot] == StartOfKey::Start::kAbsent &&
          starts[slot].first_op() == 'c' && !starts[slot].converged() && !gone) {
        result.keys[slot].inserted_by = result.keys[slot].key_row;
      }
      if (start_of[slot] != StartOfKey::Start::kUndecided) continue;
      if (held == nullptr) {
        undecided = true;
      } else {
        start_of[slot] = held->contains(result.keys[slot].key)
                             ? StartOfKey::Start::kHeld
                             : StartOfKey::Start::kAbsent;
      }
    }
    if (undecided) {
      // A row of each: the caller looks the keys up in Silver and folds again.
      for (size_t i = start; i < order.size(); ++i) {
        StartOfKey::Start& s = start_of[slot_of[i - start]];
        if (s != StartOfKey::Start::kUndecided) continue;
        s = StartOfKey::Start::kAbsent;  // listed once
        result.undecided.push_back(order[i]);
      }
      result.keys.clear();
      return false;
    }
    for (size_t slot = 0; slot < result.keys.size(); ++slot) {
      if (start_of[slot] == StartOfKey::Start::kHeld) {
        rows.PushBack(slot, KeyRow{std::vector<int64_t>(width, kFromExisting), {}});
      }
    }
  }
  return true;
}

arrow::Status Folding::FoldRows() {
  UnchangedLookup unchanged(changes);
  std::optional<LastDelete> last_delete;
  std::vector<bool> keep;
  // Per key: the commit LSN of its last `r` (a copy's rows share one); the keys one
  // copy read two rows of, and the second row, unless a later copy read them again.
  std::vector<int64_t> copied_at(result.keys.size(), -1);
  std::map<size_t, int64_t> copied_twice;
  for (size_t i = start; i < order.size(); ++i) {
    const int64_t row = order[i];
    const size_t slot = slot_of[i - start];
    const char o = op->GetView(row)[0];
    FoldedKey& state = result.keys[slot];
    state.key_row = row;
    state.commit_lsn = lsn->Value(row);
    if (o == 'd') {
      last_delete = Delete(row, slot, state);
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(std::vector<int> kept,
                          unchanged.Of(row, {lsn->Value(row), seq->Value(row)}));
    // `row`'s values over `previous`: each column it sent.
    auto over = [&](KeyRow previous) {
      if (kept.empty()) {
        std::fill(previous.sources.begin(), previous.sources.end(), row);
        return previous;
      }
      keep.assign(width, false);
      for (int c : kept) keep[c] = true;
      for (size_t c = 0; c < width; ++c) {
        if (!keep[c]) previous.sources[c] = row;
      }
      return previous;
    };
    auto nothing = [&] {
      return KeyRow{std::vector<int64_t>(width, kNullValue), {}};
    };
    if (o == 'r') {
      if (copied_at[slot] == lsn->Value(row)) {
        copied_twice.emplace(slot, row);
      } else {
        copied_twice.erase(slot);
      }
      copied_at[slot] = lsn->Value(row);
      rows.Replace(slot, over(nothing()));
    } else if (o == 'c') {
      // The new row of a key-changing update is a `c` that lacks values: an insert
      // always carries every value, so only that half of a `d`+`c` pair can. The pair
      // may be of one merge key: an update changing the primary key but not a key
      // declared in silver.keys is written as d + c too. A `u` right after another
      // key's delete (DELETE a; UPDATE b SET title = ...) is an update of its own row
      // and keeps its own previous values.
      const bool moved = !kept.empty() && last_delete &&
                         last_delete->lsn == lsn->Value(row) &&
                         last_delete->seq + 1 == seq->Value(row) && last_delete->row;
      rows.PushBack(slot, over(moved ? std::move(*last_delete->row) : nothing()));
    } else if (rows.Empty(slot)) {
      // An update of a row the key does not have (only when neither start fits).
      rows.PushBack(slot, over(nothing()));
    } else {
      // The oldest row changes, and becomes the newest.
      rows.Update(slot, [&](KeyRow r) { return over(std::move(r)); });
    }
    last_delete.reset();
  }
  for (size_t slot : rows.Finish()) {
    Duplicate(result.keys[slot].key_row, "the changes end with two rows of the key");
  }
  for (const auto& [slot, second] : copied_twice) {
    Duplicate(second, "one copy read two rows of the key");
  }
  return arrow::Status::OK();
}

LastDelete Folding::Delete(int64_t row, size_t slot, const FoldedKey& state) {
  LastDelete removed{lsn->Value(row), seq->Value(row), slot, std::nullopt};
  if (!rows.Empty(slot)) {
    // Of several rows, the one whose values the delete carries (all of them under
    // REPLICA IDENTITY FULL): 2 when every value is known and equal, 1 when none
    // is known to differ (Silver's values are not known here), 0 otherwise.
    removed.row = rows.PopBest(slot, [&](const std::vector<int64_t>& sources) {
      int score = 2;
      for (size_t c = 0; c < width; ++c) {
        const arrow::Array& values = *changes.columns[c];
        if (sources[c] == kFromExisting) {
          score = 1;
        } else if (sources[c] == kNullValue
                       ? !values.IsNull(row)
                       : !values.RangeEquals(sources[c], sources[c] + 1, row, values,
                                             kSameValue)) {
          return 0;
        }
      }
      return score;
    });
    if (removed.row->existing_key.empty()) removed.row->existing_key = state.key;
    // The values the delete carries are the removed row's (every one under
    // REPLICA IDENTITY FULL; a null may be one it did not send): known now where
    // they were Silver's, so a key-changing update's new row that takes them over
    // can be told from another row of its key by a later delete.
    for (size_t c = 0; c < width; ++c) {
      if (removed.row->sources[c] == kFromExisting && !changes.columns[c]->IsNull(row)) {
        removed.row->sources[c] = row;
      }
    }
  }
  return removed;
}

}  // namespace

arrow::Result<FoldResult> Fold(const Changes& changes,
                               const std::vector<int>& key_columns, bool silver_has_rows,
                               const std::unordered_set<std::string>* held) {
  Folding f(changes);
  ARROW_RETURN_NOT_OK(f.Order());
  ARROW_RETURN_NOT_OK(f.FindKeyColumns(key_columns));
  f.SkipTruncated(silver_has_rows);
  ARROW_RETURN_NOT_OK(f.FindKeys());
  if (!f.StartKeys(held)) return std::move(f.result);
  f.starts = {};
  ARROW_RETURN_NOT_OK(f.FoldRows());
  for (const FoldedKey& k : f.result.keys) {
    if (k.deleted) continue;
    if (std::find(k.sources.begin(), k.sources.end(), kFromExisting) != k.sources.end()) {
      f.result.needs_existing = true;
    }
  }
  return std::move(f.result);
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> BuildUpserts(
    const Changes& changes, const FoldResult& fold, const ExistingRows* existing,
    const std::shared_ptr<arrow::Schema>& schema) {
  ARROW_RETURN_NOT_OK(iceberg::EnsureComputeInitialized());
  std::vector<const FoldedKey*> rows;
  for (const FoldedKey& k : fold.keys) {
    if (!k.deleted) rows.push_back(&k);
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t changes_length = changes.length();
  std::vector<std::shared_ptr<arrow::Array>> out;
  for (const auto& field : schema->fields()) {
    const bool source_column = std::find(changes.names.begin(), changes.names.end(),
                                         field->name()) != changes.names.end();
    if (field->name() == kCdcCommitLsn && !source_column) {
      arrow::Int64Builder b;
      ARROW_RETURN_NOT_OK(b.Reserve(n));
      for (const FoldedKey* k : rows) b.UnsafeAppend(k->commit_lsn);
      ARROW_ASSIGN_OR_RAISE(auto array, b.Finish());
      if (!array->type()->Equals(*field->type())) {
        ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, field->type()));
        array = cast.make_array();
      }
      out.push_back(array);
      continue;
    }
    auto at = std::find(changes.names.begin(), changes.names.end(), field->name());
    if (at == changes.names.end()) {
      ARROW_ASSIGN_OR_RAISE(auto nulls, arrow::MakeArrayOfNull(field->type(), n));
      out.push_back(nulls);
      continue;
    }
    const size_t c = static_cast<size_t>(at - changes.names.begin());
    std::shared_ptr<arrow::Array> values = changes.columns[c];
    if (existing != nullptr && c < existing->columns.size()) {
      ARROW_ASSIGN_OR_RAISE(values, arrow::Concatenate({values, existing->columns[c]}));
    }
    arrow::Int64Builder indices;
    ARROW_RETURN_NOT_OK(indices.Reserve(n));
    for (const FoldedKey* k : rows) {
      const int64_t source = k->sources[c];
      if (source >= 0) {
        indices.UnsafeAppend(source);
      } else if (source == kFromExisting && existing != nullptr) {
        auto found =
            existing->row_of_key.find(k->existing_key.empty() ? k->key : k->existing_key);
        if (found != existing->row_of_key.end()) {
          indices.UnsafeAppend(changes_length + found->second);
        } else {
          indices.UnsafeAppendNull();
        }
      } else {
        indices.UnsafeAppendNull();
      }
    }
    ARROW_ASSIGN_OR_RAISE(auto index_array, indices.Finish());
    ARROW_ASSIGN_OR_RAISE(arrow::Datum taken, cp::Take(values, index_array));
    std::shared_ptr<arrow::Array> array = taken.make_array();
    if (!array->type()->Equals(*field->type())) {
      ARROW_ASSIGN_OR_RAISE(auto cast, cp::Cast(array, field->type()));
      array = cast.make_array();
    }
    out.push_back(array);
  }
  return arrow::RecordBatch::Make(schema, n, std::move(out));
}

}  // namespace floe::silver
