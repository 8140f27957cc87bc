#include "floe/metrics/http_server.h"

#include <atomic>

#include <gtest/gtest.h>
#include <httplib.h>

namespace floe::metrics {
namespace {

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = registry_.AddCounter("floe_test_rows_total", "Rows.", {"table"});
    ASSERT_TRUE(c.ok()) << c.status();
    c->Inc({"public.orders"}, 3);
  }

  std::unique_ptr<MetricsServer> StartServer(ReadyCheck check = nullptr) {
    auto server = MetricsServer::Start("127.0.0.1:0", registry_, std::move(check));
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return nullptr;
    EXPECT_GT((*server)->port(), 0);
    return std::move(*server);
  }

  Registry registry_;
};

TEST_F(MetricsServerTest, ServesMetricsHealthAndNotFound) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  httplib::Client client("127.0.0.1", server->port());

  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(res->body, registry_.Render());
  EXPECT_NE(res->body.find("floe_test_rows_total{table=\"public.orders\"} 3\n"),
            std::string::npos);

  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");

  res = client.Get("/readyz");  // no check given: always ready
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ready");

  for (const char* path : {"/", "/metrics/x", "/nope"}) {
    res = client.Get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404) << path;
  }
  res = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  server->Stop();
  server->Stop();  // idempotent
  EXPECT_FALSE(httplib::Client("127.0.0.1", server->port()).Get("/healthz"));
}

TEST_F(MetricsServerTest, ReadinessFollowsTheCheck) {
  std::atomic<bool> caught_up = false;
  auto server = StartServer([&]() -> std::optional<std::string> {
    if (caught_up) return std::nullopt;
    return "initial copy of public.orders in progress";
  });
  ASSERT_NE(server, nullptr);
  httplib::Client client("127.0.0.1", server->port());

  auto res = client.Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->body, "initial copy of public.orders in progress");
  // Liveness does not depend on readiness.
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);

  caught_up = true;
  res = client.Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ready");
}

TEST_F(MetricsServerTest, StopRightAfterStartReturns) {
  // httplib ignores stop() before its accept loop runs; Start() must wait for it.
  for (int i = 0; i < 20; ++i) {
    auto server = StartServer();
    ASSERT_NE(server, nullptr);
    server->Stop();
  }
}

TEST_F(MetricsServerTest, BindFailureNamesAddressAndConfigKey) {
  auto first = StartServer();
  ASSERT_NE(first, nullptr);
  std::string address = "127.0.0.1:" + std::to_string(first->port());
  auto second = MetricsServer::Start(address, registry_);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(second.status().IsIOError());
  EXPECT_NE(second.status().message().find(address), std::string::npos)
      << second.status();
  EXPECT_NE(second.status().message().find("metrics.listen"), std::string::npos);
}

TEST(ParseListenAddressTest, Forms) {
  auto a = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9464);
  a = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  a = ParseListenAddress("localhost:80");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(ParseListenAddress(kDefaultListenAddress)->port, 9464);

  for (const char* bad : {"", "9464", ":9464", "host:", "host:x", "host:65536", "host:-1",
                          "::1:9464", "[::1]9464", "[::1", "host:80x"}) {
    auto r = ParseListenAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("metrics.listen"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace floe::metrics
