#include "floe/iceberg/vended_credentials.h"

#include <chrono>

#include <gtest/gtest.h>

namespace floe::iceberg {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StorageCredential Key(std::string id, int64_t expires_at_ms = 0) {
  return {id, "secret-" + id, "token-" + id, expires_at_ms};
}

TEST(VendedCredentials, TheLongestPrefixOfAWholeSegmentWins) {
  VendedCredentials vended;
  const int owner = 0;
  vended.Put("s3://lake/wh/db/orders", Key("orders"), &owner);
  vended.Put("s3a://lake/wh/", Key("warehouse"), &owner);
  EXPECT_EQ(vended.For("s3://lake/wh/db/orders/data/a.parquet")->access_key_id, "orders");
  // s3a:// and s3n:// are the same objects.
  EXPECT_EQ(vended.For("s3n://lake/wh/db/orders/metadata/m.json")->access_key_id,
            "orders");
  // A sibling whose name starts the same is not under the prefix.
  EXPECT_EQ(vended.For("s3://lake/wh/db/orders_v2/data/a.parquet")->access_key_id,
            "warehouse");
  EXPECT_FALSE(vended.For("s3://lake/other/x.parquet"));
  EXPECT_FALSE(vended.For("s3://lakehouse/wh/x.parquet"));
  EXPECT_FALSE(vended.For("file:///lake/wh/db/orders/x.parquet"));
  // Put again replaces.
  vended.Put("s3://lake/wh/db/orders/", Key("orders2"), &owner);
  EXPECT_EQ(vended.For("s3://lake/wh/db/orders/data/a.parquet")->access_key_id,
            "orders2");
}

TEST(VendedCredentials, ExpiringOnesAreRefreshedAtMostEveryHalfMinute) {
  VendedCredentials vended;
  const int owner = 0;
  int refreshes = 0;
  std::function<void()> refresh = [&] {
    ++refreshes;
    vended.Put("s3://b/t", Key("fresh-" + std::to_string(refreshes), NowMs() + 60'000),
               &owner);
  };
  vended.Put("s3://b/t", Key("old", NowMs() + 3600'000), &owner, refresh);
  EXPECT_EQ(vended.For("s3://b/t/x")->access_key_id, "old");  // an hour left
  EXPECT_EQ(refreshes, 0);
  vended.Put("s3://b/t", Key("soon", NowMs() + 60'000), &owner);  // a minute left
  EXPECT_EQ(vended.For("s3://b/t/x")->access_key_id, "fresh-1");
  // The fresh ones expire within a minute too, but not refreshed again at once.
  EXPECT_EQ(vended.For("s3://b/t/x")->access_key_id, "fresh-1");
  EXPECT_EQ(refreshes, 1);
  // Once the catalog is gone, nobody is asked.
  vended.Forget(&owner);
  vended.Put("s3://c/t", Key("c", NowMs() - 1), nullptr);
  EXPECT_EQ(vended.For("s3://c/t/x")->access_key_id, "c");
}

TEST(VendedCredentials, ACredentialIsScopedToItsTable) {
  // A prefix wider than the table: narrowed to the table.
  EXPECT_EQ(ScopeToTable("s3://lake/", "s3://lake/wh/db/t"), "s3://lake/wh/db/t");
  // Narrower (its data files only): kept.
  EXPECT_EQ(ScopeToTable("s3a://lake/wh/db/t/data/", "s3://lake/wh/db/t"),
            "s3://lake/wh/db/t/data");
  // Apart from it (another table, another bucket): not used.
  EXPECT_FALSE(ScopeToTable("s3://lake/wh/db/other", "s3://lake/wh/db/t"));
  EXPECT_FALSE(ScopeToTable("s3://lake/wh/db/t2", "s3://lake/wh/db/t"));
  EXPECT_FALSE(ScopeToTable("s3://other/", "s3://lake/wh/db/t"));
}

TEST(VendedCredentials, PropertiesNeedBothKeys) {
  EXPECT_FALSE(CredentialFromProperties({{"s3.access-key-id", "a"}}));
  auto c = CredentialFromProperties({{"s3.access-key-id", "a"},
                                     {"s3.secret-access-key", "s"},
                                     {"s3.session-token", "t"},
                                     {"s3.session-token-expires-at-ms", "1234"}});
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, (StorageCredential{"a", "s", "t", 1234}));
}

}  // namespace
}  // namespace floe::iceberg
