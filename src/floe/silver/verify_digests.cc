// The digests verify compares: canonical value hashes, rows reduced to (key text, row
// hash), per key comparisons, and RowDigests, the same spread over partitions of keys
// and spilled when they do not fit.

#include <algorithm>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>

#include "floe/silver/verify.h"
#include "floe/silver/verify_internal.h"

namespace floe::silver {

namespace verify_internal {

arrow::Status EnsureCompute() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] { status = arrow::compute::Initialize(); });
  return status;
}

}  // namespace verify_internal

namespace {

using verify_internal::EnsureCompute;

namespace cp = arrow::compute;

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;
// The hash of a null value (no text hashes to it in practice).
constexpr uint64_t kNullHash = 0x6e756c6c9e3779b9ull;

uint64_t Fnv1a(std::string_view bytes) {
  uint64_t h = kFnvOffset;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

// splitmix64's finalizer: spreads the bits of a combined hash.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool CastsToText(const arrow::DataType& type) {
  return arrow::is_integer(type.id()) || arrow::is_floating(type.id()) ||
         arrow::is_decimal(type.id()) || arrow::is_temporal(type.id()) ||
         type.id() == arrow::Type::BOOL;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

arrow::Result<std::shared_ptr<arrow::Array>> Flatten(const arrow::ChunkedArray& chunked) {
  if (chunked.num_chunks() == 1) return chunked.chunk(0);
  if (chunked.num_chunks() == 0) return arrow::MakeEmptyArray(chunked.type());
  return arrow::Concatenate(chunked.chunks());
}

arrow::Status AppendCanonical(const arrow::Array& array, int64_t i, std::string* out);

// An element of a nested value: its canonical text prefixed with its length, so that
// ["a,b"] and ["a", "b"] differ.
arrow::Status AppendElement(const arrow::Array& array, int64_t i, std::string* out) {
  std::string text;
  ARROW_RETURN_NOT_OK(AppendCanonical(array, i, &text));
  out->append(array.IsNull(i) ? "" : std::to_string(text.size()) + "#");
  out->append(text);
  return arrow::Status::OK();
}

// The canonical text of a value of any type, nested ones by their structure (lists
// as [a,b], structs as {name:value,...}) so that field names of list elements and
// the like do not matter.
arrow::Status AppendCanonical(const arrow::Array& array, int64_t i, std::string* out) {
  if (array.IsNull(i)) {
    out->append("null");
    return arrow::Status::OK();
  }
  switch (array.type_id()) {
    case arrow::Type::STRING:
      out->append(static_cast<const arrow::StringArray&>(array).GetView(i));
      return arrow::Status::OK();
    case arrow::Type::LARGE_STRING:
      out->append(static_cast<const arrow::LargeStringArray&>(array).GetView(i));
      return arrow::Status::OK();
    case arrow::Type::BINARY:
      out->append(Hex(static_cast<const arrow::BinaryArray&>(array).GetView(i)));
      return arrow::Status::OK();
    case arrow::Type::LARGE_BINARY:
      out->append(Hex(static_cast<const arrow::LargeBinaryArray&>(array).GetView(i)));
      return arrow::Status::OK();
    case arrow::Type::FIXED_SIZE_BINARY: {
      // 16 bytes are a uuid (floe maps no other type to them): written as PostgreSQL
      // writes it, so that a differing key reads as the source shows it.
      const std::string hex =
          Hex(static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(i));
      if (hex.size() != 32) {
        out->append(hex);
        return arrow::Status::OK();
      }
      out->append(hex, 0, 8).append("-").append(hex, 8, 4).append("-");
      out->append(hex, 12, 4).append("-").append(hex, 16, 4).append("-");
      out->append(hex, 20, 12);
      return arrow::Status::OK();
    }
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::FIXED_SIZE_LIST:
    case arrow::Type::MAP: {
      std::shared_ptr<arrow::Array> values;
      if (array.type_id() == arrow::Type::LARGE_LIST) {
        values = static_cast<const arrow::LargeListArray&>(array).value_slice(i);
      } else if (array.type_id() == arrow::Type::FIXED_SIZE_LIST) {
        values = static_cast<const arrow::FixedSizeListArray&>(array).value_slice(i);
      } else {
        values = static_cast<const arrow::ListArray&>(array).value_slice(i);
      }
      out->push_back('[');
      for (int64_t k = 0; k < values->length(); ++k) {
        if (k > 0) out->push_back(',');
        ARROW_RETURN_NOT_OK(AppendElement(*values, k, out));
      }
      out->push_back(']');
      return arrow::Status::OK();
    }
    case arrow::Type::STRUCT: {
      const auto& st = static_cast<const arrow::StructArray&>(array);
      out->push_back('{');
      for (int f = 0; f < st.num_fields(); ++f) {
        if (f > 0) out->push_back(',');
        out->append(st.type()->field(f)->name());
        out->push_back(':');
        ARROW_RETURN_NOT_OK(AppendElement(*st.field(f), i, out));
      }
      out->push_back('}');
      return arrow::Status::OK();
    }
    default: {
      ARROW_ASSIGN_OR_RAISE(auto scalar, array.GetScalar(i));
      out->append(scalar->ToString());
      return arrow::Status::OK();
    }
  }
}

}  // namespace

arrow::Result<std::vector<uint64_t>> CanonicalValueHashes(
    const arrow::Array& column, std::vector<std::string>* texts) {
  ARROW_RETURN_NOT_OK(EnsureCompute());
  const int64_t n = column.length();
  std::vector<uint64_t> out(static_cast<size_t>(n));
  if (texts != nullptr) texts->assign(static_cast<size_t>(n), "null");
  auto emit = [&](int64_t i, std::string_view text) {
    out[i] = Mix(Fnv1a(text));
    if (texts != nullptr) (*texts)[i] = std::string(text);
  };
  const arrow::DataType& type = *column.type();
  std::shared_ptr<arrow::Array> as_text;
  if (type.id() == arrow::Type::STRING || type.id() == arrow::Type::LARGE_STRING) {
    as_text = arrow::MakeArray(column.data());
  } else if (CastsToText(type)) {
    ARROW_ASSIGN_OR_RAISE(arrow::Datum cast,
                          cp::Cast(arrow::MakeArray(column.data()), arrow::utf8()));
    as_text = cast.make_array();
  }
  for (int64_t i = 0; i < n; ++i) {
    if (column.IsNull(i)) {
      out[i] = kNullHash;
      continue;
    }
    if (as_text != nullptr) {
      if (as_text->type_id() == arrow::Type::LARGE_STRING) {
        emit(i, static_cast<const arrow::LargeStringArray&>(*as_text).GetView(i));
      } else {
        emit(i, static_cast<const arrow::StringArray&>(*as_text).GetView(i));
      }
      continue;
    }
    std::string text;
    ARROW_RETURN_NOT_OK(AppendCanonical(column, i, &text));
    emit(i, text);
  }
  return out;
}

namespace {

using ColumnOf =
    std::function<arrow::Result<std::shared_ptr<arrow::Array>>(const std::string&)>;

// Per row of `n`: its hash over `columns` (in this order) and its key's display text;
// `column_digests`, when set, gets each column's values added.
arrow::Status HashRows(const ColumnOf& column_of, size_t n,
                       const std::vector<std::string>& key,
                       const std::vector<std::string>& columns,
                       std::vector<uint64_t>* row_hash,
                       std::vector<std::string>* key_text,
                       std::vector<RowDigest>* column_digests) {
  row_hash->assign(n, kFnvOffset);
  key_text->assign(n, std::string());
  for (const auto& k : key) {
    ARROW_ASSIGN_OR_RAISE(auto array, column_of(k));
    std::vector<std::string> texts;
    ARROW_RETURN_NOT_OK(CanonicalValueHashes(*array, &texts).status());
    for (size_t i = 0; i < n; ++i) {
      std::string& text = (*key_text)[i];
      if (!text.empty()) text += ", ";
      text += k + "=" + texts[i];
    }
  }
  // A column's digest pairs each value with its row's key, so values swapped between
  // rows change it.
  std::vector<uint64_t> key_hash;
  if (column_digests != nullptr) {
    key_hash.resize(n);
    for (size_t i = 0; i < n; ++i) key_hash[i] = Fnv1a((*key_text)[i]);
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    ARROW_ASSIGN_OR_RAISE(auto array, column_of(columns[c]));
    ARROW_ASSIGN_OR_RAISE(auto hashes, CanonicalValueHashes(*array));
    for (size_t i = 0; i < n; ++i) {
      (*row_hash)[i] = Mix((*row_hash)[i] ^ (hashes[i] + c * 0x9e3779b97f4a7c15ull));
    }
    if (column_digests == nullptr) continue;
    RowDigest& d = (*column_digests)[c];
    d.rows += static_cast<int64_t>(n);
    for (size_t i = 0; i < n; ++i) d.checksum += Mix(key_hash[i] ^ Mix(hashes[i]));
  }
  return arrow::Status::OK();
}

arrow::Status NoColumn(const std::string& name) {
  return arrow::Status::Invalid("no column `", name, "` to compare");
}

// The partition of a key's text among `partitions` (a power of two).
int32_t PartitionOf(std::string_view key_text, int32_t partitions) {
  return static_cast<int32_t>(Mix(Fnv1a(key_text)) &
                              static_cast<uint64_t>(partitions - 1));
}

}  // namespace

arrow::Result<RowSet> DigestRows(const arrow::Table& table,
                                 const std::vector<std::string>& key,
                                 const std::vector<std::string>& columns) {
  const auto n = static_cast<size_t>(table.num_rows());
  std::vector<uint64_t> row_hash;
  std::vector<std::string> key_text;
  ARROW_RETURN_NOT_OK(HashRows(
      [&](const std::string& name) -> arrow::Result<std::shared_ptr<arrow::Array>> {
        auto chunked = table.GetColumnByName(name);
        if (chunked == nullptr) return NoColumn(name);
        return Flatten(*chunked);
      },
      n, key, columns, &row_hash, &key_text, nullptr));
  RowSet out;
  out.digest.rows = static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i) {
    out.digest.checksum += row_hash[i];
    out.by_key[std::move(key_text[i])].push_back(row_hash[i]);
  }
  for (auto& [k, hashes] : out.by_key) std::sort(hashes.begin(), hashes.end());
  return out;
}

