#include "floe/iceberg/table_metadata.h"

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace floe::iceberg {
namespace {

using nlohmann::json;

std::string ReadTestFile(const std::string& name) {
  std::ifstream in(std::string(FLOE_ICEBERG_TESTDATA_DIR) + "/" + name);
  EXPECT_TRUE(in.good()) << "cannot open " << name;
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TableMetadata Parse(const std::string& text) {
  auto m = TableMetadataFromJson(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : TableMetadata{};
}

json ToJson(const TableMetadata& m) {
  auto text = TableMetadataToJson(m);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? json::parse(*text) : json();
}

bool Contains(const arrow::Status& st, const std::string& text) {
  return st.message().find(text) != std::string::npos;
}

// ---- Golden file from PyIceberg --------------------------------------------------

// testdata/pyiceberg_v2_metadata.json was written by PyIceberg 0.12
// (testdata/make_pyiceberg_metadata.py): a table with a nested schema and a sort
// order, two appends, then a schema change and a partition spec change.
constexpr char kGolden[] = "pyiceberg_v2_metadata.json";
constexpr int64_t kGoldenFirst = 1965072193431127897;
constexpr int64_t kGoldenSecond = 5082166180968534123;

TEST(TableMetadataGolden, ReadsPyIcebergMetadata) {
  const TableMetadata m = Parse(ReadTestFile(kGolden));
  EXPECT_EQ(m.format_version, 2);
  EXPECT_EQ(m.table_uuid, "7d96b70f-8d9e-4438-a7f6-93dcb5b42472");
  EXPECT_EQ(m.location, "file:///tmp/floe-golden-gpz_cjar/db/events");
  EXPECT_EQ(m.last_sequence_number, 2);
  EXPECT_EQ(m.last_updated_ms, 1796018146031);
  EXPECT_EQ(m.last_column_id, 13);

  ASSERT_EQ(m.schemas.size(), 2u);
  EXPECT_EQ(m.current_schema_id, 1);
  const Schema* current = m.CurrentSchema();
  ASSERT_NE(current, nullptr);
  ASSERT_NE(current->FindField("location.alt"), nullptr);
  EXPECT_EQ(current->FindField("location.alt")->id, 13);
  EXPECT_EQ(current->FindField("score")->doc, "added after two appends");
  EXPECT_EQ(current->identifier_field_ids(), std::vector<int32_t>{1});
  ASSERT_NE(m.FindSchema(0), nullptr);
  EXPECT_EQ(m.FindSchema(0)->FindField("score"), nullptr);
  EXPECT_EQ(m.FindSchema(7), nullptr);

  ASSERT_EQ(m.partition_specs.size(), 2u);
  EXPECT_EQ(m.default_spec_id, 1);
  EXPECT_EQ(m.last_partition_id, 1003);
  const PartitionSpec* spec = m.DefaultSpec();
  ASSERT_NE(spec, nullptr);
  ASSERT_EQ(spec->fields.size(), 4u);
  EXPECT_EQ(spec->fields[1], (PartitionField{3, 1001, "ts_day", Transform::Day()}));
  EXPECT_EQ(spec->fields[2],
            (PartitionField{1, 1002, "id_bucket", Transform::Bucket(16)}));
  EXPECT_TRUE(spec->Validate(*current).ok());
  auto partition_type = spec->PartitionType(*current);
  ASSERT_TRUE(partition_type.ok());
  EXPECT_EQ((*partition_type)->fields()[1].type->id(), TypeId::kDate);
  EXPECT_EQ(m.FindSpec(0)->fields,
            (std::vector<PartitionField>{{2, 1000, "name", Transform::Identity()}}));

  EXPECT_EQ(m.properties.at("write.metadata.previous-versions-max"), "10");
  EXPECT_EQ(m.properties.at("owner"), "floe-tests");

  ASSERT_EQ(m.snapshots.size(), 2u);
  const Snapshot* snapshot = m.CurrentSnapshot();
  ASSERT_NE(snapshot, nullptr);
  EXPECT_EQ(snapshot->snapshot_id, kGoldenSecond);
  EXPECT_EQ(snapshot->parent_snapshot_id, kGoldenFirst);
  EXPECT_EQ(snapshot->sequence_number, 2);
  EXPECT_EQ(snapshot->timestamp_ms, 1796018145970);
  EXPECT_EQ(snapshot->operation, "append");
  EXPECT_EQ(snapshot->summary.at("added-records"), "2");
  EXPECT_EQ(snapshot->summary.at("total-records"), "5");
  EXPECT_EQ(snapshot->summary.count("operation"), 0u);
  EXPECT_EQ(snapshot->schema_id, 0);
  EXPECT_TRUE(snapshot->manifest_list.ends_with(
      "snap-5082166180968534123-0-7a8d6365-0558-4750-ab02-726a95a74f99.avro"));
  EXPECT_FALSE(m.FindSnapshot(kGoldenFirst)->parent_snapshot_id.has_value());

  const auto ancestry = m.SnapshotsAncestryOf(kGoldenSecond);
  ASSERT_EQ(ancestry.size(), 2u);
  EXPECT_EQ(ancestry[0]->snapshot_id, kGoldenSecond);
  EXPECT_EQ(ancestry[1]->snapshot_id, kGoldenFirst);
  EXPECT_TRUE(m.SnapshotsAncestryOf(42).empty());

  EXPECT_EQ(m.snapshot_log,
            (std::vector<SnapshotLogEntry>{{1796018145943, kGoldenFirst},
                                           {1796018145970, kGoldenSecond}}));
  ASSERT_EQ(m.metadata_log.size(), 4u);
  EXPECT_EQ(m.metadata_log[3].timestamp_ms, 1796018145979);
  EXPECT_EQ(ParseMetadataFileVersion(m.metadata_log[3].metadata_file), 3);

  EXPECT_EQ(m.default_sort_order_id, 1);
  ASSERT_NE(m.DefaultSortOrder(), nullptr);
  EXPECT_EQ(
      m.DefaultSortOrder()->fields,
      (std::vector<SortField>{
          {Transform::Identity(), 1, SortDirection::kAscending, NullOrder::kNullsFirst},
          {Transform::Day(), 3, SortDirection::kDescending, NullOrder::kNullsLast}}));

  ASSERT_EQ(m.refs.size(), 1u);
  EXPECT_EQ(m.refs.at("main"), (SnapshotRef{kGoldenSecond, SnapshotRefType::kBranch}));
  EXPECT_EQ(m.raw_json.at("statistics"), "[]");
  EXPECT_EQ(m.raw_json.at("partition-statistics"), "[]");
}

TEST(TableMetadataGolden, WritesPyIcebergMetadataBackUnchanged) {
  const std::string text = ReadTestFile(kGolden);
  EXPECT_EQ(ToJson(Parse(text)), json::parse(text));
}

TEST(TableMetadataGolden, AppendsASnapshotToPyIcebergMetadata) {
  const TableMetadata base = Parse(ReadTestFile(kGolden));
  const std::string previous = base.metadata_log.back().metadata_file;  // any name
  Snapshot next{.snapshot_id = 77,
                .parent_snapshot_id = kGoldenSecond,
                .sequence_number = 3,
                .timestamp_ms = base.last_updated_ms + 1000,
                .manifest_list = base.location + "/metadata/snap-77.avro",
                .operation = "append",
                .summary = {{"floe.commit-lsn", "0/16B3748"}},
                .schema_id = 1};
  auto m = TableMetadataBuilder::From(base)
               .AddSnapshot(next)
               .SetBranchSnapshot(kMainBranch, 77)
               .Build(previous);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->current_snapshot_id, 77);
  EXPECT_EQ(m->refs.at("main").snapshot_id, 77);
  EXPECT_EQ(m->last_sequence_number, 3);
  EXPECT_EQ(m->last_updated_ms, next.timestamp_ms);
  EXPECT_EQ(m->snapshot_log.back(), (SnapshotLogEntry{next.timestamp_ms, 77}));
  ASSERT_EQ(m->metadata_log.size(), 5u);
  EXPECT_EQ(m->metadata_log.back(), (MetadataLogEntry{base.last_updated_ms, previous}));
  EXPECT_EQ(m->SnapshotsAncestryOf(77).size(), 3u);
  // What the builder wrote reads back to the same metadata.
  auto text = TableMetadataToJson(*m);
  ASSERT_TRUE(text.ok());
  auto reread = TableMetadataFromJson(*text);
  ASSERT_TRUE(reread.ok()) << reread.status().ToString();
  EXPECT_EQ(reread->snapshots, m->snapshots);
  EXPECT_EQ(reread->refs, m->refs);
  EXPECT_EQ(ToJson(*reread), json::parse(*text));
}

// ---- Metadata as Java writes it --------------------------------------------------

// The shape Java's TableMetadataParser writes for v2: every member present,
// current-snapshot-id -1 when there is none, statistics files, a tag and a branch
// with retention settings.
constexpr char kJavaStyle[] = R"({
  "format-version" : 2,
  "table-uuid" : "9c12d441-03fe-4693-9a96-a0705ddf69c1",
  "location" : "s3://bucket/test/location",
  "last-sequence-number" : 34,
  "last-updated-ms" : 1602638573590,
  "last-column-id" : 3,
  "current-schema-id" : 1,
  "schemas" : [ {
    "type" : "struct", "schema-id" : 0,
    "fields" : [ { "id" : 1, "name" : "x", "required" : true, "type" : "long" } ]
  }, {
    "type" : "struct", "schema-id" : 1, "identifier-field-ids" : [ 1, 2 ],
    "fields" : [ { "id" : 1, "name" : "x", "required" : true, "type" : "long" },
                 { "id" : 2, "name" : "y", "required" : true, "type" : "long",
                   "doc" : "comment" },
                 { "id" : 3, "name" : "z", "required" : true, "type" : "long" } ]
  } ],
  "default-spec-id" : 0,
  "partition-specs" : [ {
    "spec-id" : 0,
    "fields" : [ { "name" : "x", "transform" : "identity", "source-id" : 1,
                   "field-id" : 1000 } ]
  } ],
  "last-partition-id" : 1000,
  "default-sort-order-id" : 3,
  "sort-orders" : [ {
    "order-id" : 3,
    "fields" : [ { "transform" : "identity", "source-id" : 2, "direction" : "asc",
                   "null-order" : "nulls-first" },
                 { "transform" : "bucket[4]", "source-id" : 3, "direction" : "desc",
                   "null-order" : "nulls-last" } ]
  } ],
  "properties" : { "commit.retry.num-retries" : "5" },
  "current-snapshot-id" : 3055729675574597004,
  "refs" : {
    "main" : { "snapshot-id" : 3055729675574597004, "type" : "branch" },
    "audit" : { "snapshot-id" : 3051729675574597004, "type" : "branch",
                "min-snapshots-to-keep" : 2, "max-snapshot-age-ms" : 86400000,
                "max-ref-age-ms" : 604800000 },
    "v1.0" : { "snapshot-id" : 3051729675574597004, "type" : "tag",
               "max-ref-age-ms" : 1000 }
  },
  "snapshots" : [ {
    "sequence-number" : 0,
    "snapshot-id" : 3051729675574597004,
    "timestamp-ms" : 1515100955770,
    "summary" : { "operation" : "append" },
    "manifest-list" : "s3://a/b/1.avro",
    "schema-id" : 0
  }, {
    "sequence-number" : 1,
    "snapshot-id" : 3055729675574597004,
    "parent-snapshot-id" : 3051729675574597004,
    "timestamp-ms" : 1555100955770,
    "summary" : { "operation" : "append", "spark.app.id" : "local-1" },
    "manifest-list" : "s3://a/b/2.avro",
    "schema-id" : 1
  } ],
  "statistics" : [ {
    "snapshot-id" : 3055729675574597004,
    "statistics-path" : "s3://a/b/stats.puffin",
    "file-size-in-bytes" : 413,
    "file-footer-size-in-bytes" : 42,
    "blob-metadata" : [ { "type" : "ndv", "snapshot-id" : 3055729675574597004,
                          "sequence-number" : 1, "fields" : [ 1 ] } ]
  } ],
  "partition-statistics" : [ ],
  "snapshot-log" : [
    { "timestamp-ms" : 1515100955770, "snapshot-id" : 3051729675574597004 },
    { "timestamp-ms" : 1555100955770, "snapshot-id" : 3055729675574597004 } ],
  "metadata-log" : [ ]
})";

TEST(TableMetadataJson, ReadsJavaStyleMetadataAndWritesItBackUnchanged) {
  const TableMetadata m = Parse(kJavaStyle);
  EXPECT_EQ(m.location, "s3://bucket/test/location");
  EXPECT_EQ(m.last_sequence_number, 34);
  EXPECT_EQ(m.CurrentSchema()->identifier_field_ids(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(m.DefaultSortOrder()->order_id, 3);
  EXPECT_EQ(m.CurrentSnapshot()->summary.at("spark.app.id"), "local-1");
  const SnapshotRef& audit = m.refs.at("audit");
  EXPECT_EQ(audit.min_snapshots_to_keep, 2);
  EXPECT_EQ(audit.max_snapshot_age_ms, 86400000);
  EXPECT_EQ(audit.max_ref_age_ms, 604800000);
  EXPECT_EQ(m.refs.at("v1.0").type, SnapshotRefType::kTag);
  EXPECT_EQ(m.refs.at("v1.0").max_ref_age_ms, 1000);
  EXPECT_EQ(json::parse(m.raw_json.at("statistics"))[0]["file-size-in-bytes"], 413);
  EXPECT_EQ(ToJson(m), json::parse(kJavaStyle));
}

TEST(TableMetadataJson, TreatsMinusOneNullAndMissingCurrentSnapshotIdAsNone) {
  json doc = json::parse(kJavaStyle);
  doc["snapshots"] = json::array();
  doc["refs"] = json::object();
  doc["snapshot-log"] = json::array();
  doc["statistics"] = json::array();
  for (const json& id : {json(-1), json(nullptr)}) {
    doc["current-snapshot-id"] = id;
    const TableMetadata m = Parse(doc.dump());
    EXPECT_FALSE(m.current_snapshot_id.has_value());
    EXPECT_EQ(m.CurrentSnapshot(), nullptr);
    // Written back as -1, which every Java version reads.
    EXPECT_EQ(ToJson(m)["current-snapshot-id"], -1);
  }
  doc.erase("current-snapshot-id");
  EXPECT_FALSE(Parse(doc.dump()).current_snapshot_id.has_value());
}

TEST(TableMetadataJson, WithoutRefsMainFollowsTheCurrentSnapshot) {
  json doc = json::parse(kJavaStyle);
  doc.erase("refs");
  const TableMetadata m = Parse(doc.dump());
  ASSERT_EQ(m.refs.size(), 1u);
  EXPECT_EQ(m.refs.at("main"), (SnapshotRef{3055729675574597004}));
}

TEST(TableMetadataJson, RejectsFormatVersionsOneAndThreeSayingWhatIsSupported) {
  for (int version : {1, 3}) {
    json doc = json::parse(kJavaStyle);
    doc["format-version"] = version;
    auto m = TableMetadataFromJson(doc.dump());
    ASSERT_TRUE(m.status().IsNotImplemented()) << m.status().ToString();
    EXPECT_TRUE(Contains(m.status(), "format-version " + std::to_string(version)));
    EXPECT_TRUE(Contains(m.status(), "format-version 2 only"));
  }
}

TEST(TableMetadataJson, RejectsAMainRefThatDisagreesWithTheCurrentSnapshot) {
  json doc = json::parse(kJavaStyle);
  doc["refs"]["main"]["snapshot-id"] = 3051729675574597004;
  auto m = TableMetadataFromJson(doc.dump());
  ASSERT_TRUE(m.status().IsInvalid());
  EXPECT_TRUE(Contains(m.status(), "main"));

  doc = json::parse(kJavaStyle);
  doc["current-snapshot-id"] = -1;
  EXPECT_FALSE(TableMetadataFromJson(doc.dump()).ok());
}

TEST(TableMetadataJson, RejectsBrokenMetadataWithAMessage) {
  EXPECT_FALSE(TableMetadataFromJson("{not json").ok());
  EXPECT_FALSE(TableMetadataFromJson("[]").ok());
  const std::vector<std::pair<std::string, json>> breakages = {
      {"table-uuid", "not-a-uuid"}, {"current-schema-id", 9},
      {"default-spec-id", 4},       {"default-sort-order-id", 0},
      {"last-column-id", 2},        {"last-partition-id", 999},
      {"last-sequence-number", 0},  {"current-snapshot-id", 12345},
      {"schemas", "nope"},
  };
  for (const auto& [key, value] : breakages) {
    json doc = json::parse(kJavaStyle);
    doc[key] = value;
    auto m = TableMetadataFromJson(doc.dump());
    EXPECT_TRUE(m.status().IsInvalid()) << key << ": " << m.status().ToString();
  }
  for (const char* key : {"table-uuid", "location", "last-sequence-number", "schemas",
                          "partition-specs", "sort-orders", "last-column-id"}) {
    json doc = json::parse(kJavaStyle);
    doc.erase(key);
    auto m = TableMetadataFromJson(doc.dump());
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_TRUE(Contains(m.status(), key)) << m.status().ToString();
  }
  json doc = json::parse(kJavaStyle);
  doc["snapshots"][1]["schema-id"] = 5;
  EXPECT_TRUE(TableMetadataFromJson(doc.dump()).status().IsInvalid());
  doc = json::parse(kJavaStyle);
  doc["snapshots"][1].erase("manifest-list");
  EXPECT_TRUE(TableMetadataFromJson(doc.dump()).status().IsInvalid());
  doc = json::parse(kJavaStyle);
  doc["refs"]["v1.0"]["min-snapshots-to-keep"] = 3;
  EXPECT_TRUE(TableMetadataFromJson(doc.dump()).status().IsInvalid());
}

TEST(TableMetadataJson, KeepsUnknownTopLevelMembersButDropsV1Leftovers) {
  json doc = json::parse(kJavaStyle);
  doc["some-future-member"] = {{"a", 1}};
  doc["schema"] = doc["schemas"][0];
  const TableMetadata m = Parse(doc.dump());
  EXPECT_EQ(m.raw_json.count("schema"), 0u);
  const json out = ToJson(m);
  EXPECT_EQ(out["some-future-member"], (json{{"a", 1}}));
  EXPECT_FALSE(out.contains("schema"));
}

// ---- New tables ------------------------------------------------------------------

// Ids as a caller might number them, nothing like what the table will use.
Schema CallerSchema() {
  auto props_value = Type::Struct({NestedField::Optional(100, "v", Type::Int())});
  auto schema = Schema::Make(
      7,
      {NestedField::Required(10, "id", Type::Long()),
       NestedField::Optional(
           20, "loc",
           Type::Struct({NestedField::Optional(30, "lat", Type::Double()),
                         NestedField::Optional(40, "lon", Type::Double())})),
       NestedField::Optional(50, "tags", Type::List(60, Type::String(), false)),
       NestedField::Optional(70, "props",
                             Type::Map(80, Type::String(), 90, props_value, false)),
       NestedField::Optional(110, "ts", Type::TimestampTz())},
      {10});
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return *schema;
}

TEST(AssignFreshFieldIds, NumbersEachStructsFieldsBeforeTheirChildren) {
  std::map<int32_t, int32_t> ids;
  auto fresh = AssignFreshFieldIds(CallerSchema(), &ids);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->schema_id(), 0);
  const std::vector<std::pair<const char*, int32_t>> expected = {
      {"id", 1},        {"loc", 2},          {"tags", 3},          {"props", 4},
      {"ts", 5},        {"loc.lat", 6},      {"loc.lon", 7},       {"tags.element", 8},
      {"props.key", 9}, {"props.value", 10}, {"props.value.v", 11}};
  for (const auto& [name, id] : expected) {
    const NestedField* f = fresh->FindField(std::string_view(name));
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->id, id) << name;
  }
  EXPECT_EQ(fresh->highest_field_id(), 11);
  EXPECT_EQ(fresh->identifier_field_ids(), std::vector<int32_t>{1});
  EXPECT_EQ(ids.at(110), 5);
  EXPECT_EQ(ids.at(100), 11);
}

TEST(TableMetadataBuilder, NewTableGetsFreshIdsSpecAndSortOrder) {
  const Schema schema = CallerSchema();
  PartitionSpec spec{5,
                     {{110, 1009, "ts_day", Transform::Day()},
                      {10, 1005, "id_bucket", Transform::Bucket(16)}}};
  SortOrder order{4,
                  {SortField{Transform::Identity(), 110, SortDirection::kDescending,
                             NullOrder::kNullsLast}}};
  const int64_t before = CurrentTimeMs();
  auto m = TableMetadataBuilder::NewTable(schema, spec, order, "file:///w/db/t/",
                                          {{"owner", "floe"}})
               .Build();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format_version, 2);
  EXPECT_TRUE(Uuid::Parse(m->table_uuid).ok());
  EXPECT_EQ(m->location, "file:///w/db/t");
  EXPECT_EQ(m->last_column_id, 11);
  EXPECT_EQ(m->last_sequence_number, 0);
  EXPECT_GE(m->last_updated_ms, before);
  ASSERT_EQ(m->schemas.size(), 1u);
  EXPECT_EQ(m->current_schema_id, 0);
  EXPECT_EQ(m->CurrentSchema()->FindField("ts")->id, 5);
  EXPECT_EQ(m->default_spec_id, 0);
  EXPECT_EQ(m->DefaultSpec()->fields,
            (std::vector<PartitionField>{{5, 1000, "ts_day", Transform::Day()},
                                         {1, 1001, "id_bucket", Transform::Bucket(16)}}));
  EXPECT_EQ(m->last_partition_id, 1001);
  ASSERT_EQ(m->sort_orders.size(), 1u);
  EXPECT_EQ(m->default_sort_order_id, 1);
  EXPECT_EQ(m->DefaultSortOrder()->fields[0].source_id, 5);
  EXPECT_EQ(m->properties, (std::map<std::string, std::string>{{"owner", "floe"}}));
  EXPECT_FALSE(m->current_snapshot_id.has_value());
  EXPECT_TRUE(m->snapshots.empty() && m->refs.empty() && m->metadata_log.empty());

  // PyIceberg's shape for a new table: the same document members.
  const json out = ToJson(*m);
  EXPECT_EQ(out["last-partition-id"], 1001);
  EXPECT_EQ(out["sort-orders"][0]["order-id"], 1);
}

