#include "floe/iceberg/rest_updates.h"
#include "floe/iceberg/rest_http.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace floe::iceberg {
namespace {

using json = nlohmann::json;

TableMetadata NewTable() {
  auto schema = Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                 NestedField::Optional(2, "v", Type::String())});
  EXPECT_TRUE(schema.ok());
  auto m = TableMetadataBuilder::NewTable(*schema, PartitionSpec{}, SortOrder::Unsorted(),
                                          "s3://b/w/t", {{"owner", "floe"}})
               .Build();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

Snapshot MakeSnapshot(const TableMetadata& m, int64_t id) {
  return Snapshot{
      .snapshot_id = id,
      .parent_snapshot_id = m.current_snapshot_id,
      .sequence_number = m.last_sequence_number + 1,
      .timestamp_ms = m.last_updated_ms + 10,
      .manifest_list = "s3://b/w/t/metadata/snap-" + std::to_string(id) + ".avro",
      .operation = "append",
      .summary = {{"floe.commit-lsn", std::to_string(id * 100)}},
      .schema_id = m.current_schema_id};
}

TableMetadata Append(const TableMetadata& m, int64_t id) {
  auto next = TableMetadataBuilder::From(m)
                  .AddSnapshot(MakeSnapshot(m, id))
                  .SetBranchSnapshot(kMainBranch, id)
                  .Build("s3://b/w/t/metadata/00000-x.metadata.json");
  EXPECT_TRUE(next.ok()) << next.status().ToString();
  return *next;
}

std::vector<std::string> Actions(const json& request) {
  std::vector<std::string> out;
  for (const json& u : request["updates"]) out.push_back(u["action"]);
  return out;
}

const json* Requirement(const json& request, const std::string& type) {
  for (const json& r : request["requirements"]) {
    if (r["type"] == type) return &r;
  }
  return nullptr;
}

TEST(RestUpdates, ACreateTableRequestCarriesTheFirstMetadatasLayout) {
  const TableMetadata m = NewTable();
  auto request = CreateTableRequest("t", m);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  const json& r = *request;
  EXPECT_EQ(r["name"], "t");
  EXPECT_EQ(r["location"], "s3://b/w/t");
  EXPECT_EQ(r["stage-create"], false);
  EXPECT_EQ(r["properties"]["owner"], "floe");
  ASSERT_EQ(r["schema"]["fields"].size(), 2u);
  EXPECT_EQ(r["schema"]["fields"][0]["id"], 1);
  EXPECT_EQ(r["schema"]["fields"][1]["name"], "v");
  EXPECT_EQ(r["partition-spec"]["fields"].size(), 0u);
  EXPECT_EQ(r["write-order"]["order-id"], 0);
}

TEST(RestUpdates, AnAppendIsAddSnapshotThenTheBranchAssertingItsOldHead) {
  const TableMetadata base = NewTable();
  const TableMetadata first = Append(base, 11);
  auto request = TableCommitRequest(base, first);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(Actions(*request),
            (std::vector<std::string>{"add-snapshot", "set-snapshot-ref"}));
  const json& add = (*request)["updates"][0];
  EXPECT_EQ(add["snapshot"]["snapshot-id"], 11);
  EXPECT_EQ(add["snapshot"]["summary"]["floe.commit-lsn"], "1100");
  EXPECT_EQ(add["snapshot"]["summary"]["operation"], "append");
  const json& ref = (*request)["updates"][1];
  EXPECT_EQ(ref["ref-name"], "main");
  EXPECT_EQ(ref["snapshot-id"], 11);
  EXPECT_EQ(ref["type"], "branch");
  ASSERT_NE(Requirement(*request, "assert-table-uuid"), nullptr);
  EXPECT_EQ((*Requirement(*request, "assert-table-uuid"))["uuid"], base.table_uuid);
  // A table without snapshots: main must still be absent.
  const json* main = Requirement(*request, "assert-ref-snapshot-id");
  ASSERT_NE(main, nullptr);
  EXPECT_TRUE((*main)["snapshot-id"].is_null());

  const TableMetadata second = Append(first, 12);
  request = TableCommitRequest(first, second);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ((*Requirement(*request, "assert-ref-snapshot-id"))["snapshot-id"], 11);
  EXPECT_EQ((*request)["updates"].size(), 2u);
}

