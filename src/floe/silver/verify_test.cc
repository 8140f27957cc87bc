// `floe silver verify`: the order-independent digests and their comparison, and
// VerifyTable on a local catalog (Silver built by MergeTable from a hand-written
// Bronze table, then damaged on purpose). The comparison with a live source is
// exercised with a fake SourceReader; tests/integration/test_silver_tools.py runs it
// against PostgreSQL.
#include "floe/silver/verify.h"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/silver/merge.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace fs = std::filesystem;

constexpr char kPrefix[] = "floe_verify_test_";

struct Row {
  std::string op;
  int64_t lsn;
  int32_t seq;
  int64_t id;
  std::optional<std::string> name;
};

// A Bronze-shaped table (id, name and the CDC columns) on a local SQLite catalog,
// written by hand.
class BronzeFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        (std::string(kPrefix) +
         std::to_string(::testing::UnitTest::GetInstance()->current_test_info()->line()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto conn = ice::OpenSqlite((dir_ / "catalog.db").string());
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    auto catalog = ice::SqlCatalog::Open("floe", std::move(*conn));
    ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
    catalog_ = std::move(*catalog);
    io_ = ice::MakeLocalFileIO();
    warehouse_ = "file://" + (dir_ / "wh").string();
    auto schema = ice::Schema::Make(
        0, {ice::NestedField::Optional(1, "id", ice::Type::Long()),
            ice::NestedField::Optional(2, "name", ice::Type::String()),
            ice::NestedField::Optional(3, "cdc_op", ice::Type::String()),
            ice::NestedField::Optional(4, "cdc_commit_lsn", ice::Type::Long()),
            ice::NestedField::Optional(5, "cdc_seq", ice::Type::Int()),
            ice::NestedField::Optional(6, "cdc_unchanged",
                                       ice::Type::List(7, ice::Type::String(), false))});
    ASSERT_TRUE(schema.ok());
    ASSERT_TRUE(catalog_->EnsureNamespace(bronze_id_.ns).ok());
    auto table = ice::Table::Create(
        catalog_.get(), io_, bronze_id_, *schema, ice::PartitionSpec{},
        ice::SortOrder::Unsorted(), ice::Table::DefaultLocation(warehouse_, bronze_id_),
        {{kPrimaryKeyProperty, "[\"id\"]"}, {kSourceTableProperty, "public.t"}});
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    bronze_ = std::move(*table);
  }

  void TearDown() override { fs::remove_all(dir_); }

  // Appends `rows` to Bronze as one commit with floe.commit-lsn = `commit_lsn`.
  void Append(const std::vector<Row>& rows, int64_t commit_lsn) {
    arrow::StringBuilder op, name;
    arrow::Int64Builder lsn, id;
    arrow::Int32Builder seq;
    for (const auto& r : rows) {
      ASSERT_TRUE(op.Append(r.op).ok());
      ASSERT_TRUE(lsn.Append(r.lsn).ok());
      ASSERT_TRUE(seq.Append(r.seq).ok());
      ASSERT_TRUE(id.Append(r.id).ok());
      ASSERT_TRUE((r.name ? name.Append(*r.name) : name.AppendNull()).ok());
    }
    auto schema = ice::ToArrowSchema(bronze_->schema()).ValueOrDie();
    auto unchanged = arrow::MakeArrayOfNull(schema->field(5)->type(),
                                            static_cast<int64_t>(rows.size()))
                         .ValueOrDie();
    auto batch = arrow::RecordBatch::Make(
        schema, static_cast<int64_t>(rows.size()),
        {id.Finish().ValueOrDie(), name.Finish().ValueOrDie(), op.Finish().ValueOrDie(),
         lsn.Finish().ValueOrDie(), seq.Finish().ValueOrDie(), unchanged});
    auto file = bronze_->WriteDataFile({batch});
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto snap =
        bronze_->AppendFiles({*file}, {{"floe.commit-lsn", std::to_string(commit_lsn)}});
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  }

  void Merge() {
    MergeOptions options;
    options.target_file_bytes = 2048;
    auto stats =
        MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  }

  // Silver's rows as id -> name.
  std::map<int64_t, std::string> SilverRows() {
    auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    ice::ScanOptions scan;
    scan.columns = std::vector<std::string>{"id", "name"};
    auto rows = ice::ScanToArrow(*table, scan).ValueOrDie()->CombineChunks().ValueOrDie();
    std::map<int64_t, std::string> out;
    if (rows->num_rows() == 0) return out;
    const auto& ids = static_cast<const arrow::Int64Array&>(*rows->column(0)->chunk(0));
    const auto& names =
        static_cast<const arrow::StringArray&>(*rows->column(1)->chunk(0));
    for (int64_t i = 0; i < rows->num_rows(); ++i) {
      EXPECT_FALSE(out.contains(ids.Value(i))) << "key " << ids.Value(i) << " twice";
      out[ids.Value(i)] = names.IsNull(i) ? "null" : std::string(names.GetView(i));
    }
    return out;
  }

  fs::path dir_;
  std::unique_ptr<ice::Catalog> catalog_;
  std::shared_ptr<ice::FileIO> io_;
  std::string warehouse_;
  ice::TableIdentifier bronze_id_{{"bronze", "svc", "public"}, "t"};
  ice::TableIdentifier silver_id_{{"silver", "svc", "public"}, "t"};
  std::unique_ptr<ice::Table> bronze_;
};