TEST(TableMetadataBuilder, NewTableRenumbersPartitionFieldsTheCallerLeftAtZero) {
  PartitionSpec spec{0, {{110, 0, "ts_hour", Transform::Hour()}}};
  auto m =
      TableMetadataBuilder::NewTable(CallerSchema(), spec, SortOrder::Unsorted(), "/w/t")
          .Build();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->DefaultSpec()->fields,
            (std::vector<PartitionField>{{5, 1000, "ts_hour", Transform::Hour()}}));
  // A source id that is not a column of the caller's schema is an error, even if
  // it happens to be one of the fresh ids.
  PartitionSpec unknown{0, {{3, 0, "x", Transform::Identity()}}};
  EXPECT_TRUE(TableMetadataBuilder::NewTable(CallerSchema(), unknown,
                                             SortOrder::Unsorted(), "/w/t")
                  .Build()
                  .status()
                  .IsInvalid());
}

TEST(TableMetadataBuilder, NewUnpartitionedUnsortedTableHasSpecZeroAndOrderZero) {
  auto m = TableMetadataBuilder::NewTable(CallerSchema(), PartitionSpec{},
                                          SortOrder::Unsorted(), "/w/t")
               .Build();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->last_partition_id, 999);
  EXPECT_TRUE(m->DefaultSpec()->is_unpartitioned());
  EXPECT_EQ(m->default_sort_order_id, 0);
  EXPECT_TRUE(m->DefaultSortOrder()->is_unsorted());
}

