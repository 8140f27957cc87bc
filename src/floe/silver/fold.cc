#include "floe/silver/fold.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <optional>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>

namespace floe::silver {
namespace {

namespace cp = arrow::compute;

arrow::Status EnsureCompute() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] { status = cp::Initialize(); });
  return status;
}

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
  UnchangedLookup(const Changes& changes) : changes_(changes) {
    for (size_t i = 0; i < changes.names.size(); ++i) {
      index_[changes.names[i]] = static_cast<int>(i);
    }
    // A column renamed since an older change named it (emplace: a current name wins).
    for (size_t i = 0; i < changes.former_names.size(); ++i) {
      for (const auto& name : changes.former_names[i]) {
        index_.emplace(name, static_cast<int>(i));
      }
    }
  }

  arrow::Result<std::vector<int>> Of(int64_t row) const {
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
      // A name neither current nor former (a column dropped since): nothing to keep.
      auto it = index_.find(std::string(values->GetView(i)));
      if (it != index_.end()) out.push_back(it->second);
    }
    return out;
  }

 private:
  const Changes& changes_;
  std::unordered_map<std::string, int> index_;
};

void AppendFixed(const arrow::Array& array, int64_t row, int width, std::string* out) {
  const auto& data = array.data();
  const uint8_t* base = data->buffers[1]->data() + (data->offset + row) * width;
  out->append(reinterpret_cast<const char*>(base), static_cast<size_t>(width));
}

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

arrow::Result<std::string> EncodeKey(const std::vector<const arrow::Array*>& columns,
                                     int64_t row) {
  std::string out;
  for (const arrow::Array* array : columns) {
    if (array->IsNull(row)) {
      out.push_back('\0');
      continue;
    }
    out.push_back('\1');
    const arrow::DataType& type = *array->type();
    switch (type.id()) {
      case arrow::Type::BOOL:
        out.push_back(static_cast<const arrow::BooleanArray&>(*array).Value(row) ? '\1'
                                                                                 : '\0');
        break;
      case arrow::Type::STRING: {
        auto view = static_cast<const arrow::StringArray&>(*array).GetView(row);
        const uint64_t n = view.size();
        out.append(reinterpret_cast<const char*>(&n), sizeof(n));
        out.append(view.data(), view.size());
        break;
      }
      case arrow::Type::BINARY: {
        auto view = static_cast<const arrow::BinaryArray&>(*array).GetView(row);
        const uint64_t n = view.size();
        out.append(reinterpret_cast<const char*>(&n), sizeof(n));
        out.append(view.data(), view.size());
        break;
      }
      default: {
        const auto* fixed = dynamic_cast<const arrow::FixedWidthType*>(&type);
        if (fixed == nullptr || fixed->bit_width() % 8 != 0) {
          return arrow::Status::NotImplemented("a merge key of type ", type.ToString(),
                                               " is not supported; declare another key "
                                               "(silver.keys in the pipeline file)");
        }
        AppendFixed(*array, row, fixed->bit_width() / 8, &out);
      }
    }
  }
  return out;
}

