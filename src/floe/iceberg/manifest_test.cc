#include "floe/iceberg/manifest.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "floe/iceberg/conversions.h"

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("manifest_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    io_ = MakeLocalFileIO();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
  std::shared_ptr<FileIO> io_;
};

// One partition field of every primitive type a partition value can have.
TypePtr WidePartitionType() {
  return Type::Struct({
      NestedField::Optional(1000, "id_bucket", Type::Int()),
      NestedField::Optional(1001, "ts_day", Type::Date()),
      NestedField::Optional(1002, "name", Type::String()),
      NestedField::Optional(1003, "amount", Type::Decimal(38, 4)),
      NestedField::Optional(1004, "small", Type::Decimal(5, 2)),
      NestedField::Optional(1005, "key", Type::Uuid()),
      NestedField::Optional(1006, "big", Type::Long()),
      NestedField::Optional(1007, "flag", Type::Boolean()),
      NestedField::Optional(1008, "blob", Type::Binary()),
      NestedField::Optional(1009, "code", Type::Fixed(3)),
      NestedField::Optional(1010, "ratio", Type::Double()),
      NestedField::Optional(1011, "at", Type::TimestampTz()),
      NestedField::Optional(1012, "f", Type::Float()),
  });
}

std::string Serialized(const TypePtr& type, const Literal& value) {
  auto bytes = ToBytes(*type, value);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

Uuid MakeUuid(const char* text) {
  auto u = Uuid::Parse(text);
  EXPECT_TRUE(u.ok());
  return u.ok() ? *u : Uuid{};
}

ManifestEntry FullEntry() {
  ManifestEntry e;
  e.status = ManifestEntryStatus::kExisting;
  e.snapshot_id = 7001;
  e.sequence_number = 4;
  e.file_sequence_number = 3;
  DataFile& f = e.data_file;
  f.file_path = "file:///warehouse/db/t/data/00000-0-a.parquet";
  f.partition = {
      Literal(int32_t{7}),
      Literal(int32_t{19000}),
      Literal(std::string("caf\xC3\xA9")),
      Literal(Decimal{-(static_cast<__int128>(1) << 100), 4}),
      Literal(Decimal{-12345, 2}),
      Literal(MakeUuid("f79c3e09-677c-4bbd-a479-3f349cb785e7")),
      Literal(int64_t{-5}),
      Literal(true),
      Literal(Bytes{0x00, 0xFF, 0x10}),
      Literal(Bytes{0x61, 0x62, 0x63}),
      Literal(-0.5),
      Literal(int64_t{1700000000123456}),
      Literal(1.25F),
  };
  f.record_count = 1234;
  f.file_size_in_bytes = 56789;
  f.column_sizes = {{1, 100}, {2, 200}, {5, 50}};
  f.value_counts = {{1, 1234}, {2, 1234}, {5, 4000}};
  f.null_value_counts = {{1, 0}, {2, 17}, {5, 3}};
  f.nan_value_counts = {{3, 2}};
  f.lower_bounds = {{1, Serialized(Type::Long(), int64_t{-3})},
                    {2, Serialized(Type::String(), std::string("aa"))}};
  f.upper_bounds = {{1, Serialized(Type::Long(), int64_t{99999})},
                    {2, Serialized(Type::String(), std::string("zz"))}};
  f.key_metadata = std::string("\x01\x02\x00\x03", 4);
  f.split_offsets = {4, 1048576, 2097152};
  f.sort_order_id = 1;
  return e;
}

ManifestWriteOptions Options(TypePtr partition_type) {
  ManifestWriteOptions o;
  o.schema_json = R"({"type":"struct","schema-id":3,"fields":[)"
                  R"({"id":1,"name":"id","required":true,"type":"long"}]})";
  o.partition_spec_json = R"([{"name":"id_bucket","transform":"bucket[16]",)"
                          R"("source-id":1,"field-id":1000}])";
  o.partition_spec_id = 2;
  o.partition_type = std::move(partition_type);
  o.snapshot_id = 9001;
  return o;
}

TEST_F(ManifestTest, EveryFieldOfEveryEntryReadsBackEqual) {
  const TypePtr ptype = WidePartitionType();
  ManifestEntry full = FullEntry();
  ManifestEntry nulls;  // every optional field null, every partition value null
  nulls.status = ManifestEntryStatus::kAdded;
  nulls.data_file.file_path = "s3://bucket/a b/ü.parquet";
  nulls.data_file.partition.resize(ptype->fields().size());
  nulls.data_file.record_count = 0;
  ManifestEntry deleted = full;
  deleted.status = ManifestEntryStatus::kDeleted;
  deleted.data_file.record_count = 10;
  deleted.data_file.partition[2] = Literal(std::string(""));
  deleted.data_file.partition[8] = Literal(Bytes{});
  deleted.data_file.key_metadata = std::string();
  deleted.data_file.lower_bounds[7] = std::string();
  std::vector<ManifestEntry> entries = {full, nulls, deleted};

  for (const char* codec : {"deflate", "null"}) {
    SCOPED_TRACE(codec);
    auto options = Options(ptype);
    options.codec = codec;
    const std::string path = Path(std::string("m-") + codec + ".avro");
    auto written = WriteManifest(*io_, path, options, entries);
    ASSERT_TRUE(written.ok()) << written.status().ToString();
    EXPECT_EQ(written->manifest_path, path);
    EXPECT_EQ(written->manifest_length, static_cast<int64_t>(fs::file_size(path)));
    EXPECT_EQ(written->partition_spec_id, 2);
    EXPECT_EQ(written->content, ManifestContent::kData);
    EXPECT_EQ(written->added_snapshot_id, 9001);
    EXPECT_EQ(written->sequence_number, kUnassignedSequenceNumber);
    EXPECT_EQ(written->min_sequence_number, 4);  // the live existing entry's
    EXPECT_EQ(written->added_files_count, 1);
    EXPECT_EQ(written->existing_files_count, 1);
    EXPECT_EQ(written->deleted_files_count, 1);
    EXPECT_EQ(written->added_rows_count, 0);
    EXPECT_EQ(written->existing_rows_count, 1234);
    EXPECT_EQ(written->deleted_rows_count, 10);

    auto read = ReadManifest(*io_, path, *ptype);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_EQ(read->size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ((*read)[i], entries[i]) << "entry " << i;
    }
  }
}

TEST_F(ManifestTest, HeaderCarriesTheSpecMetadataAndFieldIds) {
  auto written =
      WriteManifest(*io_, Path("m.avro"), Options(WidePartitionType()), {FullEntry()});
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  auto meta = ReadAvroMetadata(*io_, Path("m.avro"));
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->at("format-version"), "2");
  EXPECT_EQ(meta->at("content"), "data");
  EXPECT_EQ(meta->at("partition-spec-id"), "2");
  EXPECT_EQ(meta->at("schema-id"), "3");
  EXPECT_EQ(meta->at("avro.codec"), "deflate");
  EXPECT_EQ(nlohmann::json::parse(meta->at("schema"))["schema-id"], 3);
  EXPECT_EQ(nlohmann::json::parse(meta->at("partition-spec"))[0]["field-id"], 1000);

  // Every field, at every depth, carries the spec's field id.
  auto schema = nlohmann::json::parse(meta->at("avro.schema"));
  std::map<std::string, int> ids;
  std::function<void(const nlohmann::json&, const std::string&)> walk =
      [&](const nlohmann::json& type, const std::string& prefix) {
        if (type.is_array()) {
          for (const auto& b : type) walk(b, prefix);
          return;
        }
        if (!type.is_object()) return;
        if (type["type"] == "record") {
          for (const auto& f : type["fields"]) {
            EXPECT_TRUE(f.contains("field-id")) << prefix << f["name"];
            ids[prefix + f["name"].get<std::string>()] = f.value("field-id", -1);
            walk(f["type"], prefix + f["name"].get<std::string>() + ".");
          }
        } else if (type["type"] == "array") {
          if (type.contains("element-id")) ids[prefix + "element"] = type["element-id"];
          walk(type["items"], prefix);
        }
      };
  walk(schema, "");
  const std::map<std::string, int> expected = {
      {"status", 0},
      {"snapshot_id", 1},
      {"sequence_number", 3},
      {"file_sequence_number", 4},
      {"data_file", 2},
      {"data_file.content", 134},
      {"data_file.file_path", 100},
      {"data_file.file_format", 101},
      {"data_file.partition", 102},
      {"data_file.partition.id_bucket", 1000},
      {"data_file.partition.f", 1012},
      {"data_file.record_count", 103},
      {"data_file.file_size_in_bytes", 104},
      {"data_file.column_sizes", 108},
      {"data_file.column_sizes.key", 117},
      {"data_file.column_sizes.value", 118},
      {"data_file.value_counts", 109},
      {"data_file.value_counts.key", 119},
      {"data_file.value_counts.value", 120},
      {"data_file.null_value_counts", 110},
      {"data_file.null_value_counts.key", 121},
      {"data_file.null_value_counts.value", 122},
      {"data_file.nan_value_counts", 137},
      {"data_file.nan_value_counts.key", 138},
      {"data_file.nan_value_counts.value", 139},
      {"data_file.lower_bounds", 125},
      {"data_file.lower_bounds.key", 126},
      {"data_file.lower_bounds.value", 127},
      {"data_file.upper_bounds", 128},
      {"data_file.upper_bounds.key", 129},
      {"data_file.upper_bounds.value", 130},
      {"data_file.key_metadata", 131},
      {"data_file.split_offsets", 132},
      {"data_file.split_offsets.element", 133},
      {"data_file.equality_ids", 135},
      {"data_file.equality_ids.element", 136},
      {"data_file.sort_order_id", 140},
      {"data_file.referenced_data_file", 143},
  };
  for (const auto& [name, id] : expected) {
    ASSERT_TRUE(ids.count(name)) << name;
    EXPECT_EQ(ids[name], id) << name;
  }
}

