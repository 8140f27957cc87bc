#include "floe/iceberg/schema.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/memory.h>
#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>
#include <parquet/file_reader.h>
#include <parquet/schema.h>
#include <nlohmann/json.hpp>

#include "floe/iceberg/parquet_writer.h"

namespace floe::iceberg {
namespace {

using nlohmann::json;

// Every v2 type, nested ones included, with field ids 1..19.
Schema SampleSchema() {
  auto point = Type::Struct({NestedField::Required(6, "x", Type::Double()),
                             NestedField::Optional(7, "y", Type::Float())});
  auto meta = Type::Struct({
      NestedField::Required(12, "created", Type::TimestampTz()),
      NestedField::Optional(13, "day", Type::Date()),
      NestedField::Optional(14, "at", Type::Time()),
      NestedField::Optional(15, "ts", Type::Timestamp()),
      NestedField::Optional(16, "flag", Type::Boolean()),
      NestedField::Optional(17, "key", Type::Uuid()),
      NestedField::Optional(18, "raw", Type::Binary()),
      NestedField::Optional(19, "digest", Type::Fixed(16)),
  });
  auto schema = Schema::Make(
      3,
      {
          NestedField::Required(1, "id", Type::Long()),
          NestedField::Optional(2, "data", Type::String(), "free text"),
          NestedField::Optional(3, "price", Type::Decimal(9, 2)),
          NestedField::Optional(4, "points", Type::List(5, point, true)),
          NestedField::Optional(8, "props",
                                Type::Map(9, Type::String(), 10, Type::Int(), false)),
          NestedField::Optional(11, "meta", meta),
          NestedField::Optional(20, "count", Type::Int()),
      },
      {1});
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  return *schema;
}

// The same schema as the spec's Appendix C writes it.
constexpr const char* kSampleJson = R"json({
  "type": "struct",
  "schema-id": 3,
  "identifier-field-ids": [1],
  "fields": [
    {"id": 1, "name": "id", "required": true, "type": "long"},
    {"id": 2, "name": "data", "required": false, "type": "string", "doc": "free text"},
    {"id": 3, "name": "price", "required": false, "type": "decimal(9,2)"},
    {"id": 4, "name": "points", "required": false, "type": {
      "type": "list", "element-id": 5, "element-required": true, "element": {
        "type": "struct", "fields": [
          {"id": 6, "name": "x", "required": true, "type": "double"},
          {"id": 7, "name": "y", "required": false, "type": "float"}]}}},
    {"id": 8, "name": "props", "required": false, "type": {
      "type": "map", "key-id": 9, "key": "string",
      "value-id": 10, "value": "int", "value-required": false}},
    {"id": 11, "name": "meta", "required": false, "type": {
      "type": "struct", "fields": [
        {"id": 12, "name": "created", "required": true, "type": "timestamptz"},
        {"id": 13, "name": "day", "required": false, "type": "date"},
        {"id": 14, "name": "at", "required": false, "type": "time"},
        {"id": 15, "name": "ts", "required": false, "type": "timestamp"},
        {"id": 16, "name": "flag", "required": false, "type": "boolean"},
        {"id": 17, "name": "key", "required": false, "type": "uuid"},
        {"id": 18, "name": "raw", "required": false, "type": "binary"},
        {"id": 19, "name": "digest", "required": false, "type": "fixed[16]"}]}},
    {"id": 20, "name": "count", "required": false, "type": "int"}
  ]
})json";

template <typename T>
T ValueOrDie(arrow::Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).ValueOrDie();
}

// ---- types -----------------------------------------------------------------------

TEST(Type, PrimitiveNamesRoundTripThroughTheirSpecStrings) {
  for (const char* name : {"boolean", "int", "long", "float", "double", "date", "time",
                           "timestamp", "timestamptz", "string", "uuid", "binary",
                           "decimal(9,2)", "decimal(38,0)", "fixed[16]", "fixed[1]"}) {
    auto type = Type::FromPrimitiveString(name);
    ASSERT_TRUE(type.ok()) << name << ": " << type.status().ToString();
    EXPECT_EQ((*type)->ToString(), name);
    EXPECT_TRUE((*type)->is_primitive());
  }
}

