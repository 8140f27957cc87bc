#include "floe/iceberg/sql_catalog.h"

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "floe/common/error.h"

namespace floe::iceberg {
namespace {

namespace fs = std::filesystem;

class SqlCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("FLOE_TEST_TMPDIR");
    dir_ = fs::path(base ? base : fs::temp_directory_path().string()) /
           ("sql_catalog_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    catalog_ = OpenCatalog();
  }
  void TearDown() override {
    catalog_.reset();
    fs::remove_all(dir_);
  }

  std::string DbPath() const { return (dir_ / "catalog.db").string(); }

  std::unique_ptr<SqlCatalog> OpenCatalog(const std::string& name = "floe") {
    auto conn = OpenSqlite(DbPath());
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    auto catalog = SqlCatalog::Open(name, std::move(*conn));
    EXPECT_TRUE(catalog.ok()) << catalog.status().ToString();
    return std::move(*catalog);
  }

  fs::path dir_;
  std::unique_ptr<SqlCatalog> catalog_;
};

const TableIdentifier kOrders{{"bronze", "shop", "public"}, "orders"};

TEST_F(SqlCatalogTest, RegisteredTableLoadsItsMetadataLocation) {
  ASSERT_TRUE(catalog_->CreateNamespace(kOrders.ns, {{"owner", "shop-team"}}).ok());
  ASSERT_TRUE(catalog_->RegisterTable(kOrders, "file:///w/orders/v1.metadata.json").ok());
  auto loc = catalog_->LoadTable(kOrders);
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(*loc, "file:///w/orders/v1.metadata.json");
  EXPECT_TRUE(*catalog_->TableExists(kOrders));
  auto props = catalog_->LoadNamespaceProperties(kOrders.ns);
  ASSERT_TRUE(props.ok());
  EXPECT_EQ(props->at("owner"), "shop-team");
  EXPECT_EQ(props->at("exists"), "true");
}

TEST_F(SqlCatalogTest, NamespacePropertiesAreUpdatedAndRemoved) {
  const Namespace ns{"bronze", "shop"};
  EXPECT_EQ(GetCatalogErrorKind(catalog_->UpdateNamespaceProperties(ns, {{"a", "1"}})),
            CatalogErrorKind::kNoSuchNamespace);
  ASSERT_TRUE(catalog_->CreateNamespace(ns, {{"a", "1"}, {"b", "2"}}).ok());
  ASSERT_TRUE(catalog_->UpdateNamespaceProperties(ns, {{"a", "10"}, {"c", "3"}}, {"b", "z"})
                  .ok());
  auto props = catalog_->LoadNamespaceProperties(ns);
  ASSERT_TRUE(props.ok());
  EXPECT_EQ(*props, (std::map<std::string, std::string>{
                        {"a", "10"}, {"c", "3"}, {"exists", "true"}}));
  // another catalog on the same file sees the update
  EXPECT_EQ(OpenCatalog()->LoadNamespaceProperties(ns)->at("a"), "10");
}

TEST_F(SqlCatalogTest, RegisteringTwiceOrIntoAMissingNamespaceFailsWithItsKind) {
  auto st = catalog_->RegisterTable(kOrders, "m1");
  EXPECT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kNoSuchNamespace) << st.ToString();
  ASSERT_TRUE(catalog_->EnsureNamespace(kOrders.ns).ok());
  ASSERT_TRUE(catalog_->EnsureNamespace(kOrders.ns).ok());  // idempotent
  ASSERT_TRUE(catalog_->RegisterTable(kOrders, "m1").ok());
  st = catalog_->RegisterTable(kOrders, "m2");
  EXPECT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kAlreadyExists) << st.ToString();
  EXPECT_EQ(*catalog_->LoadTable(kOrders), "m1");
  st = catalog_->CreateNamespace(kOrders.ns, {});
  EXPECT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kAlreadyExists);
  // A create that raced another writer's is reloaded and tried again
  // (floe::IsRetryable); a missing namespace is for the caller to handle.
  EXPECT_EQ(floe::ErrorKindOf(st), floe::ErrorKind::kCommitConflict);
  EXPECT_FALSE(floe::IsRetryable(catalog_->RegisterTable({{"missing"}, "t"}, "m")));
}

