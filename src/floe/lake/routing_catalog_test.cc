// OpenPipelineCatalog with `catalogs:` and `routes:`: each table lives in the catalog
// its route names, and nowhere else; floe's state stays in the main catalog;
// listings are the union; a table's commits go to its own catalog.
#include "floe/lake/routing_catalog.h"

#include <cstdlib>
#include <filesystem>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "floe/config/pipeline_config.h"
#include "floe/iceberg/file_io.h"
#include "floe/iceberg/schema.h"
#include "floe/iceberg/sql_catalog.h"
#include "floe/iceberg/table.h"
#include "floe/lake/catalog.h"

namespace floe::lake {
namespace {

namespace fs = std::filesystem;
namespace ice = floe::iceberg;

template <typename T>
T ValueOrDie(arrow::Result<T> result) {
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return std::move(result).ValueOrDie();
}

class RoutingCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("routing_catalog_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto parsed = config::ParsePipelineConfig(
        "service: shop\nsource: {conninfo: \"dbname=shop\"}\n"
        "warehouse: main-wh\n"
        "catalogs:\n"
        "  pii: {warehouse: pii-wh}\n"
        "routes:\n"
        "  - {tables: [hr.public_directory], catalog: main}\n"
        "  - {tables: [\"hr.*\", public.users], catalog: pii}\n",
        dir_.string(), [](const std::string&) { return std::nullopt; });
    ASSERT_TRUE(parsed.config) << parsed.errors[0].message;
    config_ = *parsed.config;
    catalog_ = ValueOrDie(OpenPipelineCatalog(config_, CatalogAccess::kCreate));
  }
  void TearDown() override {
    catalog_.reset();
    fs::remove_all(dir_);
  }

  // Each catalog on its own, as another reader opens it.
  std::unique_ptr<ice::SqlCatalog> Alone(const std::string& warehouse) {
    return ValueOrDie(ice::SqlCatalog::Open(
        "floe", ValueOrDie(ice::OpenSqlite((dir_ / warehouse / "catalog.db").string()))));
  }

  std::unique_ptr<ice::Table> Create(const config::QualifiedName& source) {
    const ice::TableIdentifier id =
        ice::IdentifierFromLevels(config_.BronzeIdentifier(source));
    EXPECT_TRUE(catalog_->CatalogOf(id)->EnsureNamespace(id.ns).ok());
    auto schema = ValueOrDie(
        ice::Schema::Make(0, {ice::NestedField::Required(1, "id", ice::Type::Long())}));
    return ValueOrDie(ice::Table::Create(
        catalog_.get(), io_, id, schema, ice::PartitionSpec{}, ice::SortOrder::Unsorted(),
        ice::Table::DefaultLocation(config_.WarehouseOf(source), id)));
  }

  fs::path dir_;
  config::PipelineConfig config_;
  std::unique_ptr<ice::Catalog> catalog_;
  std::shared_ptr<ice::FileIO> io_ = ice::MakeLocalFileIO();
};

