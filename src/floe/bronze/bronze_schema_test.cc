#include "floe/bronze/bronze_schema.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "floe/common/test_util.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/source/postgres/change_stream.h"

namespace floe::bronze {
namespace {

using iceberg::NestedField;
using iceberg::Schema;
using iceberg::Type;
using iceberg::TypeId;
using postgres::ConverterKind;
using postgres::NumericTypmod;
using postgres::PgTypeInfo;

// ---------------------------------------------------------------------------
// Helpers

// Built-in oids, so the change log can name the types.
const std::map<std::string, postgres::Oid> kOids = {
    {"bool", 16},          {"bytea", 17},      {"int8", 20},      {"int2", 21},
    {"int4", 23},          {"text", 25},       {"float4", 700},   {"float8", 701},
    {"varchar", 1043},     {"date", 1082},     {"time", 1083},    {"timestamp", 1114},
    {"timestamptz", 1184}, {"interval", 1186}, {"numeric", 1700}, {"uuid", 2950}};

SourceColumn FromInfo(std::string name, int16_t attnum, const PgTypeInfo& info) {
  SourceColumn c;
  c.name = std::move(name);
  c.attnum = attnum;
  c.type_oid = info.oid;
  c.type_modifier = info.typmod;
  c.mapping = postgres::MapType(info);
  return c;
}

PgTypeInfo B(const std::string& type, int32_t typmod = -1) {
  auto it = kOids.find(type);
  return PgTypeInfo::Builtin(type, it == kOids.end() ? 0 : it->second, typmod);
}

SourceColumn Col(std::string name, int16_t attnum, const std::string& type,
                 int32_t typmod = -1) {
  return FromInfo(std::move(name), attnum, B(type, typmod));
}

SourceColumn Numeric(std::string name, int16_t attnum, int p, int s) {
  return Col(std::move(name), attnum, "numeric", NumericTypmod(p, s));
}

SourceColumn Varchar(std::string name, int16_t attnum, int n) {
  return Col(std::move(name), attnum, "varchar", n + 4);
}

const NestedField& Field(const Schema& schema, const std::string& name) {
  const NestedField* f = schema.FindField(name);
  EXPECT_NE(f, nullptr) << name << " not in " << schema.ToString();
  static const NestedField kMissing;
  return f != nullptr ? *f : kMissing;
}

std::vector<std::string> Names(const Schema& schema) {
  std::vector<std::string> out;
  for (const NestedField& f : schema.fields()) out.push_back(f.name);
  return out;
}

const std::vector<std::string> kCdcNames = {
    "cdc_op",           "cdc_ts",         "cdc_processed_at", "cdc_source_lsn",
    "cdc_source_tx_id", "cdc_commit_lsn", "cdc_seq",          "cdc_unchanged"};

std::vector<std::string> WithCdc(std::vector<std::string> row_names) {
  row_names.insert(row_names.end(), kCdcNames.begin(), kCdcNames.end());
  return row_names;
}

const ColumnBinding* Binding(const ColumnMap& map, const std::string& name) {
  for (const ColumnBinding& b : map.columns) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

// A Bronze table as PlanEvolution sees it: schema, last-column-id, bindings.
struct Table {
  Schema schema;
  int32_t last_column_id = 0;
  ColumnMap columns;
};

arrow::Result<Table> Create(const std::vector<SourceColumn>& source) {
  ARROW_ASSIGN_OR_RAISE(BronzeLayout layout, NewBronzeLayout(source));
  return Table{layout.schema, layout.schema.highest_field_id(), layout.columns};
}

// Plans and "commits" the evolution.
arrow::Result<EvolutionPlan> Evolve(Table* table,
                                    const std::vector<SourceColumn>& source,
                                    ChangePosition written_through = {0, 0}) {
  ARROW_ASSIGN_OR_RAISE(EvolutionPlan plan,
                        PlanEvolution(table->schema, table->last_column_id,
                                      table->columns, source, written_through));
  table->schema = plan.schema;
  table->last_column_id = plan.last_column_id;
  table->columns = plan.columns;
  return plan;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// ---------------------------------------------------------------------------
// Types and new tables

TEST(IcebergTypeFor, ScalarsMapToTheDocumentedIcebergTypes) {
  const std::vector<std::pair<SourceColumn, std::string>> cases = {
      {Col("a", 1, "bool"), "boolean"},
      {Col("a", 1, "int2"), "int"},
      {Col("a", 1, "int4"), "int"},
      {Col("a", 1, "int8"), "long"},
      {Col("a", 1, "float4"), "float"},
      {Col("a", 1, "float8"), "double"},
      {Numeric("a", 1, 10, 2), "decimal(10,2)"},
      {Col("a", 1, "numeric"), "string"},
      {Col("a", 1, "text"), "string"},
      {Col("a", 1, "bytea"), "binary"},
      {Col("a", 1, "date"), "date"},
      {Col("a", 1, "time"), "time"},
      {Col("a", 1, "timestamp"), "timestamp"},
      {Col("a", 1, "timestamptz"), "timestamptz"},
      {Col("a", 1, "uuid"), "uuid"},
  };
  for (const auto& [column, expected] : cases) {
    ASSERT_OK_AND_ASSIGN(auto type, IcebergTypeFor(column.mapping));
    EXPECT_EQ(type->ToString(), expected) << column.mapping.type->ToString();
  }
}

TEST(IcebergTypeFor, AFixedSizeBinaryThatIsNotAUuidStaysFixed) {
  postgres::ColumnMapping m;
  m.type = arrow::fixed_size_binary(16);
  m.converter = ConverterKind::kText;
  ASSERT_OK_AND_ASSIGN(auto type, IcebergTypeFor(m));
  EXPECT_EQ(type->ToString(), "fixed[16]");
}

TEST(IcebergTypeFor, AnUnknownArrowTypeIsAnError) {
  postgres::ColumnMapping m;
  m.type = arrow::float16();
  auto type = IcebergTypeFor(m);
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find("halffloat"), std::string::npos)
      << type.status().ToString();
}

TEST(NewBronzeLayout, EveryMappingKindGetsItsIcebergTypeAndFieldIdsInOrder) {
  PgTypeInfo pair;
  pair.kind = postgres::PgTypeKind::kComposite;
  pair.name = "pair";
  pair.namespace_name = "public";
  pair.fields.push_back({"a", std::make_shared<const PgTypeInfo>(B("int4"))});
  pair.fields.push_back({"u", std::make_shared<const PgTypeInfo>(B("uuid"))});
  PgTypeInfo range;
  range.kind = postgres::PgTypeKind::kRange;
  range.name = "int8range";
  range.namespace_name = "pg_catalog";
  range.element = std::make_shared<const PgTypeInfo>(B("int8"));

  const std::vector<SourceColumn> source = {
      Col("id", 1, "int8"),
      Col("small", 2, "int2"),
      Numeric("price", 3, 10, 2),
      Col("dur", 4, "interval"),
      Col("u", 5, "uuid"),
      FromInfo("tags", 6, PgTypeInfo::ArrayOf(B("int4"))),
      FromInfo("uids", 7, PgTypeInfo::ArrayOf(B("uuid"))),
      FromInfo("pair", 8, pair),
      FromInfo("span", 9, range),
      Col("note", 10, "text"),
  };
  ASSERT_OK_AND_ASSIGN(BronzeLayout layout, NewBronzeLayout(source));
  const Schema& s = layout.schema;
  EXPECT_EQ(Names(s), WithCdc({"id", "small", "price", "dur", "u", "tags", "uids", "pair",
                               "span", "note"}));
  for (size_t i = 0; i < s.fields().size(); ++i) {
    EXPECT_EQ(s.fields()[i].id, static_cast<int32_t>(i + 1));
    EXPECT_FALSE(s.fields()[i].required);
  }
  EXPECT_EQ(Field(s, "id").type->ToString(), "long");
  EXPECT_EQ(Field(s, "small").type->ToString(), "int");
  EXPECT_EQ(Field(s, "price").type->ToString(), "decimal(10,2)");
  EXPECT_EQ(Field(s, "u").type->ToString(), "uuid");
  EXPECT_EQ(Field(s, "note").type->ToString(), "string");

  const Type& dur = *Field(s, "dur").type;
  ASSERT_EQ(dur.id(), TypeId::kStruct);
  ASSERT_EQ(dur.fields().size(), 3u);
  EXPECT_EQ(dur.fields()[0].name, "months");
  EXPECT_EQ(dur.fields()[0].type->id(), TypeId::kInt);
  EXPECT_EQ(dur.fields()[1].name, "days");
  EXPECT_EQ(dur.fields()[1].type->id(), TypeId::kInt);
  EXPECT_EQ(dur.fields()[2].name, "microseconds");
  EXPECT_EQ(dur.fields()[2].type->id(), TypeId::kLong);

  const Type& tags = *Field(s, "tags").type;
  ASSERT_EQ(tags.id(), TypeId::kList);
  EXPECT_EQ(tags.element().type->id(), TypeId::kInt);
  EXPECT_FALSE(tags.element().required);
  // The converter kind of the element, not its Arrow type, makes it a uuid.
  EXPECT_EQ(Field(s, "uids").type->element().type->id(), TypeId::kUuid);

  const Type& p = *Field(s, "pair").type;
  ASSERT_EQ(p.id(), TypeId::kStruct);
  ASSERT_EQ(p.fields().size(), 2u);
  EXPECT_EQ(p.fields()[0].name, "a");
  EXPECT_EQ(p.fields()[0].type->id(), TypeId::kInt);
  EXPECT_EQ(p.fields()[1].name, "u");
  EXPECT_EQ(p.fields()[1].type->id(), TypeId::kUuid);

  const Type& span = *Field(s, "span").type;
  ASSERT_EQ(span.id(), TypeId::kStruct);
  ASSERT_EQ(span.fields().size(), 5u);
  EXPECT_EQ(span.fields()[0].name, "lower");
  EXPECT_EQ(span.fields()[0].type->id(), TypeId::kLong);
  EXPECT_EQ(span.fields()[1].type->id(), TypeId::kLong);
  EXPECT_EQ(span.fields()[4].name, "empty");
  EXPECT_EQ(span.fields()[4].type->id(), TypeId::kBoolean);

  // CDC columns.
  EXPECT_EQ(Field(s, "cdc_op").type->ToString(), "string");
  EXPECT_EQ(Field(s, "cdc_ts").type->ToString(), "timestamptz");
  EXPECT_EQ(Field(s, "cdc_processed_at").type->ToString(), "timestamptz");
  EXPECT_EQ(Field(s, "cdc_source_lsn").type->ToString(), "long");
  EXPECT_EQ(Field(s, "cdc_source_tx_id").type->ToString(), "long");
  EXPECT_EQ(Field(s, "cdc_commit_lsn").type->ToString(), "long");
  EXPECT_EQ(Field(s, "cdc_seq").type->ToString(), "int");
  const Type& unchanged = *Field(s, "cdc_unchanged").type;
  ASSERT_EQ(unchanged.id(), TypeId::kList);
  EXPECT_EQ(unchanged.element().type->id(), TypeId::kString);

  // Nested ids come after the top-level ones, exactly as Table::Create numbers them.
  std::map<int32_t, int32_t> old_to_new;
  ASSERT_OK_AND_ASSIGN(Schema fresh, iceberg::AssignFreshFieldIds(s, &old_to_new));
  EXPECT_TRUE(fresh.SameSchema(s)) << fresh.ToString() << "\n" << s.ToString();

  ASSERT_EQ(layout.columns.columns.size(), source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    const ColumnBinding& b = layout.columns.columns[i];
    EXPECT_EQ(b.name, source[i].name);
    EXPECT_EQ(b.attnum, source[i].attnum);
    EXPECT_EQ(b.field_id, static_cast<int32_t>(i + 1));
    EXPECT_EQ(b.type_oid, source[i].type_oid);
    EXPECT_EQ(b.type_modifier, source[i].type_modifier);
  }
  EXPECT_EQ(layout.columns.columns[2].type_modifier, NumericTypmod(10, 2));
}

TEST(NewBronzeLayout, ColumnsNamedLikeCdcColumnsOrWithDotsGetFreeNames) {
  ASSERT_OK_AND_ASSIGN(BronzeLayout layout,
                       NewBronzeLayout({Col("cdc_op", 1, "text"), Col("a.b", 2, "int8"),
                                        Col("cdc_seq", 3, "int4")}));
  EXPECT_EQ(Names(layout.schema), WithCdc({"cdc_op__string", "a_b", "cdc_seq__int"}));
  EXPECT_EQ(layout.columns.columns[0].name, "cdc_op");
  EXPECT_EQ(layout.columns.columns[0].field_id, 1);
}

TEST(NewBronzeLayout, DuplicateColumnsAreRejected) {
  EXPECT_FALSE(NewBronzeLayout({Col("a", 1, "int4"), Col("a", 2, "int4")}).ok());
  EXPECT_FALSE(NewBronzeLayout({Col("a", 1, "int4"), Col("b", 1, "int4")}).ok());
}

TEST(BindByName, RebindsToTheIdsTheCreatedSchemaAssigned) {
  ASSERT_OK_AND_ASSIGN(BronzeLayout layout,
                       NewBronzeLayout({Col("id", 1, "int8"), Col("cdc_op", 2, "text")}));
  // A catalog that numbered the fields from 101.
  std::vector<NestedField> fields = layout.schema.fields();
  for (NestedField& f : fields) {
    f.id += 100;
    if (f.type->id() == TypeId::kList) {
      f.type = Type::List(f.id + 1000, f.type->element().type, false);
    }
  }
  ASSERT_OK_AND_ASSIGN(Schema created, Schema::Make(0, fields));
  ASSERT_OK_AND_ASSIGN(ColumnMap bound, BindByName(created, layout.columns));
  ASSERT_EQ(bound.columns.size(), 2u);
  EXPECT_EQ(bound.columns[0].field_id, 101);
  EXPECT_EQ(bound.columns[1].name, "cdc_op");
  EXPECT_EQ(bound.columns[1].field_id, 102);

  // A schema that is not the layout's.
  fields[0].name = "other";
  ASSERT_OK_AND_ASSIGN(Schema wrong, Schema::Make(0, fields));
  auto bad = BindByName(wrong, layout.columns);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'id'"), std::string::npos) << bad.status();
}

// ---------------------------------------------------------------------------
// ColumnMap JSON

TEST(ColumnMap, JsonRoundTrip) {
  ColumnMap map;
  map.columns.push_back({1, "id", 1, 20, -1, {}});
  map.columns.push_back({5, "Größe \"x\"", 17, 1700, NumericTypmod(12, 4), {3, 9}});
  map.columns.push_back({0, "no_attnum", 18, 4294967295u, 2147483647, {}});
  const std::string text = map.ToJson();
  EXPECT_NE(text.find("\"field-id\":17"), std::string::npos) << text;
  EXPECT_NE(text.find("\"retired-field-ids\":[3,9]"), std::string::npos) << text;
  ASSERT_OK_AND_ASSIGN(ColumnMap back, ColumnMap::FromJson(text));
  EXPECT_EQ(back, map);

  ASSERT_OK_AND_ASSIGN(ColumnMap empty, ColumnMap::FromJson(ColumnMap{}.ToJson()));
  EXPECT_TRUE(empty.columns.empty());

  // Former names with the last position written under each.
  ColumnMap renamed;
  renamed.columns.push_back(
      {2, "c", 4, 25, -1, {}, {"a", "b"}, {{0, 0}, {9000000000, 7}}});
  const std::string renamed_text = renamed.ToJson();
  EXPECT_NE(renamed_text.find("\"former-through\":[[0,0],[9000000000,7]]"),
            std::string::npos)
      << renamed_text;
  ASSERT_OK_AND_ASSIGN(ColumnMap renamed_back, ColumnMap::FromJson(renamed_text));
  EXPECT_EQ(renamed_back, renamed);
  // A map written before the positions were kept: not known.
  ASSERT_OK_AND_ASSIGN(
      ColumnMap legacy,
      ColumnMap::FromJson(R"([{"attnum":2,"name":"c","field-id":4,"type-oid":25,)"
                          R"("typmod":-1,"former-names":["a","b"]}])"));
  EXPECT_EQ(legacy.columns[0].former_through,
            (std::vector<ChangePosition>{{0, 0}, {0, 0}}));
  EXPECT_FALSE(ColumnMap::FromJson(
                   R"([{"attnum":2,"name":"c","field-id":4,"type-oid":25,)"
                   R"("typmod":-1,"former-names":["a"],"former-through":[[1]]}])")
                   .ok());
}

TEST(ColumnMap, UnknownMembersAreIgnored) {
  ASSERT_OK_AND_ASSIGN(
      ColumnMap map,
      ColumnMap::FromJson(R"([{"attnum":1,"name":"a","field-id":3,"type-oid":23,)"
                          R"("typmod":-1,"future":true}])"));
  ASSERT_EQ(map.columns.size(), 1u);
  EXPECT_EQ(map.columns[0].field_id, 3);
}

TEST(ColumnMap, MalformedJsonIsAClearError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not valid JSON"},
      {R"({"attnum":1})", "JSON array"},
      {R"([1])", "entry 0 is not a JSON object"},
      {R"([{"attnum":1,"name":"a","type-oid":23,"typmod":-1}])", "\"field-id\""},
      {R"([{"attnum":"1","name":"a","field-id":1,"type-oid":23,"typmod":-1}])",
       "\"attnum\" is not an integer"},
      {R"([{"attnum":40000,"name":"a","field-id":1,"type-oid":23,"typmod":-1}])",
       "\"attnum\" is out of range"},
      {R"([{"attnum":1,"field-id":1,"type-oid":23,"typmod":-1}])", "\"name\""},
      {R"([{"attnum":1,"name":"a","field-id":1,"type-oid":23,"typmod":-1},)"
       R"({"attnum":2,"name":"b","field-id":1,"type-oid":23,"typmod":-1}])",
       "field id 1 to two columns"},
      {R"([{"attnum":1,"name":"a","field-id":1,"type-oid":23,"typmod":-1,)"
       R"("retired-field-ids":["x"]}])",
       "retired-field-ids"},
  };
  for (const auto& [text, expected] : cases) {
    auto map = ColumnMap::FromJson(text);
    ASSERT_FALSE(map.ok()) << text;
    EXPECT_TRUE(map.status().IsInvalid()) << map.status();
    EXPECT_NE(map.status().message().find("floe.source.columns"), std::string::npos)
        << map.status();
    EXPECT_NE(map.status().message().find(expected), std::string::npos)
        << text << " -> " << map.status();
  }
}

// ---------------------------------------------------------------------------
// PlanEvolution

TEST(PlanEvolution, TheSameColumnsChangeNothing) {
  const std::vector<SourceColumn> source = {Col("id", 1, "int8"), Col("name", 2, "text")};
  ASSERT_OK_AND_ASSIGN(Table t, Create(source));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       PlanEvolution(t.schema, t.last_column_id, t.columns, source));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_TRUE(plan.schema.Equals(t.schema));
  EXPECT_EQ(plan.last_column_id, t.last_column_id);
  EXPECT_EQ(plan.columns, t.columns);
  EXPECT_TRUE(plan.changes.empty()) << Joined(plan.changes);
}

TEST(PlanEvolution, AnAddedColumnIsANewOptionalFieldBeforeTheCdcColumns) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 1, "int8")}));
  const int32_t last = t.last_column_id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("email", 2, "text")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "email"}));
  const NestedField& email = Field(t.schema, "email");
  EXPECT_EQ(email.id, last + 1);
  EXPECT_FALSE(email.required);
  EXPECT_EQ(email.type->ToString(), "string");
  EXPECT_EQ(t.last_column_id, last + 1);
  // The existing fields keep their ids.
  EXPECT_EQ(Field(t.schema, "id").id, 1);
  EXPECT_EQ(Field(t.schema, "cdc_op").id, 2);
  ASSERT_NE(Binding(t.columns, "email"), nullptr);
  EXPECT_EQ(Binding(t.columns, "email")->field_id, email.id);
  EXPECT_EQ(Binding(t.columns, "email")->attnum, 2);
  EXPECT_NE(Joined(plan.changes).find("email: added"), std::string::npos)
      << Joined(plan.changes);
}