TEST(Type, DecimalAcceptsSpacesAsTheSpecExampleShows) {
  auto type = ValueOrDie(Type::FromPrimitiveString("decimal(9, 2)"));
  EXPECT_EQ(type->id(), TypeId::kDecimal);
  EXPECT_EQ(type->precision(), 9);
  EXPECT_EQ(type->scale(), 2);
}

TEST(Type, RejectsUnknownMalformedAndV3Types) {
  for (const char* name :
       {"integer", "decimal(9)", "decimal(39,2)", "decimal(5,6)", "decimal(a,b)",
        "fixed[0]", "fixed[]", "fixed[16", "Long", "struct"}) {
    EXPECT_TRUE(Type::FromPrimitiveString(name).status().IsInvalid()) << name;
  }
  for (const char* name :
       {"timestamp_ns", "timestamptz_ns", "variant", "unknown", "geometry(srid:4326)"}) {
    auto status = Type::FromPrimitiveString(name).status();
    EXPECT_TRUE(status.IsNotImplemented()) << name;
    EXPECT_NE(status.message().find("v3"), std::string::npos) << status.ToString();
  }
}

TEST(Type, EqualityComparesNestedIdsNamesAndRequiredFlags) {
  EXPECT_EQ(*Type::Decimal(9, 2), *Type::Decimal(9, 2));
  EXPECT_FALSE(*Type::Decimal(9, 2) == *Type::Decimal(9, 3));
  EXPECT_FALSE(*Type::Fixed(4) == *Type::Fixed(5));
  EXPECT_EQ(*Type::List(1, Type::Int(), true), *Type::List(1, Type::Int(), true));
  EXPECT_FALSE(*Type::List(1, Type::Int(), true) == *Type::List(2, Type::Int(), true));
  EXPECT_FALSE(*Type::List(1, Type::Int(), true) == *Type::List(1, Type::Int(), false));
  EXPECT_FALSE(*Type::Struct({NestedField::Optional(1, "a", Type::Int())}) ==
               *Type::Struct({NestedField::Optional(1, "b", Type::Int())}));
}

// ---- schema ----------------------------------------------------------------------

TEST(Schema, FindsFieldsByIdAndByFullDottedName) {
  const Schema schema = SampleSchema();
  EXPECT_EQ(schema.schema_id(), 3);
  EXPECT_EQ(schema.highest_field_id(), 20);
  EXPECT_EQ(schema.FindField("id")->id, 1);
  EXPECT_EQ(schema.FindField("points.element")->id, 5);
  EXPECT_EQ(schema.FindField("points.element.y")->id, 7);
  EXPECT_EQ(schema.FindField("props.key")->id, 9);
  EXPECT_EQ(schema.FindField("props.value")->id, 10);
  EXPECT_EQ(schema.FindField("meta.digest")->type->ToString(), "fixed[16]");
  EXPECT_EQ(schema.FindField("nope"), nullptr);
  EXPECT_EQ(schema.FindField("meta.nope"), nullptr);
  EXPECT_EQ(schema.FindField("ID"), nullptr);  // case-sensitive
  EXPECT_EQ(schema.FindField(13)->name, "day");
  EXPECT_EQ(schema.FindField(99), nullptr);
  EXPECT_EQ(schema.FindColumnName(6), "points.element.x");
  EXPECT_EQ(schema.FindColumnName(99), std::nullopt);
  EXPECT_EQ(schema.FindParentId(6), 5);
  EXPECT_EQ(schema.FindParentId(5), 4);
  EXPECT_EQ(schema.FindParentId(4), std::nullopt);
}

TEST(Schema, FieldPointersStayValidInCopies) {
  const NestedField* field = nullptr;
  Schema copy = [&] {
    Schema original = SampleSchema();
    Schema c = original;
    return c;
  }();
  field = copy.FindField("meta.created");
  ASSERT_NE(field, nullptr);
  EXPECT_EQ(field->id, 12);
  EXPECT_EQ(copy.WithSchemaId(9).FindField(12)->name, "created");
}

TEST(Schema, EmptySchemaHasHighestIdZero) {
  auto schema = ValueOrDie(Schema::Make(0, {}));
  EXPECT_EQ(schema.highest_field_id(), 0);
  EXPECT_TRUE(schema.fields().empty());
}