TEST_F(RoutingCatalogTest, EachTableLivesInItsRoutesCatalogOnly) {
  const ice::Namespace root = {"bronze", "shop"};
  ASSERT_TRUE(catalog_->EnsureNamespace(root).ok());
  ASSERT_TRUE(
      catalog_->UpdateNamespaceProperties(root, {{"floe.confirmed", "42"}}, {}).ok());
  auto salaries = Create({"hr", "salaries"});
  auto users = Create({"public", "users"});
  auto orders = Create({"public", "orders"});
  auto directory = Create({"hr", "public_directory"});

  auto main = Alone("main-wh");
  auto pii = Alone("pii-wh");
  const ice::TableIdentifier salaries_id{{"bronze", "shop", "hr"}, "salaries"};
  const ice::TableIdentifier users_id{{"bronze", "shop", "public"}, "users"};
  const ice::TableIdentifier orders_id{{"bronze", "shop", "public"}, "orders"};
  const ice::TableIdentifier directory_id{{"bronze", "shop", "hr"}, "public_directory"};
  EXPECT_TRUE(ValueOrDie(pii->TableExists(salaries_id)));
  EXPECT_TRUE(ValueOrDie(pii->TableExists(users_id)));
  EXPECT_FALSE(ValueOrDie(pii->TableExists(orders_id)));
  EXPECT_FALSE(ValueOrDie(pii->TableExists(directory_id)));
  EXPECT_FALSE(ValueOrDie(main->TableExists(salaries_id)));
  EXPECT_FALSE(ValueOrDie(main->TableExists(users_id)));
  EXPECT_TRUE(ValueOrDie(main->TableExists(orders_id)));
  EXPECT_TRUE(ValueOrDie(main->TableExists(directory_id)));
  // The files too: under each catalog's own warehouse.
  EXPECT_TRUE(
      salaries->metadata_location().starts_with("file://" + (dir_ / "pii-wh").string()))
      << salaries->metadata_location();
  EXPECT_TRUE(
      orders->metadata_location().starts_with("file://" + (dir_ / "main-wh").string()))
      << orders->metadata_location();

  // floe's state: in the main catalog only.
  EXPECT_EQ(ValueOrDie(main->LoadNamespaceProperties(root)).at("floe.confirmed"), "42");
  EXPECT_FALSE(ValueOrDie(pii->NamespaceExists(root)) &&
               ValueOrDie(pii->LoadNamespaceProperties(root)).contains("floe.confirmed"));

  // Listings are the union; the service's Bronze tables are all found.
  EXPECT_EQ(ValueOrDie(catalog_->ListTables({"bronze", "shop", "public"})),
            (std::vector<ice::TableIdentifier>{orders_id, users_id}));
  EXPECT_EQ(ValueOrDie(catalog_->ListTables({"bronze", "shop", "hr"})),
            (std::vector<ice::TableIdentifier>{directory_id, salaries_id}));
  EXPECT_EQ(ValueOrDie(ListBronzeTables(catalog_.get(), config_)),
            (std::vector<ice::TableIdentifier>{directory_id, salaries_id, orders_id,
                                               users_id}));

  // A commit goes to the table's catalog; reloading through the router sees it.
  const std::string before = salaries->metadata_location();
  ASSERT_TRUE(salaries->AppendFiles({}).ok());
  EXPECT_NE(ValueOrDie(pii->LoadTable(salaries_id)), before);
  EXPECT_EQ(ValueOrDie(catalog_->LoadTable(salaries_id)),
            ValueOrDie(pii->LoadTable(salaries_id)));
  EXPECT_EQ(&salaries->catalog(), catalog_->CatalogOf(salaries_id));
  EXPECT_NE(catalog_->CatalogOf(salaries_id), catalog_->CatalogOf(orders_id));

  // Renames stay within a catalog.
  EXPECT_TRUE(catalog_->RenameTable(orders_id, salaries_id).IsInvalid());
}

TEST_F(RoutingCatalogTest, ATableLeftInTheOtherCatalogIsNotListed) {
  // public.orders written to the pii catalog directly (as if the routes had sent it
  // there before they changed): the routes say main, so the router does not list it.
  auto pii = Alone("pii-wh");
  const ice::TableIdentifier stray{{"bronze", "shop", "public"}, "orders"};
  ASSERT_TRUE(pii->EnsureNamespace(stray.ns).ok());
  auto schema = ValueOrDie(
      ice::Schema::Make(0, {ice::NestedField::Required(1, "id", ice::Type::Long())}));
  ASSERT_TRUE(ice::Table::Create(pii.get(), io_, stray, schema, ice::PartitionSpec{},
                                 ice::SortOrder::Unsorted(),
                                 "file://" + (dir_ / "pii-wh" / "stray").string())
                  .ok());
  auto users = Create({"public", "users"});
  EXPECT_EQ(ValueOrDie(catalog_->ListTables(stray.ns)),
            (std::vector<ice::TableIdentifier>{{{"bronze", "shop", "public"}, "users"}}));
  EXPECT_FALSE(ValueOrDie(catalog_->TableExists(stray)));
}

}  // namespace
}  // namespace floe::lake