TEST(PlanEvolution, ADroppedColumnKeepsItsFieldAndLosesItsBinding) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 1, "int8"), Col("old", 2, "text")}));
  const Schema before = t.schema;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("id", 1, "int8")}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_TRUE(t.schema.Equals(before));
  ASSERT_EQ(t.columns.columns.size(), 1u);
  EXPECT_EQ(t.columns.columns[0].name, "id");
  EXPECT_NE(Joined(plan.changes).find("old: dropped"), std::string::npos)
      << Joined(plan.changes);
}

TEST(PlanEvolution, ARenameKeepsTheFieldId) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 1, "int8"), Col("name", 2, "text")}));
  const int32_t id = Field(t.schema, "name").id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("full_name", 2, "text")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "full_name"}));
  EXPECT_EQ(Field(t.schema, "full_name").id, id);
  EXPECT_EQ(t.schema.highest_field_id(), plan.last_column_id);
  ASSERT_NE(Binding(t.columns, "full_name"), nullptr);
  EXPECT_EQ(Binding(t.columns, "full_name")->field_id, id);
  EXPECT_EQ(Binding(t.columns, "name"), nullptr);
}

// A rename records the last position written under the old name; renamed back, the
// name is no former one any more.
TEST(PlanEvolution, ARenameRecordsTheLastPositionWrittenUnderTheOldName) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 1, "int8"), Col("body", 2, "text")}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan renamed,
                       Evolve(&t, {Col("id", 1, "int8"), Col("content", 2, "text")},
                              {500, 3}));
  ASSERT_OK_AND_ASSIGN(
      EvolutionPlan added,
      Evolve(&t, {Col("id", 1, "int8"), Col("content", 2, "text"), Col("body", 3, "text")},
             {600, 0}));
  ASSERT_NE(Binding(t.columns, "content"), nullptr);
  EXPECT_EQ(Binding(t.columns, "content")->former_names,
            std::vector<std::string>{"body"});
  EXPECT_EQ(Binding(t.columns, "content")->former_through,
            (std::vector<ChangePosition>{{500, 3}}));
  ASSERT_NE(Binding(t.columns, "body"), nullptr);
  EXPECT_TRUE(Binding(t.columns, "body")->former_names.empty());
  ASSERT_OK_AND_ASSIGN(
      EvolutionPlan moved,
      Evolve(&t, {Col("id", 1, "int8"), Col("text", 2, "text"), Col("body", 3, "text")},
             {700, 1}));
  EXPECT_EQ(Binding(t.columns, "text")->former_names,
            (std::vector<std::string>{"body", "content"}));
  EXPECT_EQ(Binding(t.columns, "text")->former_through,
            (std::vector<ChangePosition>{{500, 3}, {700, 1}}));
}