std::shared_ptr<arrow::Table> IdNameTable(const std::vector<int64_t>& ids,
                                          const std::vector<std::string>& names) {
  arrow::Int64Builder id;
  arrow::StringBuilder name;
  EXPECT_TRUE(id.AppendValues(ids).ok());
  EXPECT_TRUE(name.AppendValues(names).ok());
  return arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()),
                                           arrow::field("name", arrow::utf8())}),
                            {id.Finish().ValueOrDie(), name.Finish().ValueOrDie()});
}

TEST(CanonicalValueHashes, SameValueInTwoTypesHashesAlike) {
  arrow::Int32Builder small;
  arrow::Int64Builder large;
  ASSERT_TRUE(small.AppendValues(std::vector<int32_t>{1, 2}).ok());
  ASSERT_TRUE(small.AppendNull().ok());
  ASSERT_TRUE(large.AppendValues(std::vector<int64_t>{1, 2}).ok());
  ASSERT_TRUE(large.AppendNull().ok());
  std::vector<std::string> texts;
  auto a = CanonicalValueHashes(*small.Finish().ValueOrDie(), &texts).ValueOrDie();
  auto b = CanonicalValueHashes(*large.Finish().ValueOrDie()).ValueOrDie();
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
  EXPECT_EQ(texts, (std::vector<std::string>{"1", "2", "null"}));
  arrow::StringBuilder text;
  ASSERT_TRUE(text.AppendValues(std::vector<std::string>{"null", ""}).ok());
  auto c = CanonicalValueHashes(*text.Finish().ValueOrDie()).ValueOrDie();
  EXPECT_NE(c[0], a[2]);  // the string "null" is not a null
  arrow::BinaryBuilder binary;
  ASSERT_TRUE(binary.Append(std::string("\x01\xff", 2)).ok());
  ASSERT_TRUE(CanonicalValueHashes(*binary.Finish().ValueOrDie(), &texts).ok());
  EXPECT_EQ(texts[0], "01ff");
}

TEST(DigestRows, OrderDoesNotMatterButEveryRowAndValueDoes) {
  auto a = DigestRows(*IdNameTable({1, 2, 3}, {"a", "b", "c"}), {"id"}, {"id", "name"})
               .ValueOrDie();
  auto b = DigestRows(*IdNameTable({3, 1, 2}, {"c", "a", "b"}), {"id"}, {"id", "name"})
               .ValueOrDie();
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.digest.rows, 3);
  int64_t total = -1;
  EXPECT_TRUE(CompareRowSets(a, b, "Silver", "the fold", 10, &total).empty());
  EXPECT_EQ(total, 0);
  // Swapped values between columns of a row change the checksum.
  auto swapped =
      DigestRows(*IdNameTable({1, 2, 3}, {"b", "a", "c"}), {"id"}, {"id", "name"})
          .ValueOrDie();
  EXPECT_NE(a.digest.checksum, swapped.digest.checksum);

  // One changed, one missing, one extra, one duplicated key.
  auto c = DigestRows(*IdNameTable({1, 2, 2, 4, 5}, {"a", "x", "x", "d", "e"}), {"id"},
                      {"id", "name"})
               .ValueOrDie();
  auto d =
      DigestRows(*IdNameTable({1, 2, 3, 5}, {"a", "x", "c", "E"}), {"id"}, {"id", "name"})
          .ValueOrDie();
  auto diffs = CompareRowSets(c, d, "Silver", "the fold", 10, &total);
  ASSERT_EQ(total, 4);
  ASSERT_EQ(diffs.size(), 4u);
  EXPECT_EQ(diffs[0].key, "id=2");
  EXPECT_EQ(diffs[0].what, "2 rows in Silver, 1 in the fold");
  EXPECT_EQ(diffs[1].key, "id=3");
  EXPECT_EQ(diffs[1].what, "in the fold, missing from Silver");
  EXPECT_EQ(diffs[2].key, "id=4");
  EXPECT_EQ(diffs[2].what, "in Silver, not in the fold");
  EXPECT_EQ(diffs[3].key, "id=5");
  EXPECT_EQ(CompareRowSets(c, d, "Silver", "the fold", 1, &total).size(), 1u);
  EXPECT_EQ(total, 4);
  EXPECT_FALSE(DigestRows(*IdNameTable({1}, {"a"}), {"id"}, {"nope"}).ok());
}