std::vector<KeyDifference> CompareRowSets(const RowSet& actual, const RowSet& expected,
                                          const std::string& actual_name,
                                          const std::string& expected_name, size_t limit,
                                          int64_t* total) {
  std::vector<KeyDifference> out;
  *total = 0;
  auto report = [&](const std::string& key, std::string what) {
    ++*total;
    if (out.size() < limit) out.push_back({key, std::move(what)});
  };
  auto a = actual.by_key.begin();
  auto e = expected.by_key.begin();
  while (a != actual.by_key.end() || e != expected.by_key.end()) {
    if (e == expected.by_key.end() || (a != actual.by_key.end() && a->first < e->first)) {
      report(a->first, "in " + actual_name + ", not in " + expected_name +
                           (a->second.size() > 1
                                ? " (" + std::to_string(a->second.size()) + " rows)"
                                : ""));
      ++a;
    } else if (a == actual.by_key.end() || e->first < a->first) {
      report(e->first, "in " + expected_name + ", missing from " + actual_name);
      ++e;
    } else {
      if (a->second.size() != e->second.size()) {
        report(a->first, std::to_string(a->second.size()) + " rows in " + actual_name +
                             ", " + std::to_string(e->second.size()) + " in " +
                             expected_name);
      } else if (a->second != e->second) {
        report(a->first,
               "values differ between " + actual_name + " and " + expected_name);
      }
      ++a;
      ++e;
    }
  }
  return out;
}