TEST_F(ManifestTest, DeleteManifestsKeepEqualityIdsAndReferencedDataFile) {
  ManifestEntry e;
  e.status = ManifestEntryStatus::kAdded;
  e.data_file.content = DataFileContent::kEqualityDeletes;
  e.data_file.file_path = "/w/eq-deletes.parquet";
  e.data_file.record_count = 3;
  e.data_file.file_size_in_bytes = 400;
  e.data_file.equality_ids = {1, 5};
  ManifestEntry p = e;
  p.data_file.content = DataFileContent::kPositionDeletes;
  p.data_file.file_path = "/w/pos-deletes.parquet";
  p.data_file.equality_ids.clear();
  p.data_file.referenced_data_file = "/w/data.parquet";
  auto options = Options(Type::Struct({}));
  options.content = ManifestContent::kDeletes;
  auto written = WriteManifest(*io_, Path("d.avro"), options, {e, p});
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->content, ManifestContent::kDeletes);
  EXPECT_TRUE(written->partitions.empty());
  auto meta = ReadAvroMetadata(*io_, Path("d.avro"));
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->at("content"), "deletes");
  auto read = ReadManifest(*io_, Path("d.avro"), *Type::Struct({}));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0], e);
  EXPECT_EQ((*read)[1], p);

  // A data file does not belong in a delete manifest, nor the other way round.
  ManifestEntry data = e;
  data.data_file.content = DataFileContent::kData;
  EXPECT_TRUE(
      WriteManifest(*io_, Path("bad.avro"), options, {data}).status().IsInvalid());
  options.content = ManifestContent::kData;
  EXPECT_TRUE(WriteManifest(*io_, Path("bad.avro"), options, {e}).status().IsInvalid());
}

