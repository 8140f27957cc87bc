#include "floe/silver/verify.h"
#include "floe/lake/catalog.h"
#include "floe/lake/keys.h"
#include "floe/lake/metadata.h"
#include "floe/silver/silver.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/compute/api.h>
#include <arrow/compute/initialize.h>
#include <nlohmann/json.hpp>

#include "floe/common/lsn.h"
#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/silver/fold.h"
#include "floe/silver/merge.h"
#include "floe/source/postgres/pg_connection.h"
#include "floe/source/postgres/table_description.h"
#include "floe/source/postgres/type_mapping.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace cp = arrow::compute;
namespace pg = floe::postgres;
using json = nlohmann::json;

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

arrow::Status EnsureCompute() {
  static std::once_flag once;
  static arrow::Status status;
  std::call_once(once, [] { status = cp::Initialize(); });
  return status;
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

std::string LsnText(uint64_t lsn) { return Lsn(lsn).ToString(); }

std::string KeysDiffer(int64_t n) {
  return std::to_string(n) + (n == 1 ? " key differs:" : " keys differ:");
}

std::string DigestText(const RowDigest& d) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(d.checksum));
  return std::to_string(d.rows) + " rows, checksum " + hex;
}

// `column` cast to `type` when it differs and the cast works; else as it is (values
// are compared by canonical text, so e.g. int16 and int32 agree anyway).
std::shared_ptr<arrow::Array> CastIfPossible(
    std::shared_ptr<arrow::Array> column, const std::shared_ptr<arrow::DataType>& type) {
  if (column->type()->Equals(*type)) return column;
  auto cast = cp::Cast(column, type);
  if (!cast.ok()) return column;
  return cast->make_array();
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
    case arrow::Type::FIXED_SIZE_BINARY:
      out->append(Hex(static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(i)));
      return arrow::Status::OK();
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

arrow::Result<RowSet> DigestRows(const arrow::Table& table,
                                 const std::vector<std::string>& key,
                                 const std::vector<std::string>& columns) {
  const auto n = static_cast<size_t>(table.num_rows());
  std::vector<uint64_t> row_hash(n, kFnvOffset);
  std::vector<std::string> key_text(n);
  auto column_of =
      [&](const std::string& name) -> arrow::Result<std::shared_ptr<arrow::Array>> {
    auto chunked = table.GetColumnByName(name);
    if (chunked == nullptr) {
      return arrow::Status::Invalid("no column `", name, "` to compare");
    }
    return Flatten(*chunked);
  };
  for (size_t c = 0; c < columns.size(); ++c) {
    ARROW_ASSIGN_OR_RAISE(auto array, column_of(columns[c]));
    ARROW_ASSIGN_OR_RAISE(auto hashes, CanonicalValueHashes(*array));
    for (size_t i = 0; i < n; ++i) {
      row_hash[i] = Mix(row_hash[i] ^ (hashes[i] + c * 0x9e3779b97f4a7c15ull));
    }
  }
  for (const auto& k : key) {
    ARROW_ASSIGN_OR_RAISE(auto array, column_of(k));
    std::vector<std::string> texts;
    ARROW_RETURN_NOT_OK(CanonicalValueHashes(*array, &texts).status());
    for (size_t i = 0; i < n; ++i) {
      if (!key_text[i].empty()) key_text[i] += ", ";
      key_text[i] += k + "=" + texts[i];
    }
  }
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

arrow::Result<std::vector<std::string>> DifferingColumns(
    const arrow::Table& a, const arrow::Table& b,
    const std::vector<std::string>& columns) {
  std::vector<std::string> out;
  for (const auto& c : columns) {
    ARROW_ASSIGN_OR_RAISE(RowSet da, DigestRows(a, {}, {c}));
    ARROW_ASSIGN_OR_RAISE(RowSet db, DigestRows(b, {}, {c}));
    if (!(da.digest == db.digest)) out.push_back(c);
  }
  return out;
}

SourceReader PostgresSourceReader(std::string conninfo, std::string publication) {
  return [conninfo = std::move(conninfo), publication = std::move(publication)](
             const config::QualifiedName& table) -> arrow::Result<SourceRows> {
    ARROW_ASSIGN_OR_RAISE(auto conn, pg::PgConnection::Connect(conninfo));
    ARROW_RETURN_NOT_OK(
        conn->Query("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY").status());
    // The first statement takes the snapshot; the LSN is read inside it.
    ARROW_ASSIGN_OR_RAISE(auto lsn_rows,
                          conn->Query("SELECT pg_current_wal_lsn()::text"));
    ARROW_ASSIGN_OR_RAISE(std::string schema_q, conn->QuoteIdentifier(table.schema));
    ARROW_ASSIGN_OR_RAISE(std::string table_q, conn->QuoteIdentifier(table.table));
    // The columns floe replicates, as every path describes them (no generated
    // columns: Silver has none).
    ARROW_ASSIGN_OR_RAISE(auto described,
                          pg::DescribeTable(*conn, table.schema, table.table,
                                            publication));
    if (!described || described->Replicated().empty()) {
      return arrow::Status::KeyError("source table ", table.ToString(),
                                     " does not exist (or has no columns)");
    }
    pg::PgTypeResolver types(conn.get());
    std::vector<pg::ColumnConverter> converters;
    std::string select;
    for (const pg::DescribedColumn& c : described->Replicated()) {
      ARROW_ASSIGN_OR_RAISE(pg::PgTypeInfo type,
                            types.Resolve(c.type_oid, c.type_modifier));
      converters.emplace_back(c.name, pg::MapType(type));
      ARROW_ASSIGN_OR_RAISE(std::string q, conn->QuoteIdentifier(c.name));
      select += (select.empty() ? "" : ", ") + q;
    }
    ARROW_ASSIGN_OR_RAISE(
        auto rows,
        conn->Query("SELECT " + select + " FROM " + schema_q + "." + table_q +
                    (described->row_filter.empty()
                         ? ""
                         : " WHERE (" + described->row_filter + ")")));
    ARROW_RETURN_NOT_OK(conn->Query("COMMIT").status());
    arrow::FieldVector fields;
    arrow::ArrayVector arrays;
    std::vector<pg::ConversionIssue> issues;
    for (size_t c = 0; c < converters.size(); ++c) {
      ARROW_ASSIGN_OR_RAISE(auto builder, converters[c].MakeBuilder());
      for (const auto& row : rows) {
        if (row[c]) {
          ARROW_RETURN_NOT_OK(converters[c].Append(*row[c], builder.get(), &issues));
        } else {
          ARROW_RETURN_NOT_OK(converters[c].AppendNull(builder.get()));
        }
      }
      std::shared_ptr<arrow::Array> array;
      ARROW_RETURN_NOT_OK(builder->Finish(&array));
      fields.push_back(arrow::field(converters[c].column_name(), array->type()));
      arrays.push_back(std::move(array));
    }
    SourceRows out;
    out.rows = arrow::Table::Make(arrow::schema(fields), arrays,
                                  static_cast<int64_t>(rows.size()));
    if (!lsn_rows.empty() && lsn_rows[0][0]) {
      ARROW_ASSIGN_OR_RAISE(Lsn lsn, Lsn::Parse(*lsn_rows[0][0]));
      out.lsn = lsn.value();
    }
    return out;
  };
}

namespace {

// The Bronze history up to the watermark, its columns renamed to Silver's names
// (through the field-id map, so a rename not merged yet still lines up); the key
// columns' indexes in key order in `ordered_key_out`, their Silver names in v->key.
arrow::Result<Changes> SilverHistory(const ice::TableMetadata& bronze,
                                     const ice::TableMetadata& silver, ice::FileIO& io,
                                     const std::vector<std::string>& key,
                                     std::vector<int>* ordered_key_out,
                                     TableVerification* v) {
  const ice::Schema& silver_schema = *silver.CurrentSchema();
  const ice::Schema& bronze_schema = *bronze.CurrentSchema();
  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> history,
                        ReadBronze(bronze, io, 0, v->watermark));
  std::vector<std::string> bronze_names;
  for (const auto& f : history->schema()->fields()) {
    if (!IsCdcColumn(f->name())) bronze_names.push_back(f->name());
  }
  ARROW_ASSIGN_OR_RAISE(Changes changes, ChangesFromTable(*history, bronze_names));
  const std::map<int32_t, int32_t> ids = FieldMapOf(silver, bronze_schema);
  // The key names source columns; a Bronze field may be named otherwise (a name
  // Iceberg cannot hold as it is, a `__<type>` suffix after a type change).
  ARROW_ASSIGN_OR_RAISE(std::vector<RowColumn> row_columns, RowColumnsOf(bronze));
  std::vector<std::string> key_fields;
  for (const auto& k : key) {
    auto rc = std::find_if(row_columns.begin(), row_columns.end(),
                           [&](const RowColumn& c) { return c.name == k; });
    key_fields.push_back(
        rc != row_columns.end() && rc->bronze != nullptr ? rc->bronze->name : k);
  }
  std::vector<int> key_columns;
  for (size_t c = 0; c < changes.names.size(); ++c) {
    const ice::NestedField* bf = bronze_schema.FindField(changes.names[c]);
    const ice::NestedField* sf = nullptr;
    if (bf != nullptr) {
      auto it = ids.find(bf->id);
      if (it != ids.end()) sf = silver_schema.FindField(it->second);
    }
    const std::string bronze_name = changes.names[c];
    // A column Silver does not have yet is left out of the upserts under a name
    // no Silver field has.
    changes.names[c] = sf != nullptr ? sf->name : "\x01" + bronze_name;
    // cdc_unchanged names source columns as they were named when the row was
    // written: the column's former names with their positions, as the merge folds
    // them, and its source name where Silver's differs.
    std::vector<std::string> former;
    std::vector<std::pair<int64_t, int32_t>> through;
    if (bf != nullptr) {
      auto rc = std::find_if(row_columns.begin(), row_columns.end(),
                             [&](const RowColumn& r) { return r.bronze == bf; });
      if (rc != row_columns.end()) {
        former = rc->former_names;
        through = rc->former_through;
        through.resize(former.size(), {0, 0});
        if (rc->name != changes.names[c]) {
          former.push_back(rc->name);
          through.push_back({0, 0});
        }
      }
    }
    changes.former_names.push_back(std::move(former));
    changes.former_through.push_back(std::move(through));
    if (std::find(key_fields.begin(), key_fields.end(), bronze_name) !=
        key_fields.end()) {
      key_columns.push_back(static_cast<int>(c));
    }
  }
  if (key_columns.size() != key.size()) {
    return arrow::Status::Invalid("merge key of ", v->bronze,
                                  " is not among its columns");
  }
  // Key columns in key order.
  std::vector<int> ordered_key;
  for (const auto& k : key_fields) {
    for (int c : key_columns) {
      if (bronze_names[c] == k) ordered_key.push_back(c);
    }
  }
  for (int c : ordered_key) v->key.push_back(changes.names[c]);
  *ordered_key_out = std::move(ordered_key);
  return changes;
}

// Silver against the live source table (read by `source`) over the columns the source
// still has; a difference with changes above the watermark in Bronze (read again) is
// the source having moved on.
arrow::Status CompareWithSource(ice::Catalog* catalog, std::shared_ptr<ice::FileIO> io,
                                const ice::TableIdentifier& bronze_id,
                                const config::QualifiedName& source_name,
                                const SourceReader& source,
                                const VerifyTableOptions& options,
                                const std::shared_ptr<arrow::Table>& actual,
                                const std::shared_ptr<arrow::Schema>& silver_arrow,
                                TableVerification* v) {
  auto read = source(source_name);
  if (!read.ok()) {
    v->source_note = "not compared: " + read.status().message();
    return arrow::Status::OK();
  }
  v->source_lsn = read->lsn;
  const arrow::Table& live = *read->rows;
  arrow::FieldVector fields;
  arrow::ArrayVector arrays;
  std::vector<std::string> missing;
  for (const auto& name : v->columns) {
    auto column = live.GetColumnByName(name);
    if (column == nullptr) {
      missing.push_back(name);
      continue;
    }
    ARROW_ASSIGN_OR_RAISE(auto array, Flatten(*column));
    array = CastIfPossible(array, silver_arrow->GetFieldByName(name)->type());
    fields.push_back(arrow::field(name, array->type()));
    arrays.push_back(array);
    v->source_columns.push_back(name);
  }
  for (const auto& k : v->key) {
    if (std::find(missing.begin(), missing.end(), k) != missing.end()) {
      v->source_note = "not compared: the source table has no key column `" + k + "`";
      return arrow::Status::OK();
    }
  }
  auto live_table = arrow::Table::Make(arrow::schema(fields), arrays, live.num_rows());
  ARROW_ASSIGN_OR_RAISE(RowSet silver_set,
                        DigestRows(*actual, v->key, v->source_columns));
  ARROW_ASSIGN_OR_RAISE(RowSet live_set,
                        DigestRows(*live_table, v->key, v->source_columns));
  v->silver_source_digest = silver_set.digest;
  v->source_digest = live_set.digest;
  v->source_differences = CompareRowSets(silver_set, live_set, "Silver", "the source",
                                         options.max_keys, &v->source_differences_total);
  if (!missing.empty()) {
    std::string names;
    for (const auto& m : missing) names += (names.empty() ? "" : ", ") + m;
    v->source_note = "Silver columns the source no longer has, not compared: " + names;
  }
  if (v->source_differences_total == 0 && v->silver_source_digest == v->source_digest) {
    v->source = SourceCheck::kMatches;
    return arrow::Status::OK();
  }
  if (v->silver_source_digest.rows == v->source_digest.rows) {
    ARROW_ASSIGN_OR_RAISE(v->source_differing_columns,
                          DifferingColumns(*actual, *live_table, v->source_columns));
  }
  // Bronze read again after the source: changes above the watermark explain a
  // difference (the source moved on; Silver catches up on its next merge).
  ARROW_ASSIGN_OR_RAISE(auto bronze_now, ice::Table::Load(catalog, io, bronze_id));
  v->bronze_lsn = lake::CommittedLsnOf(bronze_now->metadata()).value();
  v->source =
      v->bronze_lsn > v->watermark ? SourceCheck::kMovedOn : SourceCheck::kDiffers;
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<TableVerification> VerifyTable(ice::Catalog* catalog,
                                             std::shared_ptr<ice::FileIO> io,
                                             const ice::TableIdentifier& bronze_id,
                                             const ice::TableIdentifier& silver_id,
                                             const config::QualifiedName& source_name,
                                             const SourceReader* source,
                                             const VerifyTableOptions& options) {
  ARROW_RETURN_NOT_OK(EnsureCompute());
  TableVerification v;
  v.table = source_name.ToString();
  v.bronze = bronze_id.ToString();
  v.silver = silver_id.ToString();
  ARROW_ASSIGN_OR_RAISE(auto bronze_table, ice::Table::Load(catalog, io, bronze_id));
  const ice::TableMetadata bronze = bronze_table->metadata();
  v.bronze_lsn = lake::CommittedLsnOf(bronze).value();
  ARROW_ASSIGN_OR_RAISE(std::vector<std::string> key, MergeKeyOf(bronze, options.key));
  if (key.empty()) {
    v.skipped = "no merge key, so no Silver table";
    return v;
  }
  auto loaded = ice::Table::Load(catalog, io, silver_id);
  if (!loaded.ok()) {
    if (ice::GetCatalogErrorKind(loaded.status()) ==
        ice::CatalogErrorKind::kNoSuchTable) {
      // A key no merge can use: the table is never built, and saying so is the
      // verification's result.
      ARROW_RETURN_NOT_OK(CheckMergeKey(bronze, key, bronze_id));
      v.skipped = "no Silver table yet (the next `floe silver` pass builds it)";
      return v;
    }
    return loaded.status();
  }
  const ice::TableMetadata silver = (*loaded)->metadata();
  if (!silver.current_snapshot_id) {
    v.skipped =
        "the Silver table has no snapshot yet (the next `floe silver` pass "
        "fills it)";
    return v;
  }
  v.watermark = SilverWatermark(silver);
  const ice::Schema& silver_schema = *silver.CurrentSchema();
  for (const auto& f : silver_schema.fields()) {
    if (f.name != kCdcCommitLsn) v.columns.push_back(f.name);
  }

  // The Bronze history up to the watermark, in Silver's names.
  std::vector<int> ordered_key;
  ARROW_ASSIGN_OR_RAISE(Changes changes,
                        SilverHistory(bronze, silver, *io, key, &ordered_key, &v));
  ARROW_ASSIGN_OR_RAISE(FoldResult fold, Fold(changes, ordered_key, false));
  ARROW_ASSIGN_OR_RAISE(auto silver_arrow, ice::ToArrowSchema(silver_schema));
  ARROW_ASSIGN_OR_RAISE(auto expected_batch,
                        BuildUpserts(changes, fold, nullptr, silver_arrow));
  ARROW_ASSIGN_OR_RAISE(auto expected, arrow::Table::FromRecordBatches({expected_batch}));

  ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Table> actual,
                        ice::ScanToArrow(silver, *io, {}));
  ARROW_ASSIGN_OR_RAISE(RowSet actual_set, DigestRows(*actual, v.key, v.columns));
  ARROW_ASSIGN_OR_RAISE(RowSet expected_set, DigestRows(*expected, v.key, v.columns));
  v.silver_digest = actual_set.digest;
  v.fold_digest = expected_set.digest;
  v.fold_differences =
      CompareRowSets(actual_set, expected_set, "Silver", "the fold of Bronze",
                     options.max_keys, &v.fold_differences_total);
  if (v.silver_differs_from_bronze() && v.silver_digest.rows == v.fold_digest.rows) {
    ARROW_ASSIGN_OR_RAISE(v.fold_differing_columns,
                          DifferingColumns(*actual, *expected, v.columns));
  }

  if (source == nullptr) return v;
  ARROW_RETURN_NOT_OK(CompareWithSource(catalog, io, bronze_id, source_name, *source,
                                        options, actual, silver_arrow, &v));
  return v;
}

std::string FormatVerification(const TableVerification& v) {
  std::string out = v.table + " (" + v.silver + ")";
  if (!v.error.empty()) return out + ": could not be verified: " + v.error;
  if (!v.skipped.empty()) return out + ": skipped: " + v.skipped;
  out += ": watermark " + LsnText(v.watermark) + ", Bronze at " + LsnText(v.bronze_lsn);
  auto keys = [&](const std::vector<KeyDifference>& diffs, int64_t total,
                  const std::vector<std::string>& columns) {
    std::string text;
    if (!columns.empty()) {
      text += "\n    columns with differences: ";
      for (size_t i = 0; i < columns.size(); ++i) text += (i ? ", " : "") + columns[i];
    }
    for (const auto& d : diffs) text += "\n    " + d.key + ": " + d.what;
    if (total > static_cast<int64_t>(diffs.size())) {
      text += "\n    ... and " +
              std::to_string(total - static_cast<int64_t>(diffs.size())) + " more keys";
    }
    return text;
  };
  if (v.silver_differs_from_bronze()) {
    out += "\n  Silver vs fold(Bronze <= watermark): DIFFERENT (Silver " +
           DigestText(v.silver_digest) + "; fold " + DigestText(v.fold_digest) + "), " +
           KeysDiffer(v.fold_differences_total) +
           keys(v.fold_differences, v.fold_differences_total, v.fold_differing_columns);
  } else {
    out += "\n  Silver vs fold(Bronze <= watermark): OK (" + DigestText(v.silver_digest) +
           ")";
  }
  const std::string at = " (source read at " + LsnText(v.source_lsn) + ")";
  switch (v.source) {
    case SourceCheck::kNotCompared:
      if (!v.source_note.empty()) out += "\n  Silver vs source: " + v.source_note;
      return out;
    case SourceCheck::kMatches:
      out += "\n  Silver vs source: OK" + at + " (" + DigestText(v.source_digest) + ")";
      break;
    case SourceCheck::kMovedOn:
    case SourceCheck::kDiffers:
      out += std::string("\n  Silver vs source: ") +
             (v.source == SourceCheck::kMovedOn
                  ? "source moved on since watermark " + LsnText(v.watermark) +
                        " (Bronze holds changes up to " + LsnText(v.bronze_lsn) +
                        "; the next merge applies them)"
                  : "DIFFERENT although Bronze has nothing newer than watermark " +
                        LsnText(v.watermark) +
                        " (is floe run behind or stopped? otherwise Bronze missed "
                        "changes)") +
             at + ": Silver " + DigestText(v.silver_source_digest) + "; source " +
             DigestText(v.source_digest) + "; " + KeysDiffer(v.source_differences_total) +
             keys(v.source_differences, v.source_differences_total,
                  v.source_differing_columns);
      break;
  }
  if (!v.source_note.empty()) out += "\n  " + v.source_note;
  return out;
}

TableNames NamesOf(const config::PipelineConfig& config,
                   const config::QualifiedName& table) {
  TableNames out;
  out.bronze = ice::IdentifierFromLevels(config.BronzeIdentifier(table));
  out.silver = ice::IdentifierFromLevels(config.SilverIdentifier(table));
  if (auto it = config.silver.keys.find(table); it != config.silver.keys.end()) {
    out.key = it->second;
  }
  return out;
}

arrow::Result<std::vector<TableVerification>> VerifySilver(
    const config::PipelineConfig& config, const VerifyOptions& options) {
  ARROW_ASSIGN_OR_RAISE(auto catalog, lake::OpenPipelineCatalog(config));
  std::shared_ptr<ice::FileIO> io = ice::MakeLocalFileIO();
  // The source tables to verify: the one asked for, or every Bronze changelog of the
  // service (as `floe silver` lists them).
  std::set<config::QualifiedName> tables;
  if (options.table) {
    const TableNames names = NamesOf(config, *options.table);
    ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(names.bronze));
    if (!exists) {
      return arrow::Status::KeyError(
          "no Bronze table ", names.bronze.ToString(), " for ", options.table->ToString(),
          "; is the table published and has `floe run` copied it?");
    }
    tables.insert(*options.table);
  } else {
    std::set<ice::TableIdentifier> bronze_ids;
    const ice::Namespace root = {config.naming.bronze_namespace, config.service};
    ARROW_ASSIGN_OR_RAISE(bool root_exists, catalog->NamespaceExists(root));
    if (root_exists) {
      ARROW_ASSIGN_OR_RAISE(auto schemas, catalog->ListNamespaces(root));
      for (const auto& ns : schemas) {
        ARROW_ASSIGN_OR_RAISE(auto listed, catalog->ListTables(ns));
        bronze_ids.insert(listed.begin(), listed.end());
      }
    }
    for (const auto& [name, naming] : config.naming.tables) {
      if (naming.bronze.empty()) continue;
      auto id = ice::IdentifierFromLevels(config.BronzeIdentifier(name));
      ARROW_ASSIGN_OR_RAISE(bool exists, catalog->TableExists(id));
      if (exists) bronze_ids.insert(id);
    }
    for (const auto& id : bronze_ids) {
      ARROW_ASSIGN_OR_RAISE(auto table, ice::Table::Load(catalog.get(), io, id));
      const auto& props = table->metadata().properties;
      // Which source table this Bronze table follows. floe.source.table is
      // `schema.table` unquoted, ambiguous when a name holds a dot: a table named
      // in naming.tables is known by its entry, one named by default by its
      // identifier (bronze.<service>.<schema>.<table>); only otherwise is the
      // property parsed.
      std::optional<config::QualifiedName> source;
      for (const auto& [name, naming] : config.naming.tables) {
        if (ice::IdentifierFromLevels(config.BronzeIdentifier(name)) == id) source = name;
      }
      auto property = props.find(lake::kSourceTableProperty);
      if (!source && !id.ns.empty() &&
          (property == props.end() || property->second == id.ns.back() + "." + id.name)) {
        source = config::QualifiedName{id.ns.back(), id.name};
      }
      if (!source && property != props.end()) {
        source = config::ParseQualifiedName(property->second);
      }
      if (source) tables.insert(*source);
    }
  }
  const SourceReader reader =
      PostgresSourceReader(config.source.conninfo, config.source.publication);
  std::vector<TableVerification> out;
  for (const auto& table : tables) {
    const TableNames names = NamesOf(config, table);
    VerifyTableOptions table_options;
    table_options.key = names.key;
    table_options.max_keys = options.max_keys;
    auto verified =
        VerifyTable(catalog.get(), io, names.bronze, names.silver, table,
                    options.compare_source ? &reader : nullptr, table_options);
    if (verified.ok()) {
      out.push_back(std::move(*verified));
    } else {
      TableVerification failed;
      failed.table = table.ToString();
      failed.bronze = names.bronze.ToString();
      failed.silver = names.silver.ToString();
      failed.error = verified.status().ToString();
      out.push_back(std::move(failed));
    }
  }
  return out;
}

}  // namespace floe::silver