TEST_F(SqlCatalogTest, CommitIsACompareAndSwapOfTheMetadataLocation) {
  ASSERT_TRUE(catalog_->EnsureNamespace(kOrders.ns).ok());
  ASSERT_TRUE(catalog_->RegisterTable(kOrders, "m1").ok());
  ASSERT_TRUE(catalog_->CommitTable(kOrders, "m1", "m2").ok());
  EXPECT_EQ(*catalog_->LoadTable(kOrders), "m2");

  auto st = catalog_->CommitTable(kOrders, "m1", "m3");  // stale expectation
  EXPECT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kCommitFailed) << st.ToString();
  EXPECT_EQ(floe::ErrorKindOf(st), floe::ErrorKind::kCommitConflict);
  EXPECT_EQ(*catalog_->LoadTable(kOrders), "m2");

  st = catalog_->CommitTable({{"bronze"}, "missing"}, "m1", "m2");
  EXPECT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kNoSuchTable);
}

TEST_F(SqlCatalogTest, ConcurrentCommittersNeverLoseACommit) {
  ASSERT_TRUE(catalog_->EnsureNamespace(kOrders.ns).ok());
  ASSERT_TRUE(catalog_->RegisterTable(kOrders, "v0").ok());
  constexpr int kWriters = 4;
  constexpr int kCommitsEach = 50;
  std::vector<std::thread> writers;
  std::vector<std::vector<std::pair<std::string, std::string>>> done(kWriters);
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto catalog = OpenCatalog();  // its own connection, as another process has
      for (int i = 0; i < kCommitsEach; ++i) {
        const std::string next = "w" + std::to_string(w) + "-" + std::to_string(i);
        while (true) {
          auto current = catalog->LoadTable(kOrders);
          ASSERT_TRUE(current.ok()) << current.status().ToString();
          auto st = catalog->CommitTable(kOrders, *current, next);
          if (st.ok()) {
            done[w].emplace_back(*current, next);
            break;
          }
          ASSERT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kCommitFailed)
              << st.ToString();
        }
      }
    });
  }
  for (auto& t : writers) t.join();

  // Every commit replaced exactly the location it read: the history is one chain
  // from v0 through all kWriters * kCommitsEach commits.
  std::map<std::string, std::string> next_of;
  for (const auto& commits : done) {
    ASSERT_EQ(commits.size(), static_cast<size_t>(kCommitsEach));
    for (const auto& [from, to] : commits) {
      ASSERT_TRUE(next_of.emplace(from, to).second) << "two commits replaced " << from;
    }
  }
  std::string at = "v0";
  int length = 0;
  while (next_of.count(at)) {
    at = next_of[at];
    ++length;
  }
  EXPECT_EQ(length, kWriters * kCommitsEach);
  EXPECT_EQ(*catalog_->LoadTable(kOrders), at);
}