TEST_F(ManifestTest, PartitionSummariesCoverEveryEntry) {
  const TypePtr ptype = Type::Struct({
      NestedField::Optional(1000, "day", Type::Date()),
      NestedField::Optional(1001, "name", Type::String()),
      NestedField::Optional(1002, "score", Type::Double()),
      NestedField::Optional(1003, "amount", Type::Decimal(10, 2)),
      NestedField::Optional(1004, "always_null", Type::Long()),
  });
  auto entry = [](std::vector<std::optional<Literal>> partition,
                  ManifestEntryStatus status = ManifestEntryStatus::kAdded) {
    ManifestEntry e;
    e.status = status;
    e.data_file.file_path = "/f" + std::to_string(partition.size());
    e.data_file.partition = std::move(partition);
    e.data_file.record_count = 1;
    return e;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<ManifestEntry> entries = {
      entry({Literal(int32_t{-3}), Literal(std::string("b")), Literal(2.5),
             Literal(Decimal{-100, 2}), std::nullopt}),
      entry({Literal(int32_t{10}), std::nullopt, Literal(nan), Literal(Decimal{999, 2}),
             std::nullopt}),
      // Deleted entries count too, as in Java's summaries.
      entry({Literal(int32_t{4}), Literal(std::string("\xC3\xA9")), Literal(-1.0),
             Literal(Decimal{5, 2}), std::nullopt},
            ManifestEntryStatus::kDeleted),
  };
  auto written = WriteManifest(*io_, Path("m.avro"), Options(ptype), entries);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  const auto& s = written->partitions;
  ASSERT_EQ(s.size(), 5u);
  EXPECT_FALSE(s[0].contains_null);
  EXPECT_EQ(s[0].contains_nan, false);
  EXPECT_EQ(s[0].lower_bound, Serialized(Type::Date(), int32_t{-3}));
  EXPECT_EQ(s[0].upper_bound, Serialized(Type::Date(), int32_t{10}));
  EXPECT_TRUE(s[1].contains_null);
  EXPECT_EQ(s[1].lower_bound, "b");
  EXPECT_EQ(s[1].upper_bound, "\xC3\xA9");  // byte order is code point order
  EXPECT_FALSE(s[2].contains_null);
  EXPECT_EQ(s[2].contains_nan, true);
  EXPECT_EQ(s[2].lower_bound, Serialized(Type::Double(), -1.0));
  EXPECT_EQ(s[2].upper_bound, Serialized(Type::Double(), 2.5));
  EXPECT_EQ(s[3].lower_bound, Serialized(Type::Decimal(10, 2), Decimal{-100, 2}));
  EXPECT_EQ(s[3].upper_bound, Serialized(Type::Decimal(10, 2), Decimal{999, 2}));
  EXPECT_TRUE(s[4].contains_null);
  EXPECT_FALSE(s[4].lower_bound.has_value());
  EXPECT_FALSE(s[4].upper_bound.has_value());

  // The summaries survive the manifest list.
  ASSERT_TRUE(
      WriteManifestList(*io_, Path("list.avro"), 9001, std::nullopt, 1, {*written}).ok());
  auto list = ReadManifestList(*io_, Path("list.avro"));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].partitions, s);
}

