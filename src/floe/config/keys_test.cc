#include "floe/config/keys.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "floe/config/pipeline_config.h"

namespace floe::config {
namespace {

// The settings table of docs/configuration.md: from its header line to the first
// line that is not a table row.
std::string DocumentedTable() {
  std::ifstream in(std::string(FLOE_DOCS_DIR) + "/configuration.md");
  EXPECT_TRUE(in) << FLOE_DOCS_DIR << "/configuration.md";
  std::string line, out;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line == "| key | default | meaning |") in_table = true;
    if (!in_table) continue;
    if (!line.starts_with("|")) break;
    out += line + "\n";
  }
  return out;
}

TEST(ConfigKeys, TheDocumentedSettingsTableIsTheDeclaredOne) {
  EXPECT_EQ(DocumentedTable(), keys::SettingsTable())
      << "docs/configuration.md's settings table differs from the keys declared in "
         "src/floe/config/keys.h: put the table above in the docs";
}

TEST(ConfigKeys, EachSectionAllowsItsDeclaredKeys) {
  EXPECT_EQ(keys::KeysOf(""),
            (std::vector<std::string>{"service", "source", "catalog", "warehouse",
                                      "catalogs", "routes", "s3", "checkpoint", "naming",
                                      "silver", "metrics"}));
  EXPECT_EQ(keys::KeysOf("routes"),
            (std::vector<std::string>{"tables", "catalog", "bronze_namespace",
                                      "silver_namespace"}));
  EXPECT_EQ(
      keys::KeysOf("s3"),
      (std::vector<std::string>{
          "endpoint", "region", "path_style", "access_key_id", "access_key_id_file",
          "secret_access_key", "secret_access_key_file", "session_token",
          "session_token_file", "connect_timeout", "request_timeout", "max_attempts"}));
  EXPECT_EQ(keys::KeysOf("source"),
            (std::vector<std::string>{"conninfo", "conninfo_file", "slot", "publication",
                                      "snapshot", "backfill_chunk_rows",
                                      "snapshot_workers", "failover", "primary_conninfo",
                                      "primary_conninfo_file"}));
  EXPECT_EQ(keys::KeysOf("source.publication"),
            (std::vector<std::string>{"name", "create", "tables"}));
  EXPECT_EQ(
      keys::KeysOf("catalog"),
      (std::vector<std::string>{
          "type", "path", "conninfo", "conninfo_file", "name", "uri", "warehouse",
          "token", "token_file", "client_id", "client_secret", "client_secret_file",
          "oauth2_server_uri", "scope", "headers", "request_timeout", "max_attempts"}));
}