TEST(Schema, RejectsDuplicateIdsAndNames) {
  auto dup_id = Schema::Make(0, {NestedField::Optional(1, "a", Type::Int()),
                                 NestedField::Optional(1, "b", Type::Int())});
  ASSERT_FALSE(dup_id.ok());
  EXPECT_NE(dup_id.status().message().find("field id 1 is used twice"), std::string::npos)
      << dup_id.status().ToString();
  auto nested_dup =
      Schema::Make(0, {NestedField::Optional(1, "a", Type::List(1, Type::Int(), true))});
  EXPECT_FALSE(nested_dup.ok());
  auto dup_name = Schema::Make(0, {NestedField::Optional(1, "a", Type::Int()),
                                   NestedField::Optional(2, "a", Type::Long())});
  EXPECT_FALSE(dup_name.ok());
  auto empty_name = Schema::Make(0, {NestedField::Optional(1, "", Type::Int())});
  EXPECT_FALSE(empty_name.ok());
  auto negative = Schema::Make(0, {NestedField::Optional(-1, "a", Type::Int())});
  EXPECT_FALSE(negative.ok());
}

TEST(Schema, IdentifierFieldsMustBeRequiredNonFloatingPrimitivesOutsideListsAndMaps) {
  auto make = [](std::vector<NestedField> fields, std::vector<int32_t> ids) {
    return Schema::Make(0, std::move(fields), std::move(ids)).status();
  };
  EXPECT_TRUE(make({NestedField::Required(1, "k", Type::String())}, {1}).ok());
  EXPECT_FALSE(make({NestedField::Optional(1, "k", Type::String())}, {1}).ok());
  EXPECT_FALSE(make({NestedField::Required(1, "k", Type::Double())}, {1}).ok());
  EXPECT_FALSE(make({NestedField::Required(1, "k", Type::Float())}, {1}).ok());
  EXPECT_FALSE(make({NestedField::Required(1, "k", Type::String())}, {2}).ok());
  EXPECT_FALSE(make({NestedField::Required(1, "k", Type::String())}, {1, 1}).ok());
  EXPECT_FALSE(
      make({NestedField::Required(1, "k", Type::List(2, Type::Int(), true))}, {1}).ok());
  EXPECT_FALSE(
      make({NestedField::Required(1, "k", Type::List(2, Type::Int(), true))}, {2}).ok());
  auto inner = Type::Struct({NestedField::Required(2, "id", Type::Int())});
  EXPECT_TRUE(make({NestedField::Required(1, "s", inner)}, {2}).ok());
  auto status = make({NestedField::Optional(1, "s", inner)}, {2});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("optional struct 's'"), std::string::npos)
      << status.ToString();
}

// ---- JSON ------------------------------------------------------------------------

TEST(SchemaJson, WritesExactlyTheSpecsAppendixCForm) {
  EXPECT_EQ(SchemaToJson(SampleSchema()), json::parse(kSampleJson));
}

TEST(SchemaJson, ParsesTheSpecsFormBackToTheSameSchema) {
  auto parsed = ValueOrDie(SchemaFromJsonString(kSampleJson));
  EXPECT_EQ(parsed, SampleSchema()) << parsed.ToString();
  EXPECT_EQ(parsed.FindField("data")->doc, "free text");
  EXPECT_EQ(SchemaToJson(parsed), json::parse(kSampleJson));
}