// A rename keeps the old name; a shape from before the rename whose attnums are
// unknown (the catalog moved on: a restart replaying changes Bronze does not hold
// yet) finds the column by it instead of taking it for a new one.
TEST(PlanEvolution, AShapeFromBeforeARenameFindsTheColumnByItsFormerName) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 1, "int8"), Col("v", 2, "text")}));
  const int32_t id = Field(t.schema, "id").id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan renamed,
                       Evolve(&t, {Col("id2", 1, "int8"), Col("v", 2, "text")}));
  ASSERT_NE(Binding(t.columns, "id2"), nullptr);
  EXPECT_EQ(Binding(t.columns, "id2")->former_names, std::vector<std::string>{"id"});
  EXPECT_EQ(Binding(t.columns, "id2")->former_through,
            (std::vector<ChangePosition>{{0, 0}}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan replayed,
                       Evolve(&t, {Col("id", 0, "int8"), Col("v", 0, "text")}));
  EXPECT_EQ(Field(t.schema, "id").id, id);  // the same field, no new one
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "v"}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan again,
                       Evolve(&t, {Col("id2", 1, "int8"), Col("v", 2, "text")}));
  EXPECT_EQ(Field(t.schema, "id2").id, id);
  EXPECT_EQ(Names(t.schema), WithCdc({"id2", "v"}));
}