TEST(TableMetadataBuilder, NewTableRejectsBadSpecsAndOtherFormatVersions) {
  PartitionSpec bad{0, {{99, 1000, "x", Transform::Identity()}}};
  auto m = TableMetadataBuilder::NewTable(CallerSchema(), bad, SortOrder::Unsorted(),
                                          "/w/t", {{"format-version", "3"}})
               .Build();
  ASSERT_TRUE(m.status().IsInvalid());
  EXPECT_TRUE(Contains(m.status(), "99"));
  EXPECT_TRUE(Contains(m.status(), "format-version 3"));
  auto v2 = TableMetadataBuilder::NewTable(CallerSchema(), PartitionSpec{},
                                           SortOrder::Unsorted(), "/w/t",
                                           {{"format-version", "2"}})
                .Build();
  ASSERT_TRUE(v2.ok());
  EXPECT_TRUE(v2->properties.empty());
}

// ---- Snapshots -------------------------------------------------------------------

TableMetadata NewTable() {
  auto schema = Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                 NestedField::Optional(2, "ts", Type::TimestampTz())});
  EXPECT_TRUE(schema.ok());
  auto m = TableMetadataBuilder::NewTable(*schema, PartitionSpec{}, SortOrder::Unsorted(),
                                          "/w/t")
               .Build();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

