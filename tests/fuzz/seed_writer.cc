// Writes the seeds of the fuzz targets that floe's own writers produce, into
// OUT_DIR/<target>/ (tests/fuzz/make_corpus.py runs it; see tests/fuzz/README.md):
//   manifest/        manifests, manifest lists and their headers written by floe's
//                    Table (appends, unpartitioned and partitioned) and WriteManifest
//                    (a partition field of every primitive type, a delete manifest),
//                    each behind manifest_fuzz's selector byte;
//   table_metadata/  the tables' *.metadata.json files and a nested schema's JSON;
//   message_json/    watermark contents, backfill progress and column bindings as
//                    Watermark::ToContent, BackfillProgress::ToJson, ColumnMap::ToJson
//                    write them.
// Usage: seed_writer OUT_DIR
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <nlohmann/json.hpp>

#include "floe/bronze/bronze_schema.h"
#include "floe/bronze/watermark_backfill.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/manifest.h"
#include "floe/iceberg/partition_spec.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/sort_order.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_metadata.h"

namespace fs = std::filesystem;
namespace ice = floe::iceberg;
namespace bronze = floe::bronze;
using ice::NestedField;
using ice::Type;

namespace {

template <typename T>
T Check(arrow::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::cerr << "seed_writer: " << what << ": " << r.status().ToString() << "\n";
    std::exit(1);
  }
  return std::move(r).MoveValueUnsafe();
}

void Check(const arrow::Status& st, const char* what) {
  if (!st.ok()) {
    std::cerr << "seed_writer: " << what << ": " << st.ToString() << "\n";
    std::exit(1);
  }
}

void Write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::cerr << "seed_writer: cannot write " << path << "\n";
    std::exit(1);
  }
}

std::string Slurp(ice::FileIO& io, const std::string& location) {
  return Check(io.ReadAll(location), "read back");
}

// Creates `name` with `spec`, appends two data files per partition in `partitions`
// (one commit per file), and copies its metadata files into the corpus.
void TableSeeds(ice::Catalog* catalog, const std::shared_ptr<ice::FileIO>& io,
                const fs::path& work, const fs::path& out, const std::string& name,
                const ice::PartitionSpec& spec, uint8_t manifest_selector,
                const std::vector<ice::PartitionTuple>& partitions) {
  auto schema =
      Check(ice::Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                  NestedField::Optional(2, "name", Type::String()),
                                  NestedField::Optional(3, "ts", Type::TimestampTz())}),
            "schema");
  auto table = Check(ice::Table::Create(catalog, io, {{"db"}, name}, schema, spec,
                                        ice::SortOrder::Unsorted(),
                                        "file://" + (work / "wh" / name).string()),
                     "create table");
  auto arrow_schema = Check(ice::ToArrowSchema(table->schema()), "arrow schema");
  int64_t next_id = 0;
  for (const ice::PartitionTuple& partition : partitions) {
    for (int file = 0; file < 2; ++file) {
      arrow::Int64Builder ids;
      arrow::StringBuilder names;
      arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                                 arrow::default_memory_pool());
      for (int i = 0; i < 3; ++i, ++next_id) {
        Check(ids.Append(next_id), "append");
        Check(names.Append("n" + std::to_string(next_id % 2)), "append");
        Check(ts.Append(1'700'000'000'000'000 + next_id * 1'000'000), "append");
      }
      auto batch = arrow::RecordBatch::Make(
          arrow_schema, 3,
          {Check(ids.Finish(), "finish"), Check(names.Finish(), "finish"),
           Check(ts.Finish(), "finish")});
      ice::DataFile f = Check(table->WriteDataFile({batch}, partition), "write data");
      Check(table->AppendFiles({f}, {{"floe.commit-lsn", std::to_string(next_id)}}),
            "append files");
    }
  }
  const ice::TableMetadata& m = table->metadata();
  Write(out / "table_metadata" / (name + "_current.metadata.json"),
        Slurp(*io, table->metadata_location()));
  for (size_t i = 0; i < m.metadata_log.size(); ++i) {
    Write(out / "table_metadata" / (name + "_v" + std::to_string(i) + ".metadata.json"),
          Slurp(*io, m.metadata_log[i].metadata_file));
  }
  const ice::Snapshot* current = m.CurrentSnapshot();
  const std::string list = Slurp(*io, current->manifest_list);
  Write(out / "manifest" / (name + "_list"), std::string(1, '\x01') + list);
  Write(out / "manifest" / (name + "_list_header"), std::string(1, '\x02') + list);
  auto manifests = Check(ice::ReadManifestList(*io, current->manifest_list), "list");
  for (size_t i = 0; i < manifests.size() && i < 2; ++i) {
    Write(out / "manifest" / (name + "_manifest" + std::to_string(i)),
          std::string(1, static_cast<char>(manifest_selector)) +
              Slurp(*io, manifests[i].manifest_path));
  }
}