TEST(PlanEvolution, TwoColumnsCanSwapNames) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("a", 1, "int4"), Col("b", 2, "text")}));
  const int32_t a = Field(t.schema, "a").id;
  const int32_t b = Field(t.schema, "b").id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("b", 1, "int4"), Col("a", 2, "text")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"b", "a"}));
  EXPECT_EQ(Field(t.schema, "b").id, a);
  EXPECT_EQ(Field(t.schema, "a").id, b);
}

TEST(PlanEvolution, Int2ToInt4NeedsNoSchemaChange) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("n", 1, "int2")}));
  const Schema before = t.schema;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("n", 1, "int4")}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_TRUE(t.schema.Equals(before));
  EXPECT_EQ(t.columns.columns[0].type_oid, 23u);
  EXPECT_EQ(t.columns.columns[0].field_id, Field(before, "n").id);
  EXPECT_NE(Joined(plan.changes).find("int2 -> int4"), std::string::npos)
      << Joined(plan.changes);
  // The same for array elements: list<int> either way.
  ASSERT_OK_AND_ASSIGN(Table arrays,
                       Create({FromInfo("xs", 1, PgTypeInfo::ArrayOf(B("int2")))}));
  ASSERT_OK_AND_ASSIGN(
      plan, Evolve(&arrays, {FromInfo("xs", 1, PgTypeInfo::ArrayOf(B("int4")))}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_EQ(arrays.columns.columns[0].field_id, 1);
}

TEST(PlanEvolution, Int4ToInt8PromotesIntToLong) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("n", 1, "int4")}));
  const int32_t id = Field(t.schema, "n").id;
  const int32_t last = t.last_column_id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("n", 1, "int8")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Field(t.schema, "n").id, id);
  EXPECT_EQ(Field(t.schema, "n").type->ToString(), "long");
  EXPECT_EQ(t.last_column_id, last);
  EXPECT_EQ(Names(t.schema), WithCdc({"n"}));
  EXPECT_NE(Joined(plan.changes).find("promotes field n from int to long"),
            std::string::npos)
      << Joined(plan.changes);
}