TEST_F(ManifestTest, ManifestListRoundTripsAndAssignsTheSnapshotSequenceNumber) {
  ManifestFile old;
  old.manifest_path = "file:///w/old-m0.avro";
  old.manifest_length = 4242;
  old.partition_spec_id = 1;
  old.content = ManifestContent::kDeletes;
  old.sequence_number = 3;
  old.min_sequence_number = 2;
  old.added_snapshot_id = 11;
  old.added_files_count = 1;
  old.existing_files_count = 2;
  old.deleted_files_count = 3;
  old.added_rows_count = 400;
  old.existing_rows_count = 500;
  old.deleted_rows_count = 600;
  old.partitions = {PartitionFieldSummary{true, std::nullopt, std::nullopt, std::nullopt},
                    PartitionFieldSummary{false, true, "a", "z"}};
  old.key_metadata = std::string("k\0y", 3);

  ManifestFile fresh;
  fresh.manifest_path = "file:///w/new-m0.avro";
  fresh.manifest_length = 100;
  fresh.added_snapshot_id = 12;
  fresh.added_files_count = 1;
  fresh.added_rows_count = 7;
  // sequence numbers unassigned: written for snapshot 12

  auto st = WriteManifestList(*io_, Path("snap-12.avro"), 12, 11, 4, {old, fresh});
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto read = ReadManifestList(*io_, Path("snap-12.avro"));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[0], old);
  ManifestFile expected = fresh;
  expected.sequence_number = 4;
  expected.min_sequence_number = 4;
  EXPECT_EQ((*read)[1], expected);

  auto meta = ReadAvroMetadata(*io_, Path("snap-12.avro"));
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->at("snapshot-id"), "12");
  EXPECT_EQ(meta->at("parent-snapshot-id"), "11");
  EXPECT_EQ(meta->at("sequence-number"), "4");
  EXPECT_EQ(meta->at("format-version"), "2");

  // The first snapshot has no parent.
  ASSERT_TRUE(WriteManifestList(*io_, Path("snap-1.avro"), 1, std::nullopt, 1, {}).ok());
  meta = ReadAvroMetadata(*io_, Path("snap-1.avro"));
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->at("parent-snapshot-id"), "null");
  auto empty = ReadManifestList(*io_, Path("snap-1.avro"));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());

  // A manifest with no sequence number must have been added by this snapshot.
  EXPECT_TRUE(
      WriteManifestList(*io_, Path("snap-13.avro"), 13, 12, 5, {fresh}).IsInvalid());
}