arrow::Result<FoldResult> Fold(const Changes& changes,
                               const std::vector<int>& key_columns,
                               bool silver_has_rows) {
  const int64_t n = changes.length();
  const size_t width = changes.columns.size();
  for (const auto& c : changes.columns) {
    if (c->length() != n)
      return arrow::Status::Invalid("change columns differ in length");
  }
  const auto* op = dynamic_cast<const arrow::StringArray*>(changes.op.get());
  const auto* lsn = dynamic_cast<const arrow::Int64Array*>(changes.commit_lsn.get());
  const auto* seq = dynamic_cast<const arrow::Int32Array*>(changes.seq.get());
  if (op == nullptr || lsn == nullptr || seq == nullptr) {
    return arrow::Status::TypeError(
        "cdc_op, cdc_commit_lsn and cdc_seq must be string, long and int");
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (lsn->IsNull(i) || seq->IsNull(i) || op->IsNull(i)) {
      return arrow::Status::Invalid(
          "a Bronze change has a null cdc_op, cdc_commit_lsn or "
          "cdc_seq; the table is not a floe Bronze changelog");
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return std::pair(lsn->Value(a), seq->Value(a)) <
           std::pair(lsn->Value(b), seq->Value(b));
  });

  std::vector<const arrow::Array*> keys;
  for (int k : key_columns) {
    if (k < 0 || static_cast<size_t>(k) >= width) {
      return arrow::Status::Invalid("key column index ", k, " out of range");
    }
    keys.push_back(changes.columns[k].get());
  }
  UnchangedLookup unchanged(changes);

  FoldResult result;
  std::unordered_map<std::string, size_t> slot_of_key;
  slot_of_key.reserve(static_cast<size_t>(n));
  // What a key's previous values are before its first change in this run.
  int64_t initial_source = silver_has_rows ? kFromExisting : kNullValue;
  // The last delete and the values its key had before it, for the new row of a
  // key-changing update.
  struct LastDelete {
    int64_t lsn = -1;
    int32_t seq = -1;
    std::string key;
    std::vector<int64_t> sources;
    std::string existing_key;
  };
  std::optional<LastDelete> last_delete;
  for (int64_t row : order) {
    const std::string_view o = op->GetView(row);
    if (o == "t") {
      result.truncated = true;
      result.keys.clear();
      slot_of_key.clear();
      initial_source = kNullValue;
      last_delete.reset();
      continue;
    }
    const bool is_delete = o == "d";
    if (!is_delete && o != "c" && o != "u" && o != "r") {
      return arrow::Status::Invalid("unknown cdc_op `", std::string(o),
                                    "` at cdc_commit_lsn ", lsn->Value(row), ", cdc_seq ",
                                    seq->Value(row));
    }
    ARROW_ASSIGN_OR_RAISE(std::string key, EncodeKey(keys, row));
    auto [it, inserted] = slot_of_key.emplace(key, result.keys.size());
    if (inserted) {
      FoldedKey fresh;
      fresh.key = key;
      fresh.sources.assign(width, initial_source);
      result.keys.push_back(std::move(fresh));
    }
    FoldedKey& state = result.keys[it->second];
    const bool had_row = !state.deleted;
    state.key_row = row;
    state.commit_lsn = lsn->Value(row);
    if (is_delete) {
      last_delete = LastDelete{lsn->Value(row), seq->Value(row), key, state.sources,
                               state.existing_key};
      state.deleted = true;
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(std::vector<int> kept, unchanged.Of(row));
    // The new row of a key-changing update is a `c` that lacks values: an insert
    // always carries every value, so only that half of a `d`+`c` pair can. A `u`
    // right after another key's delete (DELETE a; UPDATE b SET title = ...) is an
    // update of its own row and keeps its own previous values.
    if (o == "c" && !kept.empty() && last_delete && last_delete->key != key &&
        last_delete->lsn == lsn->Value(row) && last_delete->seq + 1 == seq->Value(row)) {
      // The new row of a key-changing update: its unsent values are the old key's.
      state.sources = last_delete->sources;
      state.existing_key = last_delete->existing_key.empty() ? last_delete->key
                                                             : last_delete->existing_key;
    } else if (!had_row) {
      // The previous values: this run's state of the key, nothing after a delete.
      std::fill(state.sources.begin(), state.sources.end(), kNullValue);
      state.existing_key.clear();
    }
    state.deleted = false;
    if (kept.empty()) {
      std::fill(state.sources.begin(), state.sources.end(), row);
      continue;
    }
    std::vector<bool> keep(width, false);
    for (int c : kept) keep[c] = true;
    for (size_t c = 0; c < width; ++c) {
      if (!keep[c]) state.sources[c] = row;
    }
  }
  for (const FoldedKey& k : result.keys) {
    if (k.deleted) continue;
    if (std::find(k.sources.begin(), k.sources.end(), kFromExisting) != k.sources.end()) {
      result.needs_existing = true;
    }
  }
  return result;
}

arrow::Result<std::shared_ptr<arrow::RecordBatch>> BuildUpserts(
    const Changes& changes, const FoldResult& fold, const ExistingRows* existing,
    const std::shared_ptr<arrow::Schema>& schema) {
  ARROW_RETURN_NOT_OK(EnsureCompute());
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
