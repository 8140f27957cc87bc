// The hand-written Bronze table the Silver unit tests (merge_test, backfill_test,
// verify_test) build Silver from. A header of the tests only: not part of
// floe_silver, and not a test binary of its own (the CMake glob takes *_test.cc).
#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <gtest/gtest.h>

#include "floe/iceberg/scan.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/lake/keys.h"
#include "floe/silver/merge.h"

namespace floe::silver::testing {

namespace ice = floe::iceberg;
namespace fs = std::filesystem;

struct Row {
  std::string op;
  int64_t lsn;
  int32_t seq;
  std::optional<int64_t> id;  // null: a `t` row, or a key the test leaves NULL
  std::optional<std::string> name;
  /// cdc_unchanged (null when empty).
  std::vector<std::string> unchanged = {};
};

// A Bronze-shaped table (id, name and the CDC columns) on a local SQLite catalog,
// written by hand, and its Silver table merged with a small target file size (so
// that it gets several buckets).
class BronzeFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test (and per parameter of a parameterized one: "/" made "_").
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("floe_silver_") + test->test_suite_name() + "_" +
                       test->name() + "_" + std::to_string(test->line());
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / name;
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
    auto table = ice::Table::Create(catalog_.get(), io_, bronze_id_, *schema,
                                    ice::PartitionSpec{}, ice::SortOrder::Unsorted(),
                                    ice::Table::DefaultLocation(warehouse_, bronze_id_),
                                    {{lake::kPrimaryKeyProperty, "[\"id\"]"},
                                     {lake::kSourceTableProperty, "public.t"}});
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
      ASSERT_TRUE((r.id ? id.Append(*r.id) : id.AppendNull()).ok());
      ASSERT_TRUE((r.name ? name.Append(*r.name) : name.AppendNull()).ok());
    }
    auto schema = ice::ToArrowSchema(bronze_->schema()).ValueOrDie();
    auto list_builder = arrow::MakeBuilder(schema->field(5)->type()).ValueOrDie();
    auto& lists = static_cast<arrow::ListBuilder&>(*list_builder);
    auto& items = static_cast<arrow::StringBuilder&>(*lists.value_builder());
    for (const auto& r : rows) {
      if (r.unchanged.empty()) {
        ASSERT_TRUE(lists.AppendNull().ok());
        continue;
      }
      ASSERT_TRUE(lists.Append().ok());
      for (const auto& c : r.unchanged) ASSERT_TRUE(items.Append(c).ok());
    }
    auto unchanged = lists.Finish().ValueOrDie();
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

  MergeStats Merge(int64_t target = 2048) {
    MergeOptions options;
    options.target_file_bytes = target;
    auto stats =
        MergeTable(catalog_.get(), io_, bronze_id_, silver_id_, warehouse_, options);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : MergeStats{};
  }

  // Silver's rows as id -> name (SilverRowsOf: of another Silver table).
  std::map<int64_t, std::string> SilverRows() { return SilverRowsOf(silver_id_); }
  // Every row of `silver` (no deletes) as one batch in a random order (`rng`): the
  // rows of a file another engine wrote, not sorted by the key.
  template <typename Rng>
  std::shared_ptr<arrow::RecordBatch> ShuffledRows(const ice::Table& silver, Rng& rng) {
    auto all = ice::ScanToArrow(silver).ValueOrDie()->CombineChunks().ValueOrDie();
    std::vector<int64_t> order(static_cast<size_t>(all->num_rows()));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    arrow::Int64Builder indices;
    EXPECT_TRUE(indices.AppendValues(order).ok());
    return arrow::compute::Take(all, indices.Finish().ValueOrDie())
        .ValueOrDie()
        .table()
        ->CombineChunksToBatch()
        .ValueOrDie();
  }

  std::map<int64_t, std::string> SilverRowsOf(const ice::TableIdentifier& silver) {
    auto table = ice::Table::Load(catalog_.get(), io_, silver).ValueOrDie();
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

  std::map<std::string, std::string> SilverSummary() {
    auto table = ice::Table::Load(catalog_.get(), io_, silver_id_).ValueOrDie();
    return table->metadata().CurrentSnapshot()->summary;
  }

  fs::path dir_;
  std::unique_ptr<ice::Catalog> catalog_;
  std::shared_ptr<ice::FileIO> io_;
  std::string warehouse_;
  ice::TableIdentifier bronze_id_{{"bronze", "svc", "public"}, "t"};
  ice::TableIdentifier silver_id_{{"silver", "svc", "public"}, "t"};
  std::unique_ptr<ice::Table> bronze_;
};

}  // namespace floe::silver::testing