Snapshot MakeSnapshot(const TableMetadata& m, int64_t id, std::optional<int64_t> parent,
                      int64_t timestamp_ms) {
  return Snapshot{.snapshot_id = id,
                  .parent_snapshot_id = parent,
                  .sequence_number = m.last_sequence_number + 1,
                  .timestamp_ms = timestamp_ms,
                  .manifest_list = "/w/t/metadata/snap-" + std::to_string(id) + ".avro",
                  .operation = "append",
                  .summary = {},
                  .schema_id = m.current_schema_id};
}

// Commits snapshots `ids` in order, each the child of the one before.
TableMetadata WithSnapshots(TableMetadata m, const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    auto next = TableMetadataBuilder::From(m)
                    .AddSnapshot(MakeSnapshot(m, id, m.current_snapshot_id,
                                              m.last_updated_ms + 10))
                    .SetBranchSnapshot(kMainBranch, id)
                    .Build();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    m = *next;
  }
  return m;
}

TEST(TableMetadataBuilder, RejectsASnapshotWithTheWrongSequenceNumber) {
  const TableMetadata m = WithSnapshots(NewTable(), {1});
  Snapshot s = MakeSnapshot(m, 2, 1, m.last_updated_ms);
  s.sequence_number = 3;
  auto next = TableMetadataBuilder::From(m).AddSnapshot(s).Build();
  ASSERT_TRUE(next.status().IsInvalid());
  EXPECT_TRUE(Contains(next.status(), "sequence number 3; the next one is 2"));
}