TEST(ConfigKeys, DeclaredDefaultsAreTheDefaultsTheParserGives) {
  ParseResult r = ParsePipelineConfig(
      "service: shop\nsource: {conninfo: \"dbname=shop\"}\nwarehouse: /w\n", "/",
      [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(r.config);
  const PipelineConfig& c = *r.config;
  for (const keys::Key* key : keys::All()) {
    const std::string text(key->default_text.substr(1, key->default_text.size() - 2));
    switch (key->kind) {
      case keys::Kind::kInteger:
        EXPECT_EQ(text, std::to_string(key->number)) << key->path;
        EXPECT_GE(key->number, key->min) << key->path;
        EXPECT_LE(key->number, key->max) << key->path;
        break;
      case keys::Kind::kDuration:
        ASSERT_TRUE(ParseDuration(text)) << key->path;
        EXPECT_EQ(ParseDuration(text)->count(), key->number) << key->path;
        break;
      case keys::Kind::kByteSize:
        ASSERT_TRUE(ParseByteSize(text)) << key->path;
        EXPECT_EQ(*ParseByteSize(text), key->number) << key->path;
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(c.source.backfill_chunk_rows, keys::kBackfillChunkRows.number);
  EXPECT_EQ(c.checkpoint.interval.count(), keys::kCheckpointInterval.number);
  EXPECT_EQ(c.silver.every.count(), keys::kSilverEvery.number);
  EXPECT_EQ(c.silver.target_file_size, keys::kSilverTargetFileSize.number);
}

TEST(ConfigKeys, RangesComeFromTheDeclarations) {
  auto errors = [](const std::string& yaml,
                   const std::string& source = "{conninfo: \"dbname=shop\"}") {
    ParseResult r = ParsePipelineConfig(
        "service: shop\nsource: " + source + "\nwarehouse: /w\n" + yaml, "/",
        [](const std::string&) { return std::nullopt; });
    std::string all;
    for (const auto& e : r.errors) all += e.message + "\n";
    return all;
  };
  EXPECT_NE(errors("silver: {concurrency: 257}")
                .find("`silver.concurrency` must be a whole number from 1 to 256"),
            std::string::npos);
  EXPECT_EQ(errors("silver: {concurrency: 256}"), "");
  EXPECT_NE(errors("checkpoint: {interval: 99ms}")
                .find("`checkpoint.interval` must be a duration of at least 100ms"),
            std::string::npos);
  EXPECT_EQ(errors("checkpoint: {interval: 100ms}"), "");
  EXPECT_NE(errors("silver: {every: 999ms}")
                .find("`silver.every` must be a duration of at least 1s"),
            std::string::npos);
  EXPECT_NE(
      errors("checkpoint: {max_bytes: 1023KiB}")
          .find("`checkpoint.max_bytes` must be a size of at least 1MiB, not 1023KiB"),
      std::string::npos);
  // A value that is no size at all says so, not that it is too small.
  EXPECT_NE(errors("silver: {memory_limit: lots}")
                .find("`silver.memory_limit`: `lots` is not a size (a whole number"),
            std::string::npos);
  EXPECT_NE(errors("checkpoint: {interval: soon}")
                .find("`checkpoint.interval`: `soon` is not a duration"),
            std::string::npos);
  EXPECT_NE(errors("catalog: {type: glue}")
                .find("`catalog.type` must be sqlite, postgres or rest, not `glue`"),
            std::string::npos);
  EXPECT_NE(errors("", "{conninfo: \"dbname=shop\", publication: {create: some}}")
                .find("`source.publication.create` must be all_tables, tables or no"),
            std::string::npos);
}

// Every declared key is in the redacted dump at its path (of a pipeline with a
// PostgreSQL catalog, or of one with a REST catalog for the REST settings), and no
// secret's value is.
TEST(ConfigKeys, TheRedactedDumpHoldsEveryKeyAndNoSecret) {
  const std::string common =
      "service: shop\n"
      "source:\n  conninfo: \"dbname=shop password=SOURCE-SECRET\"\n"
      "  primary_conninfo: \"host=primary dbname=shop password=SOURCE-SECRET-2\"\n"
      "  publication: {name: p, create: tables, tables: [public.a]}\n"
      "warehouse: /w\n"
      "s3: {access_key_id: S3-KEY-ID, secret_access_key: S3-SECRET, session_token: "
      "S3-TOKEN}\n"
      "naming: {tables: {public.a: {bronze: b.x.a}}}\n"
      "silver: {keys: {public.a: [id]}, write_modes: {public.a: copy-on-write}}\n";
  std::vector<YAML::Node> dumps;
  for (const std::string catalog :
       {"catalog: {type: postgres, conninfo: \"dbname=cat password=CATALOG-SECRET\"}\n",
        "catalog: {type: rest, uri: \"http://127.0.0.1:8181\", token: CATALOG-SECRET, "
        "headers: {X-Api-Key: CATALOG-SECRET-HEADER}}\n",
        "catalog: {type: rest, uri: \"http://127.0.0.1:8181\", client_id: floe, "
        "client_secret: CATALOG-SECRET-OAUTH}\n",
        "catalogs:\n  pii:\n    catalog: {type: postgres, conninfo: \"dbname=c "
        "password=CATALOG-SECRET-2\"}\n    warehouse: s3://b/p\n"
        "  lake:\n    catalog: {type: rest, uri: \"http://127.0.0.1:8181\", token: "
        "CATALOG-SECRET-3}\n    warehouse: s3://c\n"
        "routes:\n  - {tables: [\"hr.*\"], catalog: pii, bronze_namespace: bp, "
        "silver_namespace: sp}\n  - {tables: \"*\", catalog: lake}\n"}) {
    ParseResult r = ParsePipelineConfig(common + catalog, "/",
                                        [](const std::string&) { return std::nullopt; });
    ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].message);
    const std::string dump = r.config->ToRedactedYaml();
    EXPECT_EQ(dump.find("SOURCE-SECRET"), std::string::npos) << dump;
    EXPECT_EQ(dump.find("CATALOG-SECRET"), std::string::npos) << dump;
    EXPECT_EQ(dump.find("S3-"), std::string::npos) << dump;
    dumps.push_back(YAML::Load(dump));
  }
  for (const keys::Key* key : keys::All()) {
    if (key->path == "catalog.path") continue;  // neither catalog has one
    bool found = false;
    for (const YAML::Node& root : dumps) {
      YAML::Node node = YAML::Clone(root);
      std::string_view rest = key->path;
      bool here = true;
      while (true) {
        const size_t dot = rest.find('.');
        const std::string part(rest.substr(0, dot));
        if (node.IsSequence() && node.size() > 0) node = node[0];  // routes[]
        if (!node.IsMap() || !node[part]) {
          here = false;
          break;
        }
        node = node[part];
        if (dot == std::string_view::npos) break;
        rest.remove_prefix(dot + 1);
      }
      if (!here) continue;
      found = true;
      if (key->kind == keys::Kind::kSecret) {
        EXPECT_EQ(node.as<std::string>(), "<redacted>") << key->path;
      }
    }
    EXPECT_TRUE(found) << key->path << " is in no dump";
  }
}

}  // namespace
}  // namespace floe::config