TEST(PlanEvolution, Float4ToFloat8PromotesFloatToDouble) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("x", 1, "float4")}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("x", 1, "float8")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Field(t.schema, "x").id, 1);
  EXPECT_EQ(Field(t.schema, "x").type->ToString(), "double");
}

TEST(PlanEvolution, DecimalPrecisionIncreaseIsAPromotion) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Numeric("amount", 1, 10, 2)}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Numeric("amount", 1, 12, 2)}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Field(t.schema, "amount").id, 1);
  EXPECT_EQ(Field(t.schema, "amount").type->ToString(), "decimal(12,2)");
  EXPECT_EQ(Names(t.schema), WithCdc({"amount"}));
}

TEST(PlanEvolution, VarcharLengthChangeNeedsNoSchemaChange) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Varchar("code", 1, 10)}));
  const Schema before = t.schema;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Varchar("code", 1, 20)}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_TRUE(t.schema.Equals(before));
  EXPECT_EQ(t.columns.columns[0].type_modifier, 24);
  // text <-> varchar too.
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("code", 1, "text")}));
  EXPECT_FALSE(plan.schema_changed);
}

TEST(PlanEvolution, ANarrowerTypeTheFieldHoldsKeepsTheField) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("n", 1, "int8")}));
  const Schema before = t.schema;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("n", 1, "int4")}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_TRUE(t.schema.Equals(before));
}

TEST(PlanEvolution, TextToIntWritesToANewSuffixedFieldAndKeepsTheOld) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 1, "int8"), Col("qty", 2, "text")}));
  const int32_t old_id = Field(t.schema, "qty").id;
  const int32_t last = t.last_column_id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("qty", 2, "int4")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "qty", "qty__int"}));
  EXPECT_EQ(Field(t.schema, "qty").id, old_id);
  EXPECT_EQ(Field(t.schema, "qty").type->ToString(), "string");
  EXPECT_EQ(Field(t.schema, "qty__int").id, last + 1);
  EXPECT_EQ(Field(t.schema, "qty__int").type->ToString(), "int");
  const ColumnBinding* b = Binding(t.columns, "qty");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->field_id, last + 1);
  EXPECT_EQ(b->retired_field_ids, std::vector<int32_t>{old_id});
  EXPECT_NE(Joined(plan.changes).find("text -> int4 is not an Iceberg promotion"),
            std::string::npos)
      << Joined(plan.changes);
  EXPECT_NE(Joined(plan.changes).find("now written to qty__int"), std::string::npos)
      << Joined(plan.changes);
}

TEST(PlanEvolution, NumericScaleChangeWritesToANewFieldAndChangingBackRebinds) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Numeric("amount", 1, 10, 2)}));
  const int32_t original = Field(t.schema, "amount").id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Numeric("amount", 1, 10, 4)}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(t.schema), WithCdc({"amount", "amount__decimal_10_4"}));
  const int32_t scaled = Field(t.schema, "amount__decimal_10_4").id;
  EXPECT_EQ(Field(t.schema, "amount__decimal_10_4").type->ToString(), "decimal(10,4)");
  EXPECT_EQ(t.columns.columns[0].field_id, scaled);

  // Back to numeric(10,2): the original field again, no schema change.
  const Schema before = t.schema;
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Numeric("amount", 1, 10, 2)}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_TRUE(t.schema.Equals(before));
  EXPECT_EQ(t.columns.columns[0].field_id, original);
  EXPECT_EQ(t.columns.columns[0].retired_field_ids, std::vector<int32_t>{scaled});
  EXPECT_NE(Joined(plan.changes).find("its earlier field amount"), std::string::npos)
      << Joined(plan.changes);

  // And forth again: the decimal(10,4) field, still no new field.
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Numeric("amount", 1, 10, 4)}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_EQ(t.columns.columns[0].field_id, scaled);

  // The bindings survive the property round trip.
  ASSERT_OK_AND_ASSIGN(ColumnMap back, ColumnMap::FromJson(t.columns.ToJson()));
  EXPECT_EQ(back, t.columns);
}

TEST(PlanEvolution, ChangingBackCanPromoteTheEarlierField) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("n", 1, "int4")}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("n", 1, "text")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"n", "n__string"}));
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("n", 1, "int8")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(t.schema), WithCdc({"n", "n__string"}));
  EXPECT_EQ(Field(t.schema, "n").type->ToString(), "long");
  EXPECT_EQ(t.columns.columns[0].field_id, Field(t.schema, "n").id);
}

TEST(PlanEvolution, ARetypedColumnThatIsRenamedStillFindsItsEarlierField) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("qty", 1, "int4")}));
  const int32_t original = Field(t.schema, "qty").id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("qty", 1, "text")}));
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("count", 1, "text")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"qty", "count"}));
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("count", 1, "int4")}));
  EXPECT_EQ(t.columns.columns[0].field_id, original);
  // The re-bound field is renamed for the column; `count` being taken (by the text
  // field, which keeps its name), it gets the suffix.
  EXPECT_EQ(Names(t.schema), WithCdc({"count__int", "count"}));
  EXPECT_EQ(Field(t.schema, "count__int").id, original);
  EXPECT_EQ(Field(t.schema, "count").type->ToString(), "string");
}