class VerifyTableTest : public BronzeFixture {
 protected:
  TableVerification Verify(const SourceReader* source = nullptr) {
    auto v =
        VerifyTable(catalog_.get(), io_, bronze_id_, silver_id_, {"public", "t"}, source);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : TableVerification{};
  }
};

TEST_F(VerifyTableTest, SilverEqualsTheFoldUntilDamaged) {
  EXPECT_EQ(Verify().skipped,
            "no Silver table yet (the next `floe silver` pass builds it)");
  std::vector<Row> rows;
  for (int64_t i = 0; i < 50; ++i) {
    rows.push_back({"r", 100, static_cast<int32_t>(i), i, "v" + std::to_string(i)});
  }
  Append(rows, 100);
  Merge();
  Append({{"u", 200, 0, 7, "seven"}, {"d", 200, 1, 8, std::nullopt}}, 200);
  Merge();
  // Bronze moves on past Silver's watermark: verify still compares up to 200.
  Append({{"u", 300, 0, 9, "nine"}}, 300);
  TableVerification v = Verify();
  EXPECT_TRUE(v.consistent()) << FormatVerification(v);
  EXPECT_EQ(v.watermark, 200u);
  EXPECT_EQ(v.bronze_lsn, 300u);
  EXPECT_EQ(v.silver_digest.rows, 49);
  EXPECT_EQ(v.key, std::vector<std::string>{"id"});
  EXPECT_EQ(v.columns, (std::vector<std::string>{"id", "name"}));
  EXPECT_NE(
      FormatVerification(v).find("Silver vs fold(Bronze <= watermark): OK (49 rows"),
      std::string::npos)
      << FormatVerification(v);

  // A fake source: as Silver, then one row changed.
  std::shared_ptr<arrow::Table> live;
  SourceReader reader = [&](const config::QualifiedName&) -> arrow::Result<SourceRows> {
    return SourceRows{live, 400};
  };
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  ice::ScanOptions scan;
  scan.columns = std::vector<std::string>{"id", "name"};
  live = ice::ScanToArrow(*silver, scan).ValueOrDie();
  v = Verify(&reader);
  EXPECT_EQ(v.source, SourceCheck::kMatches) << FormatVerification(v);
  live = IdNameTable({1}, {"one"});
  v = Verify(&reader);
  EXPECT_EQ(v.source, SourceCheck::kMovedOn);  // Bronze holds 300 > 200
  EXPECT_TRUE(v.consistent());
  EXPECT_NE(FormatVerification(v).find("source moved on since watermark"),
            std::string::npos);
  Merge();
  Merge();  // up to date
  v = Verify(&reader);
  EXPECT_EQ(v.source, SourceCheck::kDiffers) << FormatVerification(v);
  EXPECT_FALSE(v.consistent());

  // A row appended behind floe's back: a key that exists, and a new one.
  silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  auto schema = ice::ToArrowSchema(silver->schema()).ValueOrDie();
  arrow::Int64Builder id, lsn;
  arrow::StringBuilder name;
  ASSERT_TRUE(id.AppendValues(std::vector<int64_t>{3, 999}).ok());
  ASSERT_TRUE(name.AppendValues(std::vector<std::string>{"v3", "bogus"}).ok());
  ASSERT_TRUE(lsn.AppendValues(std::vector<int64_t>{100, 100}).ok());
  auto batch = arrow::RecordBatch::Make(
      schema, 2,
      {id.Finish().ValueOrDie(), name.Finish().ValueOrDie(), lsn.Finish().ValueOrDie()});
  auto files = WriteUpserts(*silver, batch, {"id"});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_TRUE(silver->AppendFiles(*files).ok());
  v = Verify();
  EXPECT_TRUE(v.silver_differs_from_bronze());
  EXPECT_FALSE(v.consistent());
  EXPECT_EQ(v.fold_differences_total, 2);
  ASSERT_EQ(v.fold_differences.size(), 2u);
  EXPECT_EQ(v.fold_differences[0].key, "id=3");
  EXPECT_EQ(v.fold_differences[0].what, "2 rows in Silver, 1 in the fold of Bronze");
  EXPECT_EQ(v.fold_differences[1].key, "id=999");
  const std::string report = FormatVerification(v);
  EXPECT_NE(report.find("DIFFERENT"), std::string::npos) << report;
  EXPECT_NE(report.find("id=999: in Silver, not in the fold of Bronze"),
            std::string::npos)
      << report;
}

}  // namespace
}  // namespace floe::silver