TEST(RestUpdates, SchemaSpecAndPropertyChangesAssertWhatTheyBuildOn) {
  const TableMetadata base = NewTable();
  auto wider = Schema::Make(0, {NestedField::Required(1, "id", Type::Long()),
                                NestedField::Optional(2, "v", Type::String()),
                                NestedField::Optional(3, "w", Type::Int())});
  ASSERT_TRUE(wider.ok());
  PartitionSpec spec;
  spec.fields.push_back(PartitionField{.source_id = 1,
                                       .field_id = 1000,
                                       .name = "id_bucket",
                                       .transform = Transform::Bucket(8)});
  auto next = TableMetadataBuilder::From(base)
                  .AddSchema(*wider)
                  .SetCurrentSchema(kLastAdded)
                  .AddPartitionSpec(spec)
                  .SetDefaultSpec(kLastAdded)
                  .SetProperties({{"floe.keys", "id"}})
                  .RemoveProperties({"owner"})
                  .Build("s3://b/w/t/metadata/00000-x.metadata.json");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  auto request = TableCommitRequest(base, *next);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(Actions(*request),
            (std::vector<std::string>{"add-schema", "set-current-schema", "add-spec",
                                      "set-default-spec", "set-properties",
                                      "remove-properties"}));
  const json& updates = (*request)["updates"];
  EXPECT_EQ(updates[0]["schema"]["fields"].size(), 3u);
  EXPECT_EQ(updates[0]["last-column-id"], 3);
  EXPECT_EQ(updates[1]["schema-id"], -1);  // the one just added, however numbered
  EXPECT_EQ(updates[2]["spec"]["fields"][0]["transform"], "bucket[8]");
  EXPECT_EQ(updates[3]["spec-id"], -1);
  EXPECT_EQ(updates[4]["updates"], (json{{"floe.keys", "id"}}));
  EXPECT_EQ(updates[5]["removals"], (json{"owner"}));
  EXPECT_EQ(
      (*Requirement(*request, "assert-last-assigned-field-id"))["last-assigned-field-id"],
      2);
  EXPECT_EQ((*Requirement(*request, "assert-current-schema-id"))["current-schema-id"], 0);
  EXPECT_EQ(
      (*Requirement(*request,
                    "assert-last-assigned-partition-id"))["last-assigned-partition-id"],
      999);
  EXPECT_EQ((*Requirement(*request, "assert-default-spec-id"))["default-spec-id"], 0);
  EXPECT_EQ(Requirement(*request, "assert-ref-snapshot-id"), nullptr);
}

TEST(RestUpdates, ExpiryRemovesSnapshotsWithoutMovingABranch) {
  const TableMetadata m = Append(Append(Append(NewTable(), 1), 2), 3);
  auto expired = TableMetadataBuilder::From(m).RemoveSnapshots({1, 2}).Build(
      "s3://b/w/t/metadata/00003-x.metadata.json");
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  auto request = TableCommitRequest(m, *expired);
  ASSERT_TRUE(request.ok());
  EXPECT_EQ(Actions(*request), (std::vector<std::string>{"remove-snapshots"}));
  EXPECT_EQ((*request)["updates"][0]["snapshot-ids"], (json{1, 2}));
}

TEST(RestUpdates, HoldsChangesTellsAnAppliedCommitFromOneThatWasNot) {
  const TableMetadata base = Append(NewTable(), 1);
  const TableMetadata next = Append(base, 2);
  EXPECT_FALSE(*HoldsChanges(base, next));
  EXPECT_TRUE(*HoldsChanges(next, next));
  // What a server wrote differs in its own bookkeeping (the metadata log, the time of
  // the update): the changes are still held.
  TableMetadata written = next;
  written.metadata_log.push_back(
      {next.last_updated_ms, "s3://b/w/t/metadata/00002-y.json"});
  written.last_updated_ms += 5;
  EXPECT_TRUE(*HoldsChanges(written, next));
  auto property = TableMetadataBuilder::From(base).SetProperties({{"k", "v"}}).Build();
  ASSERT_TRUE(property.ok());
  EXPECT_FALSE(*HoldsChanges(base, *property));
  EXPECT_TRUE(*HoldsChanges(*property, *property));
}

TEST(RestUpdates, AnotherTableIsRefused) {
  const TableMetadata a = NewTable();
  const TableMetadata b = NewTable();
  EXPECT_TRUE(TableCommitRequest(a, b).status().IsInvalid());
}

TEST(RestConfig, ThePrefixOverridesWinAndTheRestIsNamedNotApplied) {
  const auto config = nlohmann::json::parse(R"({
    "defaults": {"prefix": "ignored", "s3.endpoint": "http://minio:9000",
                 "s3.secret-access-key": "never-printed"},
    "overrides": {"prefix": "cat/a b", "s3.path-style-access": true},
    "endpoints": ["GET /v1/config", "POST /v1/{prefix}/namespaces/{namespace}/tables"]
  })");
  const CatalogConfig read = ReadCatalogConfig(config);
  // A space cannot stand in a request path (break-it: sent raw, the server answered
  // 400); '/' and escapes the server wrote stay.
  EXPECT_EQ(read.prefix, "cat/a%20b");
  EXPECT_EQ(read.unused,
            (std::vector<std::string>{"defaults s3.endpoint=http://minio:9000",
                                      "defaults s3.secret-access-key",
                                      "overrides s3.path-style-access=true"}));
  EXPECT_TRUE(read.create_tables);
  EXPECT_EQ(ReadCatalogConfig(nlohmann::json::parse(
                                  R"({"overrides": {"prefix": "a%2Fb"}, "endpoints": [
                                      "POST /v1/{prefix}/namespaces/{namespace}/tables",
                                      "POST /v1/{prefix}/namespaces/{namespace}/register"]})"))
                .prefix,
            "a%2Fb");
  EXPECT_FALSE(ReadCatalogConfig(nlohmann::json::parse(R"({"endpoints": [
      "POST /v1/{prefix}/namespaces/{namespace}/tables",
      "POST /v1/{prefix}/namespaces/{namespace}/register"]})"))
                   .create_tables);
  // No endpoints listed: register, as every server did before the list.
  EXPECT_FALSE(ReadCatalogConfig(nlohmann::json::object()).create_tables);
  EXPECT_EQ(ReadCatalogConfig(nlohmann::json::object()).prefix, "");
}

}  // namespace
}  // namespace floe::iceberg