TEST(PlanEvolution, ReAddingADroppedColumnsNameGetsANewSuffixedField) {
  ASSERT_OK_AND_ASSIGN(Table t,
                       Create({Col("id", 1, "int8"), Numeric("amount", 2, 10, 2)}));
  const int32_t dropped = Field(t.schema, "amount").id;
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, {Col("id", 1, "int8")}));
  ASSERT_OK_AND_ASSIGN(plan,
                       Evolve(&t, {Col("id", 1, "int8"), Numeric("amount", 3, 10, 2)}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "amount", "amount__decimal_10_2"}));
  EXPECT_EQ(Field(t.schema, "amount").id, dropped);
  const ColumnBinding* b = Binding(t.columns, "amount");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->attnum, 3);
  EXPECT_EQ(b->field_id, Field(t.schema, "amount__decimal_10_2").id);

  // The same again, while floe was down: attnum 2 vanished, attnum 4 is new.
  ASSERT_OK_AND_ASSIGN(Table u,
                       Create({Col("id", 1, "int8"), Numeric("amount", 2, 10, 2)}));
  ASSERT_OK_AND_ASSIGN(plan,
                       Evolve(&u, {Col("id", 1, "int8"), Numeric("amount", 4, 10, 2)}));
  EXPECT_EQ(Names(u.schema), WithCdc({"id", "amount", "amount__decimal_10_2"}));
  EXPECT_EQ(Binding(u.columns, "amount")->field_id,
            Field(u.schema, "amount__decimal_10_2").id);
}

TEST(PlanEvolution, ASourceColumnNamedLikeACdcColumnGetsASuffix) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 1, "int8")}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("cdc_op", 2, "text")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "cdc_op__string"}));
  EXPECT_EQ(Binding(t.columns, "cdc_op")->field_id, Field(t.schema, "cdc_op__string").id);
  // Renaming it away and back keeps one field.
  const int32_t id = Field(t.schema, "cdc_op__string").id;
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("id", 1, "int8"), Col("op", 2, "text")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "op"}));
  ASSERT_OK_AND_ASSIGN(plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("cdc_op", 2, "text")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "cdc_op__string"}));
  EXPECT_EQ(Field(t.schema, "cdc_op__string").id, id);
}

TEST(PlanEvolution, AttnumZeroMatchesByName) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("id", 0, "int8"), Col("n", 0, "int4")}));
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("n", 0, "int8"), Col("id", 0, "int8")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "n"}));
  EXPECT_EQ(Field(t.schema, "n").type->ToString(), "long");
  EXPECT_EQ(Binding(t.columns, "n")->field_id, Field(t.schema, "n").id);
  EXPECT_EQ(Binding(t.columns, "id")->field_id, Field(t.schema, "id").id);

  // Without attnums a rename cannot be told from drop + add.
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("n", 0, "int8"), Col("key", 0, "int8")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "n", "key"}));
  EXPECT_EQ(t.columns.columns.size(), 2u);

  // A known attnum on one side only: matched by name, and the attnum is learnt.
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("n", 7, "int8"), Col("key", 0, "int8")}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_EQ(Binding(t.columns, "n")->attnum, 7);
}

TEST(PlanEvolution, SeveralChangesAtOnce) {
  ASSERT_OK_AND_ASSIGN(
      Table t,
      Create({Col("id", 1, "int4"), Col("name", 2, "text"), Col("gone", 3, "bool"),
              Numeric("price", 4, 10, 2), Col("qty", 5, "text")}));
  const int32_t id_field = Field(t.schema, "id").id;
  const int32_t name_field = Field(t.schema, "name").id;
  const int32_t last = t.last_column_id;
  // id int4 -> int8, name renamed, gone dropped, price numeric(10,2) -> (10,4),
  // qty text -> int4, note added.
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("label", 2, "text"),
                                   Numeric("price", 4, 10, 4), Col("qty", 5, "int4"),
                                   Col("note", 6, "text")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "label", "gone", "price", "qty",
                                      "price__decimal_10_4", "qty__int", "note"}));
  EXPECT_EQ(Field(t.schema, "id").id, id_field);
  EXPECT_EQ(Field(t.schema, "id").type->ToString(), "long");
  EXPECT_EQ(Field(t.schema, "label").id, name_field);
  EXPECT_EQ(t.last_column_id, last + 3);
  ASSERT_EQ(t.columns.columns.size(), 5u);
  EXPECT_EQ(Binding(t.columns, "price")->field_id,
            Field(t.schema, "price__decimal_10_4").id);
  EXPECT_EQ(Binding(t.columns, "qty")->field_id, Field(t.schema, "qty__int").id);
  EXPECT_EQ(Binding(t.columns, "note")->field_id, Field(t.schema, "note").id);
  EXPECT_EQ(plan.changes.size(), 6u) << Joined(plan.changes);
  EXPECT_EQ(t.schema.highest_field_id(), t.last_column_id);
}