TEST(TableMetadataBuilder, RejectsAnUnknownParentAndAnUnknownSchema) {
  const TableMetadata m = WithSnapshots(NewTable(), {1});
  auto orphan = TableMetadataBuilder::From(m)
                    .AddSnapshot(MakeSnapshot(m, 2, 99, m.last_updated_ms))
                    .Build();
  ASSERT_TRUE(orphan.status().IsInvalid());
  EXPECT_TRUE(Contains(orphan.status(), "unknown parent 99"));

  Snapshot s = MakeSnapshot(m, 2, 1, m.last_updated_ms);
  s.schema_id = 4;
  auto unknown_schema = TableMetadataBuilder::From(m).AddSnapshot(s).Build();
  ASSERT_TRUE(unknown_schema.status().IsInvalid());
  EXPECT_TRUE(Contains(unknown_schema.status(), "unknown schema id 4"));
}

TEST(TableMetadataBuilder, CollectsEveryErrorBeforeReporting) {
  const TableMetadata m = WithSnapshots(NewTable(), {1});
  auto next = TableMetadataBuilder::From(m)
                  .AddSnapshot(MakeSnapshot(m, 1, 1, m.last_updated_ms))
                  .SetBranchSnapshot(kMainBranch, 42)
                  .SetCurrentSchema(8)
                  .SetDefaultSpec(kLastAdded)
                  .Build();
  ASSERT_TRUE(next.status().IsInvalid());
  EXPECT_TRUE(Contains(next.status(), "snapshot 1 already exists"));
  EXPECT_TRUE(Contains(next.status(), "unknown snapshot 42"));
  EXPECT_TRUE(Contains(next.status(), "unknown schema 8"));
  EXPECT_TRUE(Contains(next.status(), "without an added partition spec"));
}