// A manifest with a partition field of every primitive type (manifest_fuzz's
// partition type 3), and a position-delete manifest.
void WriterSeeds(ice::FileIO& io, const fs::path& work, const fs::path& out) {
  const ice::TypePtr partition_type = Type::Struct({
      NestedField::Optional(1000, "b", Type::Boolean()),
      NestedField::Optional(1001, "i", Type::Int()),
      NestedField::Optional(1002, "l", Type::Long()),
      NestedField::Optional(1003, "f", Type::Float()),
      NestedField::Optional(1004, "d", Type::Double()),
      NestedField::Optional(1005, "dec", Type::Decimal(9, 2)),
      NestedField::Optional(1006, "dt", Type::Date()),
      NestedField::Optional(1007, "t", Type::Time()),
      NestedField::Optional(1008, "ts", Type::Timestamp()),
      NestedField::Optional(1009, "tstz", Type::TimestampTz()),
      NestedField::Optional(1010, "s", Type::String()),
      NestedField::Optional(1011, "u", Type::Uuid()),
      NestedField::Optional(1012, "fx", Type::Fixed(4)),
      NestedField::Optional(1013, "bin", Type::Binary()),
      NestedField::Optional(1014, "dec38", Type::Decimal(38, 10)),
  });
  ice::ManifestEntry e;
  e.status = ice::ManifestEntryStatus::kAdded;
  e.data_file.file_path = "file:///wh/t/data/00000-0.parquet";
  e.data_file.partition = {
      ice::Literal(true),
      ice::Literal(int32_t{-7}),
      ice::Literal(int64_t{1} << 40),
      ice::Literal(1.5f),
      ice::Literal(-2.25),
      ice::Literal(ice::Decimal{12345, 2}),
      ice::Literal(int32_t{19700}),
      ice::Literal(int64_t{3'600'000'000}),
      ice::Literal(int64_t{1'700'000'000'000'000}),
      ice::Literal(int64_t{1'700'000'000'000'001}),
      ice::Literal(std::string("caf\xc3\xa9")),
      ice::Literal(
          Check(ice::Uuid::Parse("0f8fad5b-d9cb-469f-a165-70867728950e"), "uuid")),
      ice::Literal(ice::Bytes{1, 2, 3, 4}),
      ice::Literal(ice::Bytes{0xff, 0x00}),
      ice::Literal(ice::Decimal{-(static_cast<__int128>(1) << 100), 10}),
  };
  e.data_file.record_count = 10;
  e.data_file.file_size_in_bytes = 4096;
  e.data_file.column_sizes = {{1, 100}, {2, 200}};
  e.data_file.value_counts = {{1, 10}, {2, 10}};
  e.data_file.null_value_counts = {{1, 0}, {2, 3}};
  e.data_file.nan_value_counts = {{3, 1}};
  e.data_file.lower_bounds = {{1, std::string("\x01\x00\x00\x00\x00\x00\x00\x00", 8)}};
  e.data_file.upper_bounds = {{1, std::string("\x0a\x00\x00\x00\x00\x00\x00\x00", 8)}};
  e.data_file.split_offsets = {4};
  e.data_file.sort_order_id = 0;
  ice::ManifestEntry nulls = e;
  nulls.status = ice::ManifestEntryStatus::kExisting;
  nulls.snapshot_id = 7;
  nulls.sequence_number = 3;
  nulls.file_sequence_number = 2;
  nulls.data_file.file_path = "file:///wh/t/data/00001-0.parquet";
  for (auto& v : nulls.data_file.partition) v.reset();

  ice::ManifestWriteOptions options;
  options.schema_json = R"({"type":"struct","schema-id":0,"fields":[]})";
  options.partition_spec_json = "[]";
  options.partition_type = partition_type;
  options.snapshot_id = 42;
  for (const char* codec : {"deflate", "null"}) {
    options.codec = codec;
    const std::string location =
        "file://" + (work / (std::string("all_types_") + codec + ".avro")).string();
    Check(ice::WriteManifest(io, location, options, {e, nulls}), "write manifest");
    Write(out / "manifest" / (std::string("all_types_") + codec),
          std::string(1, '\x0c') + Slurp(io, location));
  }

  ice::ManifestEntry del;
  del.data_file.content = ice::DataFileContent::kPositionDeletes;
  del.data_file.file_path = "file:///wh/t/data/00002-deletes.parquet";
  del.data_file.record_count = 2;
  del.data_file.file_size_in_bytes = 512;
  del.data_file.referenced_data_file = "file:///wh/t/data/00000-0.parquet";
  ice::ManifestWriteOptions delete_options;
  delete_options.schema_json = options.schema_json;
  delete_options.content = ice::ManifestContent::kDeletes;
  delete_options.snapshot_id = 43;
  const std::string del_location = "file://" + (work / "deletes.avro").string();
  auto del_manifest =
      Check(ice::WriteManifest(io, del_location, delete_options, {del}), "deletes");
  Write(out / "manifest" / "position_deletes",
        std::string(1, '\x00') + Slurp(io, del_location));
  const std::string list_location = "file://" + (work / "deletes_list.avro").string();
  Check(ice::WriteManifestList(io, list_location, 43, 42, 5, {del_manifest}),
        "delete list");
  Write(out / "manifest" / "position_deletes_list",
        std::string(1, '\x01') + Slurp(io, list_location));
}

void SchemaSeeds(const fs::path& out) {
  auto schema =
      Check(ice::Schema::Make(
                3,
                {NestedField::Required(1, "id", Type::Long()),
                 NestedField::Optional(2, "price", Type::Decimal(10, 2)),
                 NestedField::Optional(
                     3, "location",
                     Type::Struct({NestedField::Optional(4, "lat", Type::Double()),
                                   NestedField::Optional(5, "lon", Type::Double())})),
                 NestedField::Optional(6, "tags", Type::List(7, Type::String(), false)),
                 NestedField::Optional(
                     8, "props", Type::Map(9, Type::String(), 10, Type::Binary(), false)),
                 NestedField::Optional(11, "u", Type::Uuid()),
                 NestedField::Optional(12, "fx", Type::Fixed(16), "a doc")},
                {1}),
            "nested schema");
  Write(out / "table_metadata" / "nested_schema.json", ice::SchemaToJson(schema).dump());
}

void MessageSeeds(const fs::path& out) {
  const fs::path dir = out / "message_json";
  bronze::Watermark low{"public.orders", "7f3c-1", bronze::Watermark::Kind::kLow};
  bronze::Watermark high{"public.orders", "7f3c-1", bronze::Watermark::Kind::kHigh};
  Write(dir / "watermark_low", low.ToContent());
  Write(dir / "watermark_high", high.ToContent());
  bronze::BackfillProgress first;
  first.id = "b-1";
  Write(dir / "backfill_start", first.ToJson());
  bronze::BackfillProgress progress;
  progress.id = "b-2";
  progress.after = {"1041", "eu"};
  progress.retry = {{"17", "us"}, {"23", "eu"}};
  progress.rows = 1041;
  progress.chunks = 2;
  Write(dir / "backfill_retry", progress.ToJson());
  progress.done = true;
  progress.retry.clear();
  Write(dir / "backfill_done", progress.ToJson());
  bronze::ColumnMap map;
  map.columns.push_back({1, "id", 1, 20, -1, {}});
  map.columns.push_back({3, "code", 5, 1700, 655366, {2, 4}});
  Write(dir / "column_map", map.ToJson());
  // pg_logical_emit_message contents naming a table, and pg_current_snapshot().
  Write(dir / "source_table", R"({"source_table":"public.orders","op":"refresh"})");
  Write(dir / "schema_table", R"({"schema":"sales","table":"orders","n":3})");
  Write(dir / "snapshot_xids", "748:752:748,750");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: seed_writer OUT_DIR\n";
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path work =
      fs::temp_directory_path() / ("floe-seed-writer-" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work);
  {
    auto io = ice::MakeLocalFileIO();
    auto catalog = Check(
        ice::SqlCatalog::Open(
            "seeds", Check(ice::OpenSqlite((work / "catalog.db").string()), "sqlite")),
        "catalog");
    Check(catalog->EnsureNamespace({"db"}), "namespace");
    TableSeeds(catalog.get(), io, work, out, "plain", ice::PartitionSpec{}, 0x00,
               {ice::PartitionTuple{}});
    // day(ts) and identity(name): ids 1000 and 1001, manifest_fuzz's partition type 1.
    ice::PartitionSpec spec{0,
                            {{3, 1000, "ts_day", ice::Transform::Day()},
                             {2, 1001, "name", ice::Transform::Identity()}}};
    TableSeeds(catalog.get(), io, work, out, "by_day", spec, 0x04,
               {ice::PartitionTuple{ice::Literal(int32_t{19676}),
                                    ice::Literal(std::string("n0"))},
                ice::PartitionTuple{ice::Literal(int32_t{19677}), std::nullopt}});
    WriterSeeds(*io, work, out);
    SchemaSeeds(out);
    MessageSeeds(out);
  }
  fs::remove_all(work);
  return 0;
}