TEST_F(SqlCatalogTest, ListsNamespacesLevelByLevelAndTablesPerNamespace) {
  ASSERT_TRUE(catalog_->EnsureNamespace({"bronze", "shop", "public"}).ok());
  ASSERT_TRUE(catalog_->EnsureNamespace({"bronze", "billing", "public"}).ok());
  ASSERT_TRUE(catalog_->EnsureNamespace({"silver"}).ok());
  ASSERT_TRUE(catalog_->RegisterTable({{"bronze", "shop", "public"}, "b"}, "x").ok());
  ASSERT_TRUE(catalog_->RegisterTable({{"bronze", "shop", "public"}, "a"}, "y").ok());

  EXPECT_EQ(*catalog_->ListNamespaces({}),
            (std::vector<Namespace>{{"bronze"}, {"silver"}}));
  EXPECT_EQ(*catalog_->ListNamespaces({"bronze"}),
            (std::vector<Namespace>{{"bronze", "billing"}, {"bronze", "shop"}}));
  EXPECT_TRUE(*catalog_->NamespaceExists({"bronze", "shop"}));  // implied by a child
  EXPECT_FALSE(*catalog_->NamespaceExists({"bronze", "sho"}));
  auto tables = catalog_->ListTables({"bronze", "shop", "public"});
  ASSERT_TRUE(tables.ok());
  ASSERT_EQ(tables->size(), 2u);
  EXPECT_EQ((*tables)[0].name, "a");
  EXPECT_EQ((*tables)[1].name, "b");
  auto missing = catalog_->ListNamespaces({"nope"});
  EXPECT_EQ(GetCatalogErrorKind(missing.status()), CatalogErrorKind::kNoSuchNamespace);
}

TEST_F(SqlCatalogTest, NamespaceWildcardsAreMatchedLiterally) {
  ASSERT_TRUE(catalog_->EnsureNamespace({"a_b", "x"}).ok());
  EXPECT_TRUE(*catalog_->NamespaceExists({"a_b"}));
  EXPECT_FALSE(*catalog_->NamespaceExists({"a%"}));
  EXPECT_FALSE(*catalog_->NamespaceExists({"aXb"}));
}

TEST_F(SqlCatalogTest, DropRenameAndNonEmptyNamespaces) {
  const TableIdentifier a{{"bronze"}, "a"};
  const TableIdentifier b{{"archive"}, "b"};
  ASSERT_TRUE(catalog_->EnsureNamespace({"bronze"}).ok());
  ASSERT_TRUE(catalog_->RegisterTable(a, "m").ok());
  auto st = catalog_->DropNamespace({"bronze"});
  EXPECT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kNamespaceNotEmpty);
  st = catalog_->RenameTable(a, b);
  EXPECT_EQ(GetCatalogErrorKind(st), CatalogErrorKind::kNoSuchNamespace);
  ASSERT_TRUE(catalog_->EnsureNamespace({"archive"}).ok());
  ASSERT_TRUE(catalog_->RenameTable(a, b).ok());
  EXPECT_FALSE(*catalog_->TableExists(a));
  EXPECT_EQ(*catalog_->LoadTable(b), "m");
  ASSERT_TRUE(catalog_->DropNamespace({"bronze"}).ok());
  ASSERT_TRUE(catalog_->DropTable(b).ok());
  EXPECT_EQ(GetCatalogErrorKind(catalog_->DropTable(b)), CatalogErrorKind::kNoSuchTable);
}

TEST_F(SqlCatalogTest, CatalogsSharingAFileAreIsolatedByName) {
  ASSERT_TRUE(catalog_->EnsureNamespace({"bronze"}).ok());
  ASSERT_TRUE(catalog_->RegisterTable({{"bronze"}, "t"}, "mine").ok());
  auto other = OpenCatalog("other");
  EXPECT_FALSE(*other->TableExists({{"bronze"}, "t"}));
  EXPECT_TRUE(other->ListNamespaces({})->empty());
}

TEST_F(SqlCatalogTest, RejectsNamespaceLevelsWithDots) {
  auto st = catalog_->CreateNamespace({"bronze", "my.schema"}, {});
  EXPECT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("'my.schema'"), std::string::npos);
}

TEST_F(SqlCatalogTest, UnopenableFileSaysWhy) {
  auto conn = OpenSqlite((dir_ / "no" / "such" / "dir" / "c.db").string());
  ASSERT_FALSE(conn.ok());
  EXPECT_NE(conn.status().message().find("writable"), std::string::npos);
}

}  // namespace
}  // namespace floe::iceberg