// The example of docs/schema-evolution.md, step by step.
TEST(PlanEvolution, TheDocumentedExample) {
  ASSERT_OK_AND_ASSIGN(Table t,
                       Create({Col("id", 1, "int8"), Col("qty", 2, "text"),
                               Numeric("amount", 3, 10, 2), Col("note", 4, "text")}));
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "qty", "amount", "note"}));
  // 1. qty text -> int4.
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("qty", 2, "int4"),
                                   Numeric("amount", 3, 10, 2), Col("note", 4, "text")}));
  EXPECT_EQ(Field(t.schema, "qty__int").id, 14);
  EXPECT_EQ(Binding(t.columns, "qty")->field_id, 14);
  ASSERT_EQ(plan.changes.size(), 1u);
  EXPECT_EQ(plan.changes[0],
            "column qty: text -> int4 is not an Iceberg promotion (string -> int); now "
            "written to qty__int (id 14, int); qty keeps the older values");
  // 2. amount numeric(10,2) -> numeric(12,2).
  ASSERT_OK_AND_ASSIGN(plan,
                       Evolve(&t, {Col("id", 1, "int8"), Col("qty", 2, "int4"),
                                   Numeric("amount", 3, 12, 2), Col("note", 4, "text")}));
  EXPECT_EQ(Field(t.schema, "amount").id, 3);
  EXPECT_EQ(Field(t.schema, "amount").type->ToString(), "decimal(12,2)");
  // 3. note renamed to comment.
  ASSERT_OK_AND_ASSIGN(
      plan, Evolve(&t, {Col("id", 1, "int8"), Col("qty", 2, "int4"),
                        Numeric("amount", 3, 12, 2), Col("comment", 4, "text")}));
  EXPECT_EQ(Field(t.schema, "comment").id, 4);
  // 4. amount dropped.
  ASSERT_OK_AND_ASSIGN(plan, Evolve(&t, {Col("id", 1, "int8"), Col("qty", 2, "int4"),
                                         Col("comment", 4, "text")}));
  EXPECT_EQ(Binding(t.columns, "amount"), nullptr);
  // 5. amount added again.
  ASSERT_OK_AND_ASSIGN(
      plan, Evolve(&t, {Col("id", 1, "int8"), Col("qty", 2, "int4"),
                        Col("comment", 4, "text"), Numeric("amount", 5, 12, 2)}));
  EXPECT_EQ(Field(t.schema, "amount__decimal_12_2").id, 15);
  EXPECT_EQ(Binding(t.columns, "amount")->field_id, 15);
  // 6. qty back to text.
  ASSERT_OK_AND_ASSIGN(
      plan, Evolve(&t, {Col("id", 1, "int8"), Col("qty", 2, "text"),
                        Col("comment", 4, "text"), Numeric("amount", 5, 12, 2)}));
  EXPECT_FALSE(plan.schema_changed);
  EXPECT_EQ(Binding(t.columns, "qty")->field_id, 2);
  EXPECT_EQ(Names(t.schema), WithCdc({"id", "qty", "amount", "comment", "qty__int",
                                      "amount__decimal_12_2"}));
  for (const std::string& cdc : kCdcNames) {
    EXPECT_GE(Field(t.schema, cdc).id, 5);
    EXPECT_LE(Field(t.schema, cdc).id, 12);
  }
  EXPECT_EQ(Field(t.schema, "cdc_unchanged").type->element().id, 13);
}

TEST(PlanEvolution, AMissingCdcColumnIsAdded) {
  // A table written before cdc_processed_at existed.
  std::vector<NestedField> fields = {
      NestedField::Optional(1, "id", Type::Long()),
      NestedField::Optional(2, "cdc_op", Type::String()),
      NestedField::Optional(3, "cdc_ts", Type::TimestampTz()),
      NestedField::Optional(4, "cdc_source_lsn", Type::Long()),
      NestedField::Optional(5, "cdc_source_tx_id", Type::Long()),
      NestedField::Optional(6, "cdc_commit_lsn", Type::Long()),
      NestedField::Optional(7, "cdc_seq", Type::Int()),
      NestedField::Optional(8, "cdc_unchanged", Type::List(9, Type::String(), false))};
  ASSERT_OK_AND_ASSIGN(Schema old, Schema::Make(3, fields));
  ColumnMap map;
  map.columns.push_back({1, "id", 1, 20, -1, {}});
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan,
                       PlanEvolution(old, 9, map, {Col("id", 1, "int8")}));
  EXPECT_TRUE(plan.schema_changed);
  EXPECT_EQ(Names(plan.schema), WithCdc({"id"}));
  EXPECT_EQ(Field(plan.schema, "cdc_processed_at").id, 10);
  EXPECT_EQ(plan.schema.schema_id(), 3);
  EXPECT_EQ(plan.last_column_id, 10);
}

TEST(PlanEvolution, AnInconsistentColumnMapIsAnError) {
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("a", 1, "int4"), Col("b", 2, "int4")}));
  t.columns.columns[1].field_id = t.columns.columns[0].field_id;
  auto plan = PlanEvolution(t.schema, t.last_column_id, t.columns,
                            {Col("a", 1, "int4"), Col("b", 2, "int4")});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("two columns"), std::string::npos)
      << plan.status();
}

// ---------------------------------------------------------------------------
// BatchConformer

// A change-stream batch: the row columns as given, then the CDC columns.
std::shared_ptr<arrow::RecordBatch> StreamBatch(const std::vector<SourceColumn>& source,
                                                const std::vector<std::string>& row_json,
                                                int64_t rows) {
  arrow::FieldVector fields;
  std::vector<std::shared_ptr<arrow::Array>> columns;
  for (size_t i = 0; i < source.size(); ++i) {
    fields.push_back(arrow::field(source[i].name, source[i].mapping.type));
    columns.push_back(
        *arrow::json::ArrayFromJSONString(source[i].mapping.type, row_json[i]));
  }
  const std::vector<std::string> cdc_json = {R"(["c","u","d"])",
                                             "[1000,2000,3000]",
                                             "[10,20,30]",
                                             "[7,7,8]",
                                             "[100,100,200]",
                                             "[0,1,0]",
                                             R"([null,["note"],null])"};
  size_t k = 0;
  for (const auto& f : postgres::CdcMetadataFields()) {
    fields.push_back(f);
    columns.push_back(*arrow::json::ArrayFromJSONString(f->type(), cdc_json[k++]));
  }
  return arrow::RecordBatch::Make(arrow::schema(fields), rows, columns);
}