TEST(SchemaJson, ParsesTheSpecsListAndMapExamples) {
  auto list = ValueOrDie(TypeFromJson(json::parse(
      R"json({"type": "list", "element-id": 3, "element-required": true,
          "element": "string"})json")));
  EXPECT_EQ(*list, *Type::List(3, Type::String(), true));
  auto map = ValueOrDie(TypeFromJson(json::parse(
      R"json({"type": "map", "key-id": 4, "key": "string", "value-id": 5,
          "value-required": false, "value": "double"})json")));
  EXPECT_EQ(*map, *Type::Map(4, Type::String(), 5, Type::Double(), false));
}

TEST(SchemaJson, MissingSchemaIdAndIdentifiersReadAsDefaults) {
  auto schema = ValueOrDie(SchemaFromJsonString(
      R"json({"type": "struct", "fields": [
            {"id": 1, "name": "a", "required": false, "type": "decimal(9, 2)"}]})json"));
  EXPECT_EQ(schema.schema_id(), 0);
  EXPECT_TRUE(schema.identifier_field_ids().empty());
  EXPECT_EQ(schema.FindField(1)->type->ToString(), "decimal(9,2)");
  // No identifiers: no key written.
  EXPECT_FALSE(SchemaToJson(schema).contains("identifier-field-ids"));
}

TEST(SchemaJson, RejectsMalformedDocumentsWithAClearError) {
  const char* bad[] = {
      "not json",
      "[]",
      R"json({"type": "struct"})json",
      R"json({"type": "list", "fields": []})json",
      R"json({"type": "struct", "fields": [{"id": 1, "name": "a", "type": "int"}]})json",
      R"json({"type": "struct", "fields": [{"id": "1", "name": "a", "required": true,
          "type": "int"}]})json",
      R"json({"type": "struct", "fields": [{"id": 1, "name": "a", "required": true,
          "type": "integer"}]})json",
      R"json({"type": "struct", "fields": [{"id": 1, "name": "a", "required": true,
          "type": {"type": "list", "element-id": 2, "element": "int"}}]})json",
      R"json({"type": "struct", "fields": [{"id": 4294967297, "name": "a",
          "required": true, "type": "int"}]})json",
      R"json({"type": "struct", "identifier-field-ids": [7], "fields": []})json",
      R"json({"type": "struct", "fields": [{"id": 1, "name": "a", "required": true,
          "type": {"type": "map", "key-id": 2, "key": "int", "value-id": 2,
                   "value": "int", "value-required": true}}]})json",
  };
  for (const char* text : bad) {
    auto result = SchemaFromJsonString(text);
    EXPECT_FALSE(result.ok()) << text;
  }
  auto missing = SchemaFromJsonString(
      R"json({"type": "struct", "fields": [{"id": 1, "name": "a", "type": "int"}]})json");
  EXPECT_NE(missing.status().message().find("'required'"), std::string::npos)
      << missing.status().ToString();
}

// ---- Arrow -----------------------------------------------------------------------

int FieldIdOf(const arrow::Field& field) {
  auto md = field.metadata();
  if (!md) return -1;
  auto value = md->Get(std::string(kParquetFieldIdKey));
  return value.ok() ? std::stoi(*value) : -1;
}