TEST(TableMetadataBuilder, RejectsSnapshotTimestampsMoreThanAMinuteInThePast) {
  const TableMetadata m = WithSnapshots(NewTable(), {1});
  auto late = TableMetadataBuilder::From(m)
                  .AddSnapshot(MakeSnapshot(m, 2, 1, m.last_updated_ms - 61 * 1000))
                  .Build();
  ASSERT_TRUE(late.status().IsInvalid());
  EXPECT_TRUE(Contains(late.status(), "more than a minute before"));
  // Within a minute is clock skew Java tolerates too.
  auto skewed = TableMetadataBuilder::From(m)
                    .AddSnapshot(MakeSnapshot(m, 2, 1, m.last_updated_ms - 30 * 1000))
                    .SetBranchSnapshot(kMainBranch, 2)
                    .Build();
  EXPECT_TRUE(skewed.ok()) << skewed.status().ToString();
}

TEST(TableMetadataBuilder, MainMustMatchTheCurrentSnapshot) {
  TableMetadata m = WithSnapshots(NewTable(), {1, 2});
  m.refs.at("main").snapshot_id = 1;
  EXPECT_TRUE(Contains(m.Validate(), "ref 'main' points at snapshot 1"));
  auto built = TableMetadataBuilder::From(m).Build();
  EXPECT_TRUE(built.status().IsInvalid());
  m.refs.erase("main");
  EXPECT_TRUE(m.Validate().IsInvalid());
}

TEST(TableMetadataBuilder, OtherBranchesDoNotMoveTheCurrentSnapshot) {
  const TableMetadata m = WithSnapshots(NewTable(), {1, 2});
  auto next = TableMetadataBuilder::From(m).SetBranchSnapshot("audit", 1).Build();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->current_snapshot_id, 2);
  EXPECT_EQ(next->refs.at("audit"), (SnapshotRef{1, SnapshotRefType::kBranch}));
  EXPECT_EQ(next->snapshot_log.size(), 2u);
  // Pointing main where it already points changes nothing.
  auto same = TableMetadataBuilder::From(m).SetBranchSnapshot(kMainBranch, 2).Build();
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->snapshot_log, m.snapshot_log);
}

TEST(TableMetadataBuilder, RollingMainBackLogsTheOlderSnapshot) {
  const TableMetadata m = WithSnapshots(NewTable(), {1, 2});
  auto next = TableMetadataBuilder::From(m).SetBranchSnapshot(kMainBranch, 1).Build();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->CurrentSnapshot()->snapshot_id, 1);
  ASSERT_EQ(next->snapshot_log.size(), 3u);
  EXPECT_EQ(next->snapshot_log.back().snapshot_id, 1);
  EXPECT_EQ(next->snapshot_log.back().timestamp_ms, next->last_updated_ms);
}