RowDigests::RowDigests(std::vector<std::string> key, std::vector<std::string> columns,
                       Options options)
    : key_(std::move(key)), columns_(std::move(columns)), options_(std::move(options)) {
  options_.partitions = std::max(1, options_.partitions);
  column_digests_.resize(columns_.size());
  keys_.resize(options_.partitions);
  hashes_.resize(options_.partitions);
}

RowDigests::~RowDigests() = default;

arrow::Status RowDigests::Add(const arrow::RecordBatch& rows) {
  const auto n = static_cast<size_t>(rows.num_rows());
  std::vector<uint64_t> row_hash;
  std::vector<std::string> key_text;
  ARROW_RETURN_NOT_OK(HashRows(
      [&](const std::string& name) -> arrow::Result<std::shared_ptr<arrow::Array>> {
        auto column = rows.GetColumnByName(name);
        if (column == nullptr) return NoColumn(name);
        return column;
      },
      n, key_, columns_, &row_hash, &key_text, &column_digests_));
  digest_.rows += static_cast<int64_t>(n);
  for (size_t i = 0; i < n; ++i) {
    digest_.checksum += row_hash[i];
    const int32_t p = PartitionOf(key_text[i], options_.partitions);
    // A string's own bytes, its heap copy and the hash.
    held_bytes_ += static_cast<int64_t>(sizeof(std::string) + key_text[i].size() + 8);
    keys_[p].push_back(std::move(key_text[i]));
    hashes_[p].push_back(row_hash[i]);
  }
  if (held_bytes_ > options_.memory_bytes) return SpillHeld();
  return arrow::Status::OK();
}