TEST_F(ManifestTest, AddedEntriesInheritTheManifestSequenceNumberAndSnapshotId) {
  ManifestEntry added;
  added.status = ManifestEntryStatus::kAdded;
  added.data_file.file_path = "/w/new.parquet";
  added.data_file.record_count = 5;
  ManifestEntry existing = FullEntry();  // snapshot 7001, sequence numbers 4 / 3
  existing.data_file.partition = {Literal(int32_t{1})};
  ManifestEntry added_with_seq = added;  // an explicit number is kept
  added_with_seq.data_file.file_path = "/w/explicit.parquet";
  added_with_seq.sequence_number = 2;
  added_with_seq.file_sequence_number = 2;
  added.data_file.partition = {Literal(int32_t{1})};
  added_with_seq.data_file.partition = {Literal(int32_t{1})};

  const TypePtr ptype = Type::Struct({NestedField::Optional(1000, "b", Type::Int())});
  auto options = Options(ptype);
  options.snapshot_id = 20;
  auto written =
      WriteManifest(*io_, Path("m.avro"), options, {added, existing, added_with_seq});
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->min_sequence_number, 2);

  // Stored as written: nulls stay null.
  auto raw = ReadManifest(*io_, Path("m.avro"), *ptype);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_FALSE((*raw)[0].sequence_number.has_value());
  EXPECT_FALSE((*raw)[0].file_sequence_number.has_value());
  EXPECT_FALSE((*raw)[0].snapshot_id.has_value());

  ASSERT_TRUE(WriteManifestList(*io_, Path("list.avro"), 20, 19, 9, {*written}).ok());
  auto list = ReadManifestList(*io_, Path("list.avro"));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].sequence_number, 9);
  EXPECT_EQ((*list)[0].min_sequence_number, 2);

  auto entries = ReadManifest(*io_, (*list)[0], *ptype);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].snapshot_id, 20);
  EXPECT_EQ((*entries)[0].sequence_number, 9);
  EXPECT_EQ((*entries)[0].file_sequence_number, 9);
  EXPECT_EQ((*entries)[1].snapshot_id, 7001);
  EXPECT_EQ((*entries)[1].sequence_number, 4);
  EXPECT_EQ((*entries)[1].file_sequence_number, 3);
  EXPECT_EQ((*entries)[2].sequence_number, 2);
  EXPECT_EQ((*entries)[2].file_sequence_number, 2);
}

