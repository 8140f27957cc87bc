// `catalogs:` and `routes:` (docs/configuration.md, "Several catalogs").
#include <map>
#include <random>
#include <string>

#include <fnmatch.h>

#include <gtest/gtest.h>

#include "floe/config/pipeline_config.h"

namespace floe::config {
namespace {

ParseResult Parse(const std::string& yaml) {
  return ParsePipelineConfig(
      "service: shop\nsource: {conninfo: \"dbname=shop\"}\nwarehouse: /w\n" + yaml,
      "/etc/floe", [](const std::string& name) -> std::optional<std::string> {
        if (name == "PII_TOKEN") return "pii-token-never-shown";
        return std::nullopt;
      });
}

std::string AllErrors(const ParseResult& r) {
  std::string out;
  for (const auto& e : r.errors) out += e.Format("p.yaml") + "\n";
  return out;
}

const char kTwoCatalogs[] =
    "catalogs:\n"
    "  pii:\n"
    "    catalog: {type: rest, uri: \"http://127.0.0.1:8181\", token: \"${PII_TOKEN}\"}\n"
    "    warehouse: s3://pii-bucket/lake\n"
    "  archive:\n"
    "    warehouse: /archive\n";

TEST(Routes, TablesGoToTheFirstMatchingRoutesCatalogAndNamespaces) {
  auto r = Parse(std::string(kTwoCatalogs) +
                 "routes:\n"
                 "  - tables: [hr.payroll_public]\n"
                 "    catalog: main\n"
                 "  - tables: [\"hr.*\", public.users]\n"
                 "    catalog: pii\n"
                 "    bronze_namespace: bronze_pii\n"
                 "  - tables: \"old_*.*\"\n"
                 "    catalog: archive\n"
                 "naming:\n"
                 "  tables:\n"
                 "    hr.renamed: {bronze: b.x.renamed, silver: s.x.renamed}\n");
  ASSERT_TRUE(r.config) << AllErrors(r);
  const PipelineConfig& c = *r.config;
  ASSERT_EQ(c.catalogs.size(), 2u);
  EXPECT_EQ(c.catalogs[0].key, "pii");
  EXPECT_EQ(c.catalogs[0].catalog.type, CatalogType::kRest);
  EXPECT_EQ(c.catalogs[0].catalog.rest.token, "pii-token-never-shown");
  EXPECT_EQ(c.catalogs[0].warehouse, "s3://pii-bucket/lake");
  // A SQLite catalog without a path lives in its own local warehouse.
  EXPECT_EQ(c.catalogs[1].catalog.type, CatalogType::kSqlite);
  EXPECT_EQ(c.catalogs[1].catalog.uri, "/archive/catalog.db");
  EXPECT_EQ(c.catalogs[1].warehouse, "file:///archive");

  // First match wins: the narrower rule above the wider one.
  EXPECT_EQ(c.RouteOf({"hr", "payroll_public"})->catalog, "main");
  EXPECT_EQ(c.RouteOf({"hr", "salaries"})->catalog, "pii");
  EXPECT_EQ(c.RouteOf({"public", "users"})->catalog, "pii");
  EXPECT_EQ(c.RouteOf({"public", "orders"}), nullptr);
  EXPECT_EQ(c.RouteOf({"old_2019", "orders"})->catalog, "archive");
  EXPECT_EQ(c.WarehouseOf(QualifiedName{"hr", "salaries"}), "s3://pii-bucket/lake");
  EXPECT_EQ(c.WarehouseOf(QualifiedName{"public", "orders"}), "file:///w");

  // The route's namespace names its Bronze tables; Silver keeps naming's.
  EXPECT_EQ(c.BronzeIdentifier({"hr", "salaries"}),
            (std::vector<std::string>{"bronze_pii", "shop", "hr", "salaries"}));
  EXPECT_EQ(c.SilverIdentifier({"hr", "salaries"}),
            (std::vector<std::string>{"silver", "shop", "hr", "salaries"}));
  // Identifiers back to their catalog.
  EXPECT_EQ(c.CatalogKeyOf({"bronze_pii", "shop", "hr", "salaries"}), "pii");
  EXPECT_EQ(c.CatalogKeyOf({"silver", "shop", "hr", "salaries"}), "pii");
  EXPECT_EQ(c.CatalogKeyOf({"bronze", "shop", "public", "orders"}), "main");
  EXPECT_EQ(c.CatalogKeyOf({"bronze", "shop", "old_2019", "orders"}), "archive");
  EXPECT_EQ(c.CatalogKeyOf({"b", "x", "renamed"}), "pii");  // naming.tables
  EXPECT_EQ(c.CatalogKeyOf({"s", "x", "renamed"}), "pii");
  // An hr table under the main Bronze namespace is not the route's: main.
  EXPECT_EQ(c.CatalogKeyOf({"bronze", "shop", "hr", "salaries"}), "main");
  // The service's own tables and namespace.
  EXPECT_EQ(c.CatalogKeyOf({"bronze", "shop", "pg_logical_messages"}), "main");
  EXPECT_EQ(c.CatalogKeyOf({"bronze", "shop"}), "main");
  EXPECT_EQ(c.BronzeRoots(), (std::vector<std::vector<std::string>>{
                                 {"bronze", "shop"}, {"bronze_pii", "shop"}}));

  // The dump shows both sections, never the token.
  const std::string dump = c.ToRedactedYaml();
  EXPECT_EQ(dump.find("pii-token-never-shown"), std::string::npos) << dump;
  EXPECT_NE(dump.find("s3://pii-bucket/lake"), std::string::npos) << dump;
  EXPECT_NE(dump.find("bronze_pii"), std::string::npos) << dump;
}

TEST(Routes, WithoutRoutesEverythingIsTheMainCatalogs) {
  auto r = Parse("");
  ASSERT_TRUE(r.config) << AllErrors(r);
  EXPECT_EQ(r.config->RouteOf({"hr", "x"}), nullptr);
  EXPECT_EQ(r.config->CatalogKeyOf({"bronze", "shop", "hr", "x"}), "main");
  EXPECT_EQ(r.config->BronzeRoots(),
            (std::vector<std::vector<std::string>>{{"bronze", "shop"}}));
}

TEST(Routes, ErrorsHaveLineColumnAndAHint) {
  auto r = Parse(std::string(kTwoCatalogs) +
                 "routes:\n"                                  // line 10
                 "  - tables: [\"hr.*\"]\n"                   // 11
                 "    catalog: pii\n"                         // 12
                 "  - tables: [hr.salaries, \"public.*\"]\n"  // 13
                 "    catalog: archive\n"                     // 14
                 "  - tables: [x.y]\n"                        // 15
                 "    catalog: glue\n"                        // 16
                 "  - tables: [nodot]\n"                      // 17
                 "    catalog: pii\n"                         // 18
                 "    bronze_namespace: a.b\n"                // 19
                 "  - catalog: pii\n"                         // 20
                 "  - tables: [\"*\"]\n"                      // 21
                 "    catalog: main\n"                        // 22
                 "  - tables: [sales.orders]\n"               // 23
                 "    catalog: main\n"                        // 24
                 "    colour: red\n");                        // 25
  ASSERT_FALSE(r.config);
  const std::string all = AllErrors(r);
  // A table routed twice: the later rule could never apply.
  EXPECT_NE(all.find("p.yaml:13:14: error: `hr.salaries` is routed already by `hr.*` on "
                     "line 11"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("move the narrower rule above the wider one"), std::string::npos);
  EXPECT_NE(all.find("p.yaml:16:14: error: route to unknown catalog `glue`"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("name one of `main` (the `catalog:` section), `pii`, `archive`"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:17:14: error: `nodot` is not a schema.table pattern"),
            std::string::npos)
      << all;
  EXPECT_NE(
      all.find("p.yaml:19:23: error: `bronze_namespace` must be one namespace level"),
      std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:20:5: error: a route needs `tables`"), std::string::npos)
      << all;
  // Everything after `*` is dead.
  EXPECT_NE(all.find("p.yaml:23:14: error: `sales.orders` is routed already by `*` on "
                     "line 21"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:25:5: error: unknown key `colour`"), std::string::npos)
      << all;
}

TEST(Routes, CatalogsNeedAWarehouseARouteAndAName) {
  auto r = Parse(
      "catalogs:\n"                                // 4
      "  main:\n"                                  // 5
      "    warehouse: /m\n"                        // 6
      "  spare:\n"                                 // 7
      "    catalog: {type: sqlite}\n"              // 8
      "  remote:\n"                                // 9
      "    catalog: {type: sqlite}\n"              // 10
      "    warehouse: s3://b/p\n"                  // 11
      "  odd:\n"                                   // 12
      "    catalog: {type: postgres, path: /x}\n"  // 13
      "    warehouse: /o\n"                        // 14
      "routes:\n"                                  // 15
      "  - {tables: \"a.*\", catalog: remote}\n"   // 16
      "  - {tables: \"b.*\", catalog: odd}\n");    // 17
  ASSERT_FALSE(r.config);
  const std::string all = AllErrors(r);
  EXPECT_NE(all.find("p.yaml:5:3: error: `main` names the `catalog:` section"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:8:5: error: missing `catalogs.spare.warehouse`"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("catalog `spare` is not named by any route"), std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:10:14: error: a SQLite catalog cannot live in the "
                     "object-store warehouse s3://b/p"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("set catalogs.remote.catalog.path to a local file"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:13:37: error: a postgres catalog takes `conninfo`"),
            std::string::npos)
      << all;

  auto lonely = Parse("catalogs:\n  pii: {warehouse: /p}\n");
  ASSERT_FALSE(lonely.config);
  EXPECT_NE(AllErrors(lonely).find("p.yaml:5:3: error: `catalogs` is set but no "
                                   "`routes` send a table to them"),
            std::string::npos)
      << AllErrors(lonely);
}

TEST(Routes, PatternsThatWouldMatchNothingAreRefused) {
  auto r = Parse(
      "catalogs:\n  pii: {warehouse: /p}\n"
      "routes:\n"
      "  - tables: [PUBLIC.ORDERS, \"hr.[abc\", '\"Sales\".\"Q*\"', \"hr.[a-z]*\"]\n"
      "    catalog: pii\n");
  ASSERT_FALSE(r.config);
  const std::string all = AllErrors(r);
  EXPECT_NE(all.find("`PUBLIC.ORDERS`: capitals outside double quotes"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("`hr.[abc`: a `[` without its `]`"), std::string::npos) << all;
  // Quoted capitals and a closed range are fine.
  EXPECT_EQ(all.find("error: `\"Sales\""), std::string::npos) << all;
  EXPECT_EQ(all.find("error: `hr.[a-z]*`"), std::string::npos) << all;
  EXPECT_EQ(r.errors.size(), 2u) << all;
}

TEST(Routes, CatalogsAndNamespacesMustBeApart) {
  auto r = Parse(
      "catalogs:\n"                                                       // 4
      "  inner:\n    warehouse: /w/inner\n"                               // 5-6
      "  again:\n    catalog: {path: /w/catalog.db}\n"                    // 7-8
      "    warehouse: /again\n"                                           // 9
      "  ok:\n    warehouse: /ok\n"                                       // 10-11
      "routes:\n"                                                         // 12
      "  - {tables: \"a.*\", catalog: inner}\n"                           // 13
      "  - {tables: \"b.*\", catalog: again}\n"                           // 14
      "  - {tables: \"c.*\", catalog: ok, bronze_namespace: silver}\n");  // 15
  ASSERT_FALSE(r.config);
  const std::string all = AllErrors(r);
  EXPECT_NE(all.find("p.yaml:6:16: error: catalog `inner`'s warehouse file:///w/inner "
                     "and the main catalog's file:///w are one inside the other"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:8:14: error: catalog `again` is the main catalog again "
                     "(same path and name)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:15:52: error: `silver` is both a Bronze and a Silver "
                     "namespace"),
            std::string::npos)
      << all;
  // Two spellings of one directory or file are one.
  for (const char* alias : {"//w", "/./w", "/w/", "/x/../w"}) {
    auto aliased = Parse(std::string("catalogs:\n  b:\n    catalog: {path: /b.db}\n"
                                     "    warehouse: ") +
                         alias + "\nroutes:\n  - {tables: \"a.*\", catalog: b}\n");
    ASSERT_FALSE(aliased.config) << alias;
    EXPECT_NE(AllErrors(aliased).find("are one inside the other"), std::string::npos)
        << alias << "\n"
        << AllErrors(aliased);
  }
  auto file = Parse(
      "catalogs:\n  b:\n    catalog: {path: /x/../w//catalog.db}\n    warehouse: /b\n"
      "routes:\n  - {tables: \"a.*\", catalog: b}\n");
  ASSERT_FALSE(file.config);
  EXPECT_NE(AllErrors(file).find("is the main catalog again"), std::string::npos)
      << AllErrors(file);
  // Without routes too.
  auto same = Parse("naming: {bronze_namespace: lake, silver_namespace: lake}\n");
  ASSERT_FALSE(same.config);
  EXPECT_NE(AllErrors(same).find("`lake` is both a Bronze and a Silver namespace"),
            std::string::npos);
}

TEST(Routes, CredentialsInAUriOrWarehouseAreRefusedUnshown) {
  auto r = Parse(
      "catalogs:\n"
      "  a:\n    catalog: {type: rest, uri: \"http://u:uri-SECRET@h/p\"}\n"
      "    warehouse: /a\n"
      "  b:\n    catalog: {type: rest, uri: \"http://h/p?token=q-SECRET\"}\n"
      "    warehouse: \"s3://AKIA:s3-SECRET@bucket/p\"\n"
      "routes:\n  - {tables: \"a.*\", catalog: a}\n  - {tables: \"b.*\", catalog: b}\n");
  ASSERT_FALSE(r.config);
  const std::string all = AllErrors(r);
  EXPECT_EQ(all.find("SECRET"), std::string::npos) << all;
  EXPECT_NE(all.find("catalog `uri` must not hold credentials"), std::string::npos)
      << all;
  EXPECT_NE(all.find("catalog `uri` must not have a query or a fragment"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("`s3://` must be followed by a bucket name"), std::string::npos)
      << all;
  for (const char* endpoint : {"http://ak:EP-SECRET@127.0.0.1:9000",
                               "http://h:1/?X-Amz-Security-Token=EP-SECRET"}) {
    auto e = Parse(std::string("s3: {endpoint: \"") + endpoint + "\"}\n");
    ASSERT_FALSE(e.config) << endpoint;
    EXPECT_EQ(AllErrors(e).find("SECRET"), std::string::npos) << AllErrors(e);
    EXPECT_NE(AllErrors(e).find("s3 `endpoint` must be scheme://host[:port] only"),
              std::string::npos)
        << AllErrors(e);
  }
}

// Randomised: for generated tables and routes, RouteOf is the first rule (in file
// order) whose pattern fnmatch-es, and CatalogKeyOf of the table's Bronze and Silver
// identifiers is that rule's catalog.
TEST(Routes, GeneratedRoutesAgreeWithAFirstMatchWalk) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::vector<std::string> schemas = {"hr", "public", "sales", "h_r"};
  const std::vector<std::string> tables = {"users", "payroll", "u", "orders_2020"};
  const std::vector<std::string> globs = {"*",        "h*",    "?r",      "u*", "[ps]*",
                                          "orders_*", "users", "payroll", "*s"};
  for (int round = 0; round < 200; ++round) {
    std::string yaml = "catalogs:\n  a: {warehouse: /a}\n  b: {warehouse: /b}\nroutes:\n";
    std::vector<std::pair<std::string, std::string>> rules;  // pattern, catalog
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      const std::string pattern =
          schemas[rng() % schemas.size()] + "." + globs[rng() % globs.size()];
      const std::string catalog = i % 2 == 0 ? "a" : "b";
      rules.emplace_back(pattern, catalog);
      yaml += "  - {tables: [\"" + pattern + "\"], catalog: " + catalog + "}\n";
    }
    auto r = Parse(yaml);
    if (!r.config) continue;  // a rule shadowed by an earlier one, or b unused
    for (const auto& schema : schemas) {
      for (const auto& table : tables) {
        std::string want = "main";
        for (const auto& [pattern, catalog] : rules) {
          const auto dot = pattern.find('.');
          if (fnmatch(pattern.substr(0, dot).c_str(), schema.c_str(), 0) == 0 &&
              fnmatch(pattern.substr(dot + 1).c_str(), table.c_str(), 0) == 0) {
            want = catalog;
            break;
          }
        }
        const Route* route = r.config->RouteOf({schema, table});
        EXPECT_EQ(route == nullptr ? "main" : route->catalog, want)
            << schema << "." << table << "\n"
            << yaml;
        EXPECT_EQ(r.config->CatalogKeyOf(r.config->BronzeIdentifier({schema, table})),
                  want);
        EXPECT_EQ(r.config->CatalogKeyOf(r.config->SilverIdentifier({schema, table})),
                  want);
      }
    }
  }
}

}  // namespace
}  // namespace floe::config