arrow::Status RowDigests::SpillHeld() {
  if (spill_ == nullptr) {
    auto schema = arrow::schema(
        {arrow::field("key", arrow::utf8()), arrow::field("hash", arrow::uint64())});
    ARROW_ASSIGN_OR_RAISE(
        spill_, PartitionSpill::Make(
                    options_.spill_dir, options_.partitions, schema,
                    {"a Silver verification larger than silver.memory_limit",
                     "about the key columns' and 8 bytes' size of each table's rows"}));
  }
  for (int32_t p = 0; p < options_.partitions; ++p) {
    if (keys_[p].empty()) continue;
    arrow::StringBuilder keys;
    arrow::UInt64Builder hashes;
    ARROW_RETURN_NOT_OK(keys.AppendValues(keys_[p]));
    ARROW_RETURN_NOT_OK(hashes.AppendValues(hashes_[p]));
    ARROW_ASSIGN_OR_RAISE(auto k, keys.Finish());
    ARROW_ASSIGN_OR_RAISE(auto h, hashes.Finish());
    const auto length = k->length();
    ARROW_RETURN_NOT_OK(
        spill_->Write(p, arrow::RecordBatch::Make(spill_->schema(), length, {k, h})));
    std::vector<std::string>().swap(keys_[p]);
    std::vector<uint64_t>().swap(hashes_[p]);
  }
  held_bytes_ = 0;
  return arrow::Status::OK();
}

arrow::Result<RowSet> RowDigests::Partition(int32_t p) const {
  RowSet out;
  if (spill_ != nullptr) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    ARROW_RETURN_NOT_OK(spill_->ReadInto(p, &batches));
    for (const auto& batch : batches) {
      const auto& keys = static_cast<const arrow::StringArray&>(*batch->column(0));
      const auto& hashes = static_cast<const arrow::UInt64Array&>(*batch->column(1));
      for (int64_t i = 0; i < batch->num_rows(); ++i) {
        out.by_key[std::string(keys.GetView(i))].push_back(hashes.Value(i));
      }
    }
  }
  for (size_t i = 0; i < keys_[p].size(); ++i) {
    out.by_key[keys_[p][i]].push_back(hashes_[p][i]);
  }
  for (auto& [k, hashes] : out.by_key) {
    std::sort(hashes.begin(), hashes.end());
    out.digest.rows += static_cast<int64_t>(hashes.size());
    for (uint64_t h : hashes) out.digest.checksum += h;
  }
  return out;
}

arrow::Result<std::vector<KeyDifference>> CompareDigests(const RowDigests& actual,
                                                         const RowDigests& expected,
                                                         const std::string& actual_name,
                                                         const std::string& expected_name,
                                                         size_t limit, int64_t* total) {
  if (actual.partitions() != expected.partitions()) {
    return arrow::Status::Invalid("digests of ", actual.partitions(), " and ",
                                  expected.partitions(),
                                  " partitions cannot be compared");
  }
  *total = 0;
  std::vector<KeyDifference> out;
  for (int32_t p = 0; p < actual.partitions(); ++p) {
    int64_t differing = 0;
    std::vector<KeyDifference> found;
    {
      ARROW_ASSIGN_OR_RAISE(RowSet a, actual.Partition(p));
      ARROW_ASSIGN_OR_RAISE(RowSet e, expected.Partition(p));
      found = CompareRowSets(a, e, actual_name, expected_name, limit, &differing);
    }
    *total += differing;
    // The first `limit` keys of all partitions, in key order.
    out.insert(out.end(), std::make_move_iterator(found.begin()),
               std::make_move_iterator(found.end()));
    std::sort(out.begin(), out.end(), [](const KeyDifference& x, const KeyDifference& y) {
      return x.key < y.key;
    });
    if (out.size() > limit) out.resize(limit);
  }
  return out;
}

std::vector<std::string> DifferingColumns(const RowDigests& a, const RowDigests& b) {
  std::vector<std::string> out;
  for (size_t c = 0; c < a.columns().size(); ++c) {
    for (size_t d = 0; d < b.columns().size(); ++d) {
      if (a.columns()[c] == b.columns()[d] &&
          !(a.column_digests()[c] == b.column_digests()[d])) {
        out.push_back(a.columns()[c]);
      }
    }
  }
  return out;
}

int32_t DigestPartitions(int64_t rows, int64_t memory) {
  // A key in a partition's RowSet: its map node, text (about 32 bytes) and hash.
  constexpr int64_t kBytesPerKey = 160;
  const int64_t wanted = 2 * rows * kBytesPerKey / std::max<int64_t>(1, memory);
  int32_t partitions = 1;
  while (partitions < wanted && partitions < 4096) partitions *= 2;
  return partitions;
}

}  // namespace floe::silver