TEST(TableMetadataBuilder, RemoveSnapshotsDropsTheirRefsLogEntriesAndStatistics) {
  TableMetadata m = WithSnapshots(NewTable(), {1, 2, 3});
  m.refs.emplace("v1", SnapshotRef{1, SnapshotRefType::kTag});
  m.refs.emplace("audit", SnapshotRef{2});
  m.raw_json["statistics"] =
      R"([{"snapshot-id":1,"statistics-path":"/s1"},
          {"snapshot-id":3,"statistics-path":"/s3"}])";
  ASSERT_TRUE(m.Validate().ok());

  auto expired = TableMetadataBuilder::From(m).RemoveSnapshots({1, 12345}).Build();
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  EXPECT_EQ(expired->snapshots.size(), 2u);
  EXPECT_EQ(expired->refs.count("v1"), 0u);
  EXPECT_EQ(expired->refs.count("audit"), 1u);
  ASSERT_EQ(expired->snapshot_log.size(), 2u);
  EXPECT_EQ(expired->snapshot_log[0].snapshot_id, 2);
  EXPECT_EQ(json::parse(expired->raw_json.at("statistics")),
            json::parse(R"([{"snapshot-id":3,"statistics-path":"/s3"}])"));
  // Snapshot 2's parent is gone: its ancestry ends with it.
  EXPECT_EQ(expired->SnapshotsAncestryOf(3).size(), 2u);

  // Removing a snapshot in the middle of the log drops the history before it too.
  TableMetadata rolled = WithSnapshots(NewTable(), {1, 2, 3});
  auto middle = TableMetadataBuilder::From(rolled).RemoveSnapshots({2}).Build();
  ASSERT_TRUE(middle.ok()) << middle.status().ToString();
  EXPECT_EQ(middle->snapshot_log,
            (std::vector<SnapshotLogEntry>{rolled.snapshot_log[2]}));

  // Removing the current snapshot leaves none.
  auto current = TableMetadataBuilder::From(rolled).RemoveSnapshots({3}).Build();
  ASSERT_TRUE(current.ok()) << current.status().ToString();
  EXPECT_FALSE(current->current_snapshot_id.has_value());
  EXPECT_EQ(current->refs.count("main"), 0u);
  EXPECT_EQ(ToJson(*current)["current-snapshot-id"], -1);
}

// ---- Schemas, specs, sort orders, properties --------------------------------------

TEST(TableMetadataBuilder, AddSchemaAssignsTheNextIdOrReusesAnIdenticalSchema) {
  const TableMetadata m = NewTable();
  auto evolved =
      AddColumn(*m.CurrentSchema(), m.last_column_id, "", "note", Type::String());
  ASSERT_TRUE(evolved.ok());
  TableMetadataBuilder builder = TableMetadataBuilder::From(m);
  builder.AddSchema(evolved->schema).SetCurrentSchema(kLastAdded);
  EXPECT_EQ(builder.last_added_schema_id(), 1);
  builder.AddSchema(m.CurrentSchema()->WithSchemaId(42));
  EXPECT_EQ(builder.last_added_schema_id(), 0);  // identical to schema 0
  auto next = builder.Build();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->schemas.size(), 2u);
  EXPECT_EQ(next->current_schema_id, 1);
  EXPECT_EQ(next->last_column_id, 3);
  EXPECT_NE(next->CurrentSchema()->FindField("note"), nullptr);
}

TEST(TableMetadataBuilder, SetCurrentSchemaKeepsTheDefaultSpecValid) {
  auto schema = Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                 NestedField::Optional(2, "ts", Type::TimestampTz())});
  ASSERT_TRUE(schema.ok());
  auto spec = PartitionSpecBuilder(*schema).Day("ts").Build();
  ASSERT_TRUE(spec.ok());
  auto m = TableMetadataBuilder::NewTable(*schema, *spec, SortOrder::Unsorted(), "/w/t")
               .Build();
  ASSERT_TRUE(m.ok());
  auto without_ts = DeleteColumn(*m->CurrentSchema(), m->last_column_id, "ts");
  ASSERT_TRUE(without_ts.ok());
  auto next = TableMetadataBuilder::From(*m)
                  .AddSchema(without_ts->schema)
                  .SetCurrentSchema(kLastAdded)
                  .Build();
  ASSERT_TRUE(next.status().IsInvalid());
  EXPECT_TRUE(Contains(next.status(), "default partition spec"));
}

TEST(TableMetadataBuilder, AddsSpecsAndSortOrdersWithNextIdsAndReusesEqualOnes) {
  const TableMetadata m = NewTable();
  auto spec = PartitionSpecBuilder(*m.CurrentSchema(), 0, m.last_partition_id)
                  .Bucket("id", 8)
                  .Build();
  ASSERT_TRUE(spec.ok());
  SortOrder order{0, {SortField{Transform::Identity(), 1}}};
  TableMetadataBuilder builder = TableMetadataBuilder::From(m);
  builder.AddPartitionSpec(*spec).SetDefaultSpec(kLastAdded);
  builder.AddSortOrder(order).SetDefaultSortOrder(kLastAdded);
  EXPECT_EQ(builder.last_added_spec_id(), 1);
  EXPECT_EQ(builder.last_added_sort_order_id(), 1);
  builder.AddPartitionSpec(PartitionSpec{});
  EXPECT_EQ(builder.last_added_spec_id(), 0);
  builder.AddSortOrder(order);
  EXPECT_EQ(builder.last_added_sort_order_id(), 1);
  auto next = builder.Build();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->default_spec_id, 1);
  EXPECT_EQ(next->last_partition_id, 1000);
  EXPECT_EQ(next->DefaultSpec()->fields[0].name, "id_bucket");
  EXPECT_EQ(next->default_sort_order_id, 1);
  EXPECT_EQ(next->sort_orders.size(), 2u);

  auto bad =
      TableMetadataBuilder::From(m)
          .AddPartitionSpec(PartitionSpec{0, {{2, 1000, "x", Transform::Truncate(2)}}})
          .Build();
  EXPECT_TRUE(Contains(bad.status(), "invalid partition spec"));
}