TEST(ArrowSchema, MapsEveryTypeAndCarriesFieldIds) {
  auto arrow_schema = ValueOrDie(ToArrowSchema(SampleSchema()));
  ASSERT_EQ(arrow_schema->num_fields(), 7);
  const auto& id = arrow_schema->field(0);
  EXPECT_EQ(id->type()->ToString(), "int64");
  EXPECT_FALSE(id->nullable());
  EXPECT_EQ(FieldIdOf(*id), 1);
  EXPECT_TRUE(arrow_schema->field(1)->nullable());
  EXPECT_TRUE(arrow_schema->field(2)->type()->Equals(arrow::decimal128(9, 2)));

  const auto& points = arrow_schema->field(3);
  ASSERT_EQ(points->type()->id(), arrow::Type::LIST);
  const auto& element = points->type()->field(0);
  EXPECT_EQ(FieldIdOf(*element), 5);
  EXPECT_FALSE(element->nullable());
  EXPECT_EQ(FieldIdOf(*element->type()->field(0)), 6);
  EXPECT_TRUE(element->type()->field(1)->type()->Equals(arrow::float32()));

  const auto& props = arrow_schema->field(4);
  ASSERT_EQ(props->type()->id(), arrow::Type::MAP);
  const auto& map_type = static_cast<const arrow::MapType&>(*props->type());
  EXPECT_EQ(FieldIdOf(*map_type.key_field()), 9);
  EXPECT_EQ(FieldIdOf(*map_type.item_field()), 10);
  EXPECT_TRUE(map_type.item_field()->nullable());

  const auto& meta = arrow_schema->field(5)->type();
  EXPECT_TRUE(
      meta->field(0)->type()->Equals(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")));
  EXPECT_FALSE(meta->field(0)->nullable());
  EXPECT_TRUE(meta->field(1)->type()->Equals(arrow::date32()));
  EXPECT_TRUE(meta->field(2)->type()->Equals(arrow::time64(arrow::TimeUnit::MICRO)));
  EXPECT_TRUE(meta->field(3)->type()->Equals(arrow::timestamp(arrow::TimeUnit::MICRO)));
  EXPECT_TRUE(meta->field(4)->type()->Equals(arrow::boolean()));
  EXPECT_TRUE(meta->field(5)->type()->Equals(arrow::fixed_size_binary(16)));
  EXPECT_TRUE(meta->field(6)->type()->Equals(arrow::binary()));
  EXPECT_TRUE(meta->field(7)->type()->Equals(arrow::fixed_size_binary(16)));
  EXPECT_EQ(FieldIdOf(*meta->field(7)), 19);
  EXPECT_EQ(FieldIdOf(*arrow_schema->field(6)), 20);
}

// Writes an empty Parquet file with the Arrow form of `schema` and returns the
// field id of every leaf column, keyed by dotted Parquet path.
std::map<std::string, int> WrittenLeafIds(const Schema& schema) {
  auto arrow_schema = ValueOrDie(ToArrowSchema(schema));
  auto sink = ValueOrDie(arrow::io::BufferOutputStream::Create());
  auto writer = ValueOrDie(ParquetFileWriter::Open(sink, arrow_schema));
  EXPECT_TRUE(writer->Close().ok());
  auto buffer = ValueOrDie(sink->Finish());
  auto reader =
      parquet::ParquetFileReader::Open(std::make_shared<arrow::io::BufferReader>(buffer));
  std::map<std::string, int> ids;
  const parquet::SchemaDescriptor* descr = reader->metadata()->schema();
  for (int i = 0; i < descr->num_columns(); ++i) {
    ids[descr->Column(i)->path()->ToDotString()] =
        descr->Column(i)->schema_node()->field_id();
  }
  return ids;
}

TEST(ArrowSchema, ParquetFileWriterWritesItWithTheIcebergFieldIds) {
  auto point = Type::Struct({NestedField::Required(6, "x", Type::Double()),
                             NestedField::Optional(7, "y", Type::Float())});
  auto schema = ValueOrDie(Schema::Make(
      0, {NestedField::Required(1, "id", Type::Long()),
          NestedField::Optional(2, "price", Type::Decimal(9, 2)),
          NestedField::Optional(3, "at", Type::TimestampTz()),
          NestedField::Optional(4, "key", Type::Uuid()),
          NestedField::Optional(5, "points", Type::List(8, point, true)),
          NestedField::Optional(
              9, "props", Type::Map(10, Type::String(), 11, Type::Long(), false))}));
  auto ids = WrittenLeafIds(schema);
  EXPECT_EQ(ids["id"], 1);
  EXPECT_EQ(ids["price"], 2);
  EXPECT_EQ(ids["at"], 3);
  EXPECT_EQ(ids["key"], 4);
  EXPECT_EQ(ids["points.list.element.x"], 6);
  EXPECT_EQ(ids["points.list.element.y"], 7);
  EXPECT_EQ(ids["props.key_value.key"], 10);
  EXPECT_EQ(ids["props.key_value.value"], 11);
  EXPECT_EQ(ids.size(), 8u);
}

// ---- evolution -------------------------------------------------------------------

TEST(SchemaEvolution, AddColumnTakesTheNextIdAndIsOptional) {
  const Schema schema = SampleSchema();
  auto change = ValueOrDie(AddColumn(schema, 20, "", "note", Type::String(), "added"));
  EXPECT_EQ(change.last_column_id, 21);
  const NestedField* f = change.schema.FindField("note");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->id, 21);
  EXPECT_FALSE(f->required);
  EXPECT_EQ(f->doc, "added");
  EXPECT_EQ(change.schema.fields().back().name, "note");
  EXPECT_EQ(change.schema.schema_id(), schema.schema_id());
  EXPECT_EQ(change.schema.identifier_field_ids(), schema.identifier_field_ids());
  // The last column id, not the highest id in use, decides: a dropped column's id is
  // never reused.
  auto after_gap = ValueOrDie(AddColumn(schema, 30, "", "note", Type::String()));
  EXPECT_EQ(after_gap.schema.FindField("note")->id, 31);
  EXPECT_EQ(after_gap.last_column_id, 31);
}

TEST(SchemaEvolution, AddedNestedTypesGetFreshIdsStructFieldsFirst) {
  // The ids inside the given type are placeholders and are replaced.
  auto inner =
      Type::Struct({NestedField::Required(1, "a", Type::Int()),
                    NestedField::Optional(1, "b", Type::List(1, Type::Int(), false))});
  auto type =
      Type::Struct({NestedField::Optional(1, "inner", inner),
                    NestedField::Optional(
                        1, "m", Type::Map(1, Type::String(), 1, Type::Long(), true))});
  auto change = ValueOrDie(AddColumn(SampleSchema(), 20, "", "blob", type));
  const Schema& s = change.schema;
  EXPECT_EQ(s.FindField("blob")->id, 21);
  EXPECT_EQ(s.FindField("blob.inner")->id, 22);
  EXPECT_EQ(s.FindField("blob.m")->id, 23);
  EXPECT_EQ(s.FindField("blob.inner.a")->id, 24);
  EXPECT_EQ(s.FindField("blob.inner.b")->id, 25);
  EXPECT_EQ(s.FindField("blob.inner.b.element")->id, 26);
  EXPECT_EQ(s.FindField("blob.m.key")->id, 27);
  EXPECT_EQ(s.FindField("blob.m.value")->id, 28);
  EXPECT_EQ(change.last_column_id, 28);
  EXPECT_EQ(s.highest_field_id(), 28);
  // Nested required flags are kept; only the new column itself is optional.
  EXPECT_TRUE(s.FindField("blob.inner.a")->required);
  EXPECT_FALSE(s.FindField("blob")->required);
}

TEST(SchemaEvolution, AddColumnInsideAStructAListOfStructsAndAMapValue) {
  auto in_struct =
      ValueOrDie(AddColumn(SampleSchema(), 20, "meta", "extra", Type::Int()));
  EXPECT_EQ(in_struct.schema.FindField("meta.extra")->id, 21);
  EXPECT_EQ(in_struct.schema.FindParentId(21), 11);

  auto in_list = ValueOrDie(AddColumn(SampleSchema(), 20, "points", "z", Type::Double()));
  EXPECT_EQ(in_list.schema.FindField("points.element.z")->id, 21);

  auto map_schema = ValueOrDie(Schema::Make(
      0, {NestedField::Optional(
             1, "m",
             Type::Map(2, Type::String(), 3,
                       Type::Struct({NestedField::Optional(4, "v", Type::Int())}),
                       false))}));
  auto in_map = ValueOrDie(AddColumn(map_schema, 4, "m", "w", Type::Int()));
  EXPECT_EQ(in_map.schema.FindField("m.value.w")->id, 5);
}

TEST(SchemaEvolution, AddColumnRejectsConflictsDotsNonStructParentsAndStaleIds) {
  const Schema schema = SampleSchema();
  auto conflict = AddColumn(schema, 20, "", "data", Type::Int());
  EXPECT_TRUE(conflict.status().IsAlreadyExists()) << conflict.status().ToString();
  EXPECT_FALSE(AddColumn(schema, 20, "meta", "day", Type::Int()).ok());
  // A dot only at the top level, and not the dotted name of a nested field.
  EXPECT_FALSE(AddColumn(schema, 20, "meta", "a.b", Type::Int()).ok());
  EXPECT_TRUE(AddColumn(schema, 20, "", "meta.day", Type::Int()).status().IsAlreadyExists());
  EXPECT_FALSE(AddColumn(schema, 20, "", "", Type::Int()).ok());
  auto not_struct = AddColumn(schema, 20, "props", "x", Type::Int());
  ASSERT_FALSE(not_struct.ok());
  EXPECT_NE(not_struct.status().message().find("not a struct"), std::string::npos);
  EXPECT_TRUE(AddColumn(schema, 20, "nope", "x", Type::Int()).status().IsKeyError());
  EXPECT_FALSE(AddColumn(schema, 19, "", "x", Type::Int()).ok());
}

TEST(SchemaEvolution, RenameKeepsTheIdAndRejectsConflicts) {
  auto renamed = ValueOrDie(RenameColumn(SampleSchema(), 20, "meta.day", "date"));
  EXPECT_EQ(renamed.schema.FindField("meta.date")->id, 13);
  EXPECT_EQ(renamed.schema.FindField("meta.day"), nullptr);
  EXPECT_EQ(renamed.last_column_id, 20);
  auto top = ValueOrDie(RenameColumn(SampleSchema(), 20, "points", "pts"));
  EXPECT_EQ(top.schema.FindField("pts.element.x")->id, 6);

  EXPECT_TRUE(RenameColumn(SampleSchema(), 20, "data", "id").status().IsAlreadyExists());
  EXPECT_FALSE(RenameColumn(SampleSchema(), 20, "points.element", "item").ok());
  EXPECT_FALSE(RenameColumn(SampleSchema(), 20, "meta.day", "a.b").ok());
  EXPECT_FALSE(RenameColumn(SampleSchema(), 20, "data", "meta.day").ok());
  EXPECT_TRUE(RenameColumn(SampleSchema(), 20, "nope", "x").status().IsKeyError());
  EXPECT_TRUE(RenameColumn(SampleSchema(), 20, 999, "x").status().IsKeyError());
}

// A source column may be named `a.b`: a top-level field of that name is added, then
// renamed and promoted by field id (its dotted name would read as a nested path).
TEST(SchemaEvolution, ATopLevelColumnNamedWithADotIsEditedById) {
  auto added = ValueOrDie(AddColumn(SampleSchema(), 20, "", "a.b", Type::Int()));
  EXPECT_EQ(added.last_column_id, 21);
  EXPECT_EQ(added.schema.as_struct()->FindChild("a.b")->id, 21);
  auto promoted = ValueOrDie(UpdateColumnType(added.schema, 21, 21, Type::Long()));
  EXPECT_TRUE(promoted.schema.FindField(21)->type->Equals(*Type::Long()));
  auto renamed = ValueOrDie(RenameColumn(promoted.schema, 21, 21, "c.d"));
  EXPECT_EQ(renamed.schema.FindField(21)->name, "c.d");
  auto back = ValueOrDie(RenameColumn(renamed.schema, 21, 21, "plain"));
  EXPECT_EQ(back.schema.FindField("plain")->id, 21);
}

TEST(SchemaEvolution, DeleteRemovesTheColumnButNeverAnIdentifierField) {
  auto deleted = ValueOrDie(DeleteColumn(SampleSchema(), 20, "points"));
  EXPECT_EQ(deleted.schema.FindField("points"), nullptr);
  EXPECT_EQ(deleted.schema.FindField(6), nullptr);
  EXPECT_EQ(deleted.schema.fields().size(), 6u);
  EXPECT_EQ(deleted.last_column_id, 20);  // ids are never reused
  auto nested = ValueOrDie(DeleteColumn(SampleSchema(), 20, "meta.raw"));
  EXPECT_EQ(nested.schema.FindField("meta.raw"), nullptr);
  EXPECT_NE(nested.schema.FindField("meta.digest"), nullptr);
  EXPECT_EQ(nested.schema.highest_field_id(), 20);

  auto identifier = DeleteColumn(SampleSchema(), 20, "id");
  ASSERT_FALSE(identifier.ok());
  EXPECT_NE(identifier.status().message().find("identifier"), std::string::npos);
  EXPECT_FALSE(DeleteColumn(SampleSchema(), 20, "points.element").ok());
  EXPECT_FALSE(DeleteColumn(SampleSchema(), 20, "props.value").ok());

  // A struct holding an identifier field cannot go either.
  auto inner = Type::Struct({NestedField::Required(2, "k", Type::Int())});
  auto keyed = ValueOrDie(Schema::Make(0, {NestedField::Required(1, "s", inner)}, {2}));
  EXPECT_FALSE(DeleteColumn(keyed, 2, "s").ok());
}

TEST(SchemaEvolution, MakeOptionalRelaxesFieldsElementsAndValues) {
  auto relaxed = ValueOrDie(MakeColumnOptional(SampleSchema(), 20, "meta.created"));
  EXPECT_FALSE(relaxed.schema.FindField("meta.created")->required);
  auto element = ValueOrDie(MakeColumnOptional(SampleSchema(), 20, "points.element"));
  EXPECT_FALSE(element.schema.FindField(5)->required);
  EXPECT_EQ(TypeToJson(*element.schema.FindField("points")->type)["element-required"],
            false);
  auto already = ValueOrDie(MakeColumnOptional(SampleSchema(), 20, "data"));
  EXPECT_EQ(already.schema, SampleSchema());

  EXPECT_FALSE(MakeColumnOptional(SampleSchema(), 20, "id").ok());
  EXPECT_FALSE(MakeColumnOptional(SampleSchema(), 20, "props.key").ok());
}

TEST(SchemaEvolution, OnlyTheSpecsTypePromotionsAreAllowed) {
  auto widened = ValueOrDie(UpdateColumnType(SampleSchema(), 20, "count", Type::Long()));
  EXPECT_EQ(widened.schema.FindField("count")->type->ToString(), "long");
  EXPECT_EQ(widened.schema.FindField("count")->id, 20);
  auto f2d = ValueOrDie(
      UpdateColumnType(SampleSchema(), 20, "points.element.y", Type::Double()));
  EXPECT_EQ(f2d.schema.FindField("points.element.y")->type->ToString(), "double");
  auto dec =
      ValueOrDie(UpdateColumnType(SampleSchema(), 20, "price", Type::Decimal(18, 2)));
  EXPECT_EQ(dec.schema.FindField("price")->type->ToString(), "decimal(18,2)");
  auto map_value =
      ValueOrDie(UpdateColumnType(SampleSchema(), 20, "props.value", Type::Long()));
  EXPECT_EQ(map_value.schema.FindField(10)->type->ToString(), "long");
  auto same = ValueOrDie(UpdateColumnType(SampleSchema(), 20, "id", Type::Long()));
  EXPECT_EQ(same.schema, SampleSchema());

  auto narrowing = UpdateColumnType(SampleSchema(), 20, "id", Type::Int());
  ASSERT_FALSE(narrowing.ok());
  EXPECT_NE(narrowing.status().message().find(
                "allows only int -> long, float -> double and decimal(P,S) -> "
                "decimal(P2,S) with P2 > P"),
            std::string::npos)
      << narrowing.status().ToString();
  EXPECT_FALSE(UpdateColumnType(SampleSchema(), 20, "price", Type::Decimal(18, 3)).ok());
  EXPECT_FALSE(UpdateColumnType(SampleSchema(), 20, "price", Type::Decimal(8, 2)).ok());
  EXPECT_FALSE(UpdateColumnType(SampleSchema(), 20, "count", Type::String()).ok());
  EXPECT_FALSE(UpdateColumnType(SampleSchema(), 20, "count", Type::Double()).ok());
  EXPECT_FALSE(UpdateColumnType(SampleSchema(), 20, "meta.day", Type::Timestamp()).ok());
  EXPECT_FALSE(UpdateColumnType(SampleSchema(), 20, "meta", Type::String()).ok());
  EXPECT_FALSE(UpdateColumnType(SampleSchema(), 20, "props.key", Type::Binary()).ok());
}

TEST(SchemaEvolution, IsAllowedPromotionMatchesTheSpecTable) {
  EXPECT_TRUE(IsAllowedPromotion(*Type::Int(), *Type::Long()));
  EXPECT_TRUE(IsAllowedPromotion(*Type::Float(), *Type::Double()));
  EXPECT_TRUE(IsAllowedPromotion(*Type::Decimal(9, 2), *Type::Decimal(10, 2)));
  EXPECT_TRUE(IsAllowedPromotion(*Type::String(), *Type::String()));
  EXPECT_FALSE(IsAllowedPromotion(*Type::Long(), *Type::Int()));
  EXPECT_FALSE(IsAllowedPromotion(*Type::Int(), *Type::Double()));
  EXPECT_FALSE(IsAllowedPromotion(*Type::Date(), *Type::Timestamp()));
  EXPECT_FALSE(IsAllowedPromotion(*Type::Fixed(4), *Type::Fixed(8)));
  EXPECT_FALSE(IsAllowedPromotion(*Type::Fixed(4), *Type::Binary()));
}

TEST(SchemaEvolution, ChangesComposeAndSurviveAJsonRoundTrip) {
  Schema schema = SampleSchema();
  int32_t last = 20;
  for (auto step : std::vector<std::function<arrow::Result<SchemaChange>()>>{
           [&] {
             return AddColumn(schema, last, "", "tags",
                              Type::List(0, Type::String(), false));
           },
           [&] { return RenameColumn(schema, last, "data", "payload"); },
           [&] { return DeleteColumn(schema, last, "props"); },
           [&] { return UpdateColumnType(schema, last, "count", Type::Long()); },
       }) {
    auto change = ValueOrDie(step());
    schema = change.schema;
    last = change.last_column_id;
  }
  EXPECT_EQ(last, 22);
  EXPECT_EQ(schema.FindField("tags.element")->id, 22);
  auto round_trip = ValueOrDie(SchemaFromJson(SchemaToJson(schema)));
  EXPECT_EQ(round_trip, schema);
  EXPECT_EQ(round_trip.highest_field_id(), 22);
}

}  // namespace
}  // namespace floe::iceberg
