// `floe silver backfill` on a local catalog: the guard against exports older than
// Bronze's history, the column and key checks, seeding, and merges continuing from
// the export's LSN. tests/integration/test_silver_tools.py runs it end to end.
#include "floe/silver/backfill.h"

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
#include "floe/silver/verify.h"

namespace floe::silver {
namespace {

namespace ice = floe::iceberg;
namespace fs = std::filesystem;

constexpr char kPrefix[] = "floe_backfill_test_";

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

// An export as pyarrow writes it from `SELECT * FROM t`: int64 ids, strings.
std::shared_ptr<arrow::Table> Export(const std::map<int64_t, std::string>& rows,
                                     bool extra_column = false) {
  arrow::Int64Builder id;
  arrow::StringBuilder name;
  for (const auto& [k, v] : rows) {
    EXPECT_TRUE(id.Append(k).ok());
    EXPECT_TRUE(name.Append(v).ok());
  }
  arrow::FieldVector fields = {arrow::field("name", arrow::utf8()),
                               arrow::field("id", arrow::int64())};
  arrow::ArrayVector arrays = {name.Finish().ValueOrDie(), id.Finish().ValueOrDie()};
  if (extra_column) {
    fields.push_back(arrow::field("surprise", arrow::int32()));
    arrays.push_back(
        arrow::MakeArrayOfNull(arrow::int32(), static_cast<int64_t>(rows.size()))
            .ValueOrDie());
  }
  return arrow::Table::Make(arrow::schema(fields), arrays);
}

class BackfillTest : public BronzeFixture {
 protected:
  arrow::Result<BackfillStats> Backfill(const arrow::Table& rows, uint64_t lsn,
                                        bool replace = false) {
    BackfillTableOptions options;
    options.replace = replace;
    options.target_file_bytes = 2048;
    options.origin = "test export";
    return BackfillTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, rows,
                         lsn, options);
  }
};

TEST_F(BackfillTest, BronzeStartIsTheSmallestCommitLsn) {
  auto empty = BronzeStartLsn(bronze_->metadata(), *io_);
  EXPECT_FALSE(empty.ok());  // nothing committed yet
  Append({{"r", 100, 0, 1, "one"}, {"r", 100, 1, 2, "two"}}, 100);
  Append({{"u", 150, 0, 1, "uno"}}, 150);
  auto table = ice::Table::Load(catalog_.get(), io_, bronze_id_).ValueOrDie();
  EXPECT_EQ(BronzeStartLsn(table->metadata(), *io_).ValueOrDie(), 100u);
}

TEST_F(BackfillTest, SeedsSilverThenMergesContinueFromTheExportLsn) {
  // Bronze: the copy at 100, changes at 150 and 250.
  Append({{"r", 100, 0, 1, "one"}, {"r", 100, 1, 2, "two"}, {"r", 100, 2, 3, "three"}},
         100);
  Append({{"u", 150, 0, 1, "uno"}, {"d", 150, 1, 3, std::nullopt}}, 150);
  Append({{"c", 250, 0, 4, "four"}, {"u", 250, 1, 2, "dos"}}, 250);

  // An export older than Bronze's history is refused, saying why and what instead.
  auto refused = Backfill(*Export({{1, "one"}}), 99);
  ASSERT_FALSE(refused.ok());
  const std::string why = refused.status().message();
  EXPECT_NE(why.find("older than the start of Bronze's history"), std::string::npos)
      << why;
  EXPECT_NE(why.find("0/00000064"), std::string::npos) << why;
  EXPECT_NE(why.find("let `floe silver` build Silver from Bronze's own history"),
            std::string::npos)
      << why;
  EXPECT_FALSE(catalog_->TableExists(silver_id_).ValueOrDie());

  // Columns must match Bronze's row columns by name.
  auto extra = Backfill(*Export({{1, "uno"}}, /*extra_column=*/true), 200);
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("not Bronze row columns: surprise"),
            std::string::npos)
      << extra.status().message();
  auto only_ids = Export({{1, "uno"}})->RemoveColumn(0).ValueOrDie();
  auto missing = Backfill(*only_ids, 200);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing from the export: name"),
            std::string::npos)
      << missing.status().message();
  auto twice =
      arrow::ConcatenateTables({Export({{1, "uno"}}), Export({{1, "uno"}})}).ValueOrDie();
  auto duplicate = Backfill(*twice, 200);
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.status().message().find("key id=1 more than once"),
            std::string::npos)
      << duplicate.status().message();

  // The source at 200: what the changes up to 150 left. Seeded with watermark 200.
  auto seeded = Backfill(*Export({{1, "uno"}, {2, "two"}}), 200);
  ASSERT_TRUE(seeded.ok()) << seeded.status().ToString();
  EXPECT_EQ(seeded->rows, 2);
  EXPECT_EQ(seeded->bronze_start, 100u);
  auto silver = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
  EXPECT_EQ(SilverWatermark(silver->metadata()), 200u);
  EXPECT_EQ(silver->metadata().CurrentSnapshot()->summary.at(kSeededFromSummaryKey),
            "test export");
  EXPECT_EQ(SilverRows(), (std::map<int64_t, std::string>{{1, "uno"}, {2, "two"}}));

  // A second backfill is refused unless --replace.
  auto again = Backfill(*Export({{1, "uno"}, {2, "two"}}), 200);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already exists; pass --replace"),
            std::string::npos);

  // The next merge applies Bronze's changes after 200 only.
  Merge();
  EXPECT_EQ(SilverRows(),
            (std::map<int64_t, std::string>{{1, "uno"}, {2, "dos"}, {4, "four"}}));
  auto v =
      VerifyTable(catalog_.get(), io_, bronze_id_, silver_id_, {"public", "t"}, nullptr);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->consistent()) << FormatVerification(*v);

  // --replace seeds it again (an export at exactly Bronze's start is fine).
  auto replaced =
      Backfill(*Export({{1, "one"}, {2, "two"}, {3, "three"}}), 100, /*replace=*/true);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_TRUE(replaced->replaced);
  Merge();
  EXPECT_EQ(SilverRows(),
            (std::map<int64_t, std::string>{{1, "uno"}, {2, "dos"}, {4, "four"}}));
}

}  // namespace
}  // namespace floe::silver