TEST(BatchConformer, PlacesCastsAndFillsColumns) {
  // Bronze: id long, n int (the source narrows it to int2), amount decimal(10,2)
  // promoted to (12,2), tags list<int> (source int2[]), gone dropped (reads null).
  ASSERT_OK_AND_ASSIGN(
      Table t,
      Create({Col("id", 1, "int8"), Col("n", 2, "int4"), Numeric("amount", 3, 10, 2),
              FromInfo("tags", 4, PgTypeInfo::ArrayOf(B("int2"))), Col("gone", 5, "text"),
              Col("u", 6, "uuid")}));
  // The source now: columns in another order, n narrowed to int2 and amount widened.
  const std::vector<SourceColumn> source = {
      Numeric("amount", 3, 12, 2), Col("u", 6, "uuid"), Col("n", 2, "int2"),
      Col("id", 1, "int8"), FromInfo("tags", 4, PgTypeInfo::ArrayOf(B("int2")))};
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, source));
  EXPECT_EQ(Field(t.schema, "amount").type->ToString(), "decimal(12,2)");

  ASSERT_OK_AND_ASSIGN(BatchConformer conformer,
                       BatchConformer::Make(t.schema, t.columns, source));
  ASSERT_OK_AND_ASSIGN(auto expected_schema, iceberg::ToArrowSchema(t.schema));
  EXPECT_TRUE(
      conformer.output_schema()->Equals(*expected_schema, /*check_metadata=*/true));

  auto batch = StreamBatch(
      source,
      {R"(["1.50","-2.00",null])", R"(["0123456789abcdef","fedcba9876543210",null])",
       "[1,-2,null]", "[10,20,30]", R"([[1,2],null,[3,null]])"},
      3);
  ASSERT_OK_AND_ASSIGN(auto out, conformer.Conform(*batch, 1700000000000000));
  ASSERT_OK(out->ValidateFull());
  EXPECT_TRUE(out->schema()->Equals(*expected_schema, /*check_metadata=*/true));
  ASSERT_EQ(out->num_rows(), 3);

  auto col = [&](const std::string& name) { return out->GetColumnByName(name); };
  auto expect = [&](const std::string& name, const std::string& json) {
    auto array = col(name);
    ASSERT_NE(array, nullptr) << name;
    auto want = arrow::json::ArrayFromJSONString(array->type(), json);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_TRUE(array->Equals(**want)) << name << ": " << array->ToString();
  };
  expect("id", "[10,20,30]");
  expect("n", "[1,-2,null]");
  EXPECT_EQ(col("n")->type()->id(), arrow::Type::INT32);
  expect("amount", R"(["1.50","-2.00",null])");
  expect("tags", R"([[1,2],null,[3,null]])");
  EXPECT_EQ(col("tags")->type()->field(0)->type()->id(), arrow::Type::INT32);
  expect("u", R"(["0123456789abcdef","fedcba9876543210",null])");
  EXPECT_EQ(col("gone")->null_count(), 3);
  expect("cdc_op", R"(["c","u","d"])");
  expect("cdc_ts", "[1000,2000,3000]");
  expect("cdc_processed_at", "[1700000000000000,1700000000000000,1700000000000000]");
  expect("cdc_source_lsn", "[10,20,30]");
  expect("cdc_source_tx_id", "[7,7,8]");
  expect("cdc_commit_lsn", "[100,100,200]");
  expect("cdc_seq", "[0,1,0]");
  expect("cdc_unchanged", R"([null,["note"],null])");

  // A slice (non-zero offsets, nested ones included) conforms the same way.
  ASSERT_OK_AND_ASSIGN(auto sliced, conformer.Conform(*batch->Slice(1), 5));
  ASSERT_OK(sliced->ValidateFull());
  ASSERT_EQ(sliced->num_rows(), 2);
  auto want_tags = arrow::json::ArrayFromJSONString(
      sliced->GetColumnByName("tags")->type(), R"([null,[3,null]])");
  EXPECT_TRUE(sliced->GetColumnByName("tags")->Equals(**want_tags));
  auto want_unchanged = arrow::json::ArrayFromJSONString(
      sliced->GetColumnByName("cdc_unchanged")->type(), R"([["note"],null])");
  EXPECT_TRUE(sliced->GetColumnByName("cdc_unchanged")->Equals(**want_unchanged));
}

TEST(BatchConformer, IntervalCompositeAndRetypedColumns) {
  PgTypeInfo pair;
  pair.kind = postgres::PgTypeKind::kComposite;
  pair.name = "pair";
  pair.namespace_name = "public";
  pair.fields.push_back({"a", std::make_shared<const PgTypeInfo>(B("int2"))});
  pair.fields.push_back({"b", std::make_shared<const PgTypeInfo>(B("text"))});
  ASSERT_OK_AND_ASSIGN(Table t, Create({Col("dur", 1, "interval"), FromInfo("p", 2, pair),
                                        Col("qty", 3, "text")}));
  const std::vector<SourceColumn> source = {
      Col("dur", 1, "interval"), FromInfo("p", 2, pair), Col("qty", 3, "int4")};
  ASSERT_OK_AND_ASSIGN(EvolutionPlan plan, Evolve(&t, source));
  ASSERT_OK_AND_ASSIGN(BatchConformer conformer,
                       BatchConformer::Make(t.schema, t.columns, source));
  auto batch = StreamBatch(source,
                           {R"([{"months":1,"days":2,"microseconds":3},null,null])",
                            R"([{"a":1,"b":"x"},{"a":null,"b":null},null])", "[5,6,7]"},
                           3);
  ASSERT_OK_AND_ASSIGN(auto out, conformer.Conform(*batch, 0));
  ASSERT_OK(out->ValidateFull());
  // The old text field reads null for the new rows; the int field gets them.
  EXPECT_EQ(out->GetColumnByName("qty")->null_count(), 3);
  auto want_qty = arrow::json::ArrayFromJSONString(arrow::int32(), "[5,6,7]");
  EXPECT_TRUE(out->GetColumnByName("qty__int")->Equals(**want_qty));
  auto p = out->GetColumnByName("p");
  auto want_p = arrow::json::ArrayFromJSONString(
      p->type(), R"([{"a":1,"b":"x"},{"a":null,"b":null},null])");
  EXPECT_TRUE(p->Equals(**want_p)) << p->ToString();
  EXPECT_EQ(p->type()->field(0)->type()->id(), arrow::Type::INT32);
  auto dur = out->GetColumnByName("dur");
  auto want_dur = arrow::json::ArrayFromJSONString(
      dur->type(), R"([{"months":1,"days":2,"microseconds":3},null,null])");
  EXPECT_TRUE(dur->Equals(**want_dur)) << dur->ToString();
}

TEST(BatchConformer, RejectsBatchesOfAnotherShape) {
  const std::vector<SourceColumn> source = {Col("id", 1, "int8")};
  ASSERT_OK_AND_ASSIGN(Table t, Create(source));
  ASSERT_OK_AND_ASSIGN(BatchConformer conformer,
                       BatchConformer::Make(t.schema, t.columns, source));
  auto batch =
      StreamBatch({Col("id", 1, "int8"), Col("x", 2, "int8")}, {"[1,2,3]", "[4,5,6]"}, 3);
  auto out = conformer.Conform(*batch, 0);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("expected 8"), std::string::npos) << out.status();

  // A source column the map does not bind: PlanEvolution was not run.
  auto unplanned = BatchConformer::Make(t.schema, t.columns,
                                        {Col("id", 1, "int8"), Col("x", 2, "int8")});
  ASSERT_FALSE(unplanned.ok());
  EXPECT_NE(unplanned.status().message().find("'x'"), std::string::npos)
      << unplanned.status();
}

}  // namespace
}  // namespace floe::bronze