TEST(TableMetadataBuilder, SetsAndRemovesProperties) {
  auto next = TableMetadataBuilder::From(NewTable())
                  .SetProperties({{"a", "1"}, {"b", "2"}})
                  .SetProperties({{"a", "3"}})
                  .RemoveProperties({"b", "never-set"})
                  .Build();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->properties, (std::map<std::string, std::string>{{"a", "3"}}));
}

// ---- metadata-log ----------------------------------------------------------------

TEST(TableMetadataBuilder, BuildAppendsThePreviousFileAndTrimsTheMetadataLog) {
  TableMetadata m = NewTable();
  m = *TableMetadataBuilder::From(m)
           .SetProperties({{kMetadataPreviousVersionsMax, "3"}})
           .Build();
  std::vector<int64_t> timestamps;
  for (int i = 0; i < 5; ++i) {
    timestamps.push_back(m.last_updated_ms);
    auto next = TableMetadataBuilder::From(m).Build("/w/t/metadata/" + std::to_string(i));
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    EXPECT_GE(next->last_updated_ms, m.last_updated_ms);
    m = *next;
  }
  EXPECT_EQ(m.metadata_log,
            (std::vector<MetadataLogEntry>{{timestamps[2], "/w/t/metadata/2"},
                                           {timestamps[3], "/w/t/metadata/3"},
                                           {timestamps[4], "/w/t/metadata/4"}}));
}

TEST(TableMetadataBuilder, MetadataLogKeepsAHundredEntriesByDefault) {
  TableMetadata m = NewTable();
  for (int i = 0; i < 105; ++i) {
    m = *TableMetadataBuilder::From(m).Build("/w/t/metadata/" + std::to_string(i));
  }
  ASSERT_EQ(m.metadata_log.size(), 100u);
  EXPECT_EQ(m.metadata_log.front().metadata_file, "/w/t/metadata/5");
  EXPECT_EQ(m.metadata_log.back().metadata_file, "/w/t/metadata/104");

  m.properties[kMetadataPreviousVersionsMax] = "many";
  EXPECT_TRUE(TableMetadataBuilder::From(m).Build("/x").status().IsInvalid());
}

// ---- File names and uuids --------------------------------------------------------

TEST(MetadataFileLocation, CountsUpFromThePreviousFileAsJavaAndPyIcebergDo) {
  TableMetadata m = NewTable();
  const std::regex first(R"(/w/t/metadata/00000-[0-9a-f-]{36}\.metadata\.json)");
  EXPECT_TRUE(std::regex_match(NewMetadataFileLocation(m, ""), first));
  const std::string previous =
      "/w/t/metadata/00041-9c12d441-03fe-4693-9a96-a0705ddf69c1.metadata.json";
  EXPECT_EQ(ParseMetadataFileVersion(previous), 41);
  const std::string next = NewMetadataFileLocation(m, previous);
  EXPECT_TRUE(next.starts_with("/w/t/metadata/00042-")) << next;
  EXPECT_EQ(ParseMetadataFileVersion(next), 42);
  // Names another tool gave are not an error: numbering restarts.
  EXPECT_TRUE(NewMetadataFileLocation(m, "/w/t/metadata/v3.metadata.json")
                  .starts_with("/w/t/metadata/00000-"));
  m.properties[kWriteMetadataPath] = "s3://b/meta/";
  EXPECT_TRUE(NewMetadataFileLocation(m, previous).starts_with("s3://b/meta/00042-"));
}

TEST(MetadataFileLocation, ParsesOnlyVersionDashNameMetadataJson) {
  EXPECT_EQ(ParseMetadataFileVersion("123456-x.metadata.json"), 123456);
  EXPECT_EQ(ParseMetadataFileVersion("s3://b/t/metadata/00007-a.gz.metadata.json"), 7);
  EXPECT_EQ(ParseMetadataFileVersion("/t/metadata/00007-a.avro"), std::nullopt);
  EXPECT_EQ(ParseMetadataFileVersion("/t/metadata/abc-a.metadata.json"), std::nullopt);
  EXPECT_EQ(ParseMetadataFileVersion("/t/metadata/-a.metadata.json"), std::nullopt);
  EXPECT_EQ(ParseMetadataFileVersion("/t/v1.metadata.json"), std::nullopt);
}

TEST(GenerateUuidV4, GivesDistinctVersion4Uuids) {
  const std::regex v4(
      R"([0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})");
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string uuid = GenerateUuidV4();
    EXPECT_TRUE(std::regex_match(uuid, v4)) << uuid;
    seen.insert(uuid);
  }
  EXPECT_EQ(seen.size(), 100u);
}

}  // namespace
}  // namespace floe::iceberg