TEST_F(ManifestTest, AnEmptyManifestReadsBackEmpty) {
  auto written = WriteManifest(*io_, Path("m.avro"), Options(Type::Struct({})), {});
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->added_files_count, 0);
  EXPECT_EQ(written->min_sequence_number, kUnassignedSequenceNumber);
  auto read = ReadManifest(*io_, Path("m.avro"), *Type::Struct({}));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->empty());
}

TEST_F(ManifestTest, ManifestsAreNeverOverwritten) {
  auto options = Options(Type::Struct({}));
  ASSERT_TRUE(WriteManifest(*io_, Path("m.avro"), options, {}).ok());
  auto again = WriteManifest(*io_, Path("m.avro"), options, {});
  EXPECT_FALSE(again.ok());
  ASSERT_TRUE(WriteManifestList(*io_, Path("l.avro"), 1, std::nullopt, 1, {}).ok());
  EXPECT_FALSE(WriteManifestList(*io_, Path("l.avro"), 1, std::nullopt, 1, {}).ok());
}

TEST_F(ManifestTest, PartitionValuesMustMatchThePartitionType) {
  const TypePtr ptype = Type::Struct({NestedField::Optional(1000, "b", Type::Int())});
  ManifestEntry e;
  e.data_file.file_path = "/w/x.parquet";
  e.data_file.partition = {Literal(int64_t{1})};  // long for an int field
  EXPECT_FALSE(WriteManifest(*io_, Path("a.avro"), Options(ptype), {e}).ok());
  e.data_file.partition = {};  // too few values
  EXPECT_TRUE(
      WriteManifest(*io_, Path("b.avro"), Options(ptype), {e}).status().IsInvalid());
  e.data_file.partition = {Literal(Decimal{100000, 2})};  // too many digits
  const TypePtr dtype =
      Type::Struct({NestedField::Optional(1000, "d", Type::Decimal(5, 2))});
  EXPECT_FALSE(WriteManifest(*io_, Path("c.avro"), Options(dtype), {e}).ok());
}

TEST_F(ManifestTest, CorruptOrTruncatedFilesAreErrorsNotShortReads) {
  std::vector<ManifestEntry> entries(50, FullEntry());
  const TypePtr ptype = WidePartitionType();
  ASSERT_TRUE(WriteManifest(*io_, Path("m.avro"), Options(ptype), entries).ok());
  std::string bytes;
  {
    std::ifstream in(Path("m.avro"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& name, const std::string& data) {
    std::ofstream out(Path(name), std::ios::binary);
    out << data;
  };
  write("truncated.avro", bytes.substr(0, bytes.size() - 5));
  EXPECT_FALSE(ReadManifest(*io_, Path("truncated.avro"), *ptype).ok());
  std::string bad_sync = bytes;
  bad_sync[bad_sync.size() - 1] ^= 0x55;
  write("bad_sync.avro", bad_sync);
  EXPECT_FALSE(ReadManifest(*io_, Path("bad_sync.avro"), *ptype).ok());
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  write("bad_magic.avro", bad_magic);
  EXPECT_FALSE(ReadManifest(*io_, Path("bad_magic.avro"), *ptype).ok());
  // A manifest read with another spec's partition type is refused.
  EXPECT_FALSE(
      ReadManifest(*io_, Path("m.avro"),
                   *Type::Struct({NestedField::Optional(1999, "x", Type::Int())}))
          .ok());
}

}  // namespace
}  // namespace floe::iceberg
