#include "floe/config/pipeline_config.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

namespace floe::config {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

ParseResult Parse(const std::string& yaml, std::map<std::string, std::string> env = {}) {
  return ParsePipelineConfig(yaml, "/etc/floe", Env(std::move(env)));
}

std::string AllErrors(const ParseResult& r) {
  std::string out;
  for (const auto& e : r.errors) out += e.Format("p.yaml") + "\n";
  return out;
}

TEST(PipelineConfig, MinimalFileGetsTheDocumentedDefaults) {
  auto r = Parse(
      "source:\n"
      "  conninfo: host=db dbname=shop user=floe\n"
      "warehouse: /var/lib/floe/wh\n");
  ASSERT_TRUE(r.config) << AllErrors(r);
  const PipelineConfig& c = *r.config;
  EXPECT_EQ(c.service, "shop");  // from dbname
  EXPECT_EQ(c.source.slot, "floe_shop");
  EXPECT_EQ(c.source.publication, "floe_shop");
  EXPECT_EQ(c.source.publication_mode, PublicationMode::kExisting);
  EXPECT_EQ(c.source.snapshot, SnapshotPolicy::kInitial);
  EXPECT_EQ(c.source.backfill_chunk_rows, 4096);
  EXPECT_EQ(c.catalog.type, CatalogType::kSqlite);
  EXPECT_EQ(c.catalog.uri, "/var/lib/floe/wh/catalog.db");
  EXPECT_EQ(c.catalog.name, "floe");
  EXPECT_EQ(c.warehouse, "file:///var/lib/floe/wh");
  EXPECT_EQ(c.checkpoint.interval, std::chrono::seconds(10));
  EXPECT_EQ(c.checkpoint.max_bytes, 256 << 20);
  EXPECT_EQ(c.BronzeIdentifier({"public", "orders"}),
            (std::vector<std::string>{"bronze", "shop", "public", "orders"}));
}

TEST(PipelineConfig, FullFileParsesEverySetting) {
  auto r = Parse(
      "service: billing\n"
      "source:\n"
      "  conninfo: postgresql://floe:${PGPW}@db/bill\n"
      "  slot: floe_billing_v2\n"
      "  publication:\n"
      "    name: cdc\n"
      "    create: tables\n"
      "    tables: [public.invoices, '\"Odd Schema\".\"my.table\"']\n"
      "  snapshot: never\n"
      "catalog:\n"
      "  type: postgres\n"
      "  conninfo: host=meta dbname=iceberg password=${CATPW}\n"
      "  name: lake\n"
      "warehouse: file:///data/wh\n"
      "checkpoint:\n"
      "  interval: 2s\n"
      "  max_bytes: 64MiB\n"
      "naming:\n"
      "  bronze_namespace: raw\n"
      "  tables:\n"
      "    public.invoices: {bronze: raw.billing.invoices_v2, silver: "
      "curated.invoices}\n",
      {{"PGPW", "p@ss"}, {"CATPW", "s3cret"}});
  ASSERT_TRUE(r.config) << AllErrors(r);
  const PipelineConfig& c = *r.config;
  EXPECT_EQ(c.service, "billing");
  EXPECT_EQ(c.source.conninfo, "postgresql://floe:p@ss@db/bill");
  EXPECT_EQ(c.source.slot, "floe_billing_v2");
  EXPECT_EQ(c.source.publication, "cdc");
  EXPECT_EQ(c.source.publication_mode, PublicationMode::kTables);
  ASSERT_EQ(c.source.publication_tables.size(), 2u);
  EXPECT_EQ(c.source.publication_tables[1].schema, "Odd Schema");
  EXPECT_EQ(c.source.publication_tables[1].table, "my.table");
  EXPECT_EQ(c.source.snapshot, SnapshotPolicy::kNever);
  EXPECT_EQ(c.catalog.type, CatalogType::kPostgres);
  EXPECT_EQ(c.catalog.uri, "host=meta dbname=iceberg password=s3cret");
  EXPECT_EQ(c.catalog.name, "lake");
  EXPECT_EQ(c.checkpoint.interval, std::chrono::seconds(2));
  EXPECT_EQ(c.checkpoint.max_bytes, 64 << 20);
  EXPECT_EQ(c.BronzeIdentifier({"public", "invoices"}),
            (std::vector<std::string>{"raw", "billing", "invoices_v2"}));
  EXPECT_EQ(c.BronzeIdentifier({"public", "other"}),
            (std::vector<std::string>{"raw", "billing", "public", "other"}));
}

TEST(PipelineConfig, ReportsEveryErrorWithLineColumnAndAHint) {
  auto r = Parse(
      "servce: x\n"  // line 1: typo
      "source:\n"
      "  conninfo: dbname=a\n"
      "  slot: Bad-Slot\n"       // line 4
      "  snapshot: sometimes\n"  // line 5
      "checkpoint:\n"
      "  interval: soon\n");  // line 7; and warehouse is missing
  ASSERT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 5u) << AllErrors(r);
  EXPECT_EQ(r.errors[0].line, 1);  // the missing warehouse is reported on the root
  const ConfigError* typo = nullptr;
  for (const auto& e : r.errors) {
    if (e.message.find("servce") != std::string::npos) typo = &e;
  }
  ASSERT_NE(typo, nullptr) << AllErrors(r);
  EXPECT_EQ(typo->column, 1);
  EXPECT_EQ(typo->hint, "did you mean `service`?");
  EXPECT_EQ(r.errors[2].line, 4);
  EXPECT_EQ(r.errors[2].column, 9);
  EXPECT_NE(r.errors[2].hint.find("lower-case"), std::string::npos);
  EXPECT_EQ(r.errors[3].line, 5);
  EXPECT_EQ(r.errors[4].line, 7);
  EXPECT_NE(r.errors[4].hint.find("10s"), std::string::npos);
  EXPECT_EQ(r.errors[4].Format("p.yaml").substr(0, 16), "p.yaml:7:13: err");
}

TEST(PipelineConfig, InvalidYamlPointsAtTheProblem) {
  auto r = Parse("source:\n  conninfo: [unclosed\nwarehouse: /w\n");
  ASSERT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_GT(r.errors[0].line, 0);
  EXPECT_NE(r.errors[0].message.find("not valid YAML"), std::string::npos);
}

TEST(PipelineConfig, MissingEnvironmentVariableNamesItButNotTheSecret) {
  auto r = Parse(
      "source:\n"
      "  conninfo: host=db dbname=shop password=${NOPE}\n"
      "warehouse: /w\n");
  ASSERT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_NE(r.errors[0].message.find("NOPE"), std::string::npos);
  EXPECT_NE(r.errors[0].hint.find("conninfo_file"), std::string::npos);
}

TEST(PipelineConfig, BadConninfoIsReportedWithoutItsValues) {
  auto r = Parse(
      "service: s\n"
      "source:\n"
      "  conninfo: host=db password=hunter2 nonsense_key=1\n"
      "warehouse: /w\n");
  ASSERT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_NE(r.errors[0].message.find("not a valid libpq connection string"),
            std::string::npos);
  EXPECT_EQ(AllErrors(r).find("hunter2"), std::string::npos) << AllErrors(r);
  // libpq quotes the text around the fault: a URI whole, a bad %-escape's token.
  for (const char* conninfo : {"postgresql://u:Sekr1tPW@[127.0.0.1:5432/db",
                               "postgresql://u:Sekr1tPW%@127.0.0.1:5432/db",
                               "host=db password=Sekr1t PW"}) {
    auto bad = Parse(std::string("service: s\nsource:\n  conninfo: \"") + conninfo +
                     "\"\nwarehouse: /w\n");
    ASSERT_FALSE(bad.config) << conninfo;
    EXPECT_EQ(AllErrors(bad).find("Sekr1t"), std::string::npos) << AllErrors(bad);
  }
}

TEST(PipelineConfig, SecretsComeFromFilesAndNeverAppearInTheRedactedDump) {
  auto dir = std::filesystem::temp_directory_path() / "floe_config_test_secret";
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "conninfo") << "host=db dbname=shop password=hunter2\n"; }
  auto r = ParsePipelineConfig("source:\n  conninfo_file: conninfo\nwarehouse: wh\n",
                               dir.string(), Env({}));
  ASSERT_TRUE(r.config) << AllErrors(r);
  EXPECT_EQ(r.config->source.conninfo, "host=db dbname=shop password=hunter2");
  EXPECT_EQ(r.config->warehouse, "file://" + (dir / "wh").string());
  const std::string dump = r.config->ToRedactedYaml();
  EXPECT_EQ(dump.find("hunter2"), std::string::npos) << dump;
  EXPECT_NE(dump.find("<redacted>"), std::string::npos);
  std::filesystem::remove_all(dir);

  auto both = Parse("source:\n  conninfo: a=b\n  conninfo_file: f\nwarehouse: /w\n");
  ASSERT_FALSE(both.config);
  EXPECT_NE(AllErrors(both).find("both"), std::string::npos);
}

TEST(PipelineConfig, ThePrimaryConninfoOfAStandbySourceIsASecretThatMustParse) {
  auto dir = std::filesystem::temp_directory_path() / "floe_config_test_primary";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "primary") << "host=primary dbname=shop password=hunter3\n";
  }
  auto r = ParsePipelineConfig(
      "source:\n  conninfo: host=standby dbname=shop\n  primary_conninfo_file: "
      "primary\nwarehouse: wh\n",
      dir.string(), Env({}));
  ASSERT_TRUE(r.config) << AllErrors(r);
  EXPECT_EQ(r.config->source.primary_conninfo,
            "host=primary dbname=shop password=hunter3");
  const std::string dump = r.config->ToRedactedYaml();
  EXPECT_EQ(dump.find("hunter3"), std::string::npos) << dump;
  EXPECT_NE(dump.find("primary_conninfo: <redacted>"), std::string::npos) << dump;
  std::filesystem::remove_all(dir);

  auto bad = Parse(
      "source:\n  conninfo: dbname=shop\n  primary_conninfo: \"host=p password=Sekr1t "
      "nonsense\"\nwarehouse: /w\n");
  ASSERT_FALSE(bad.config);
  EXPECT_NE(AllErrors(bad).find("source.primary_conninfo"), std::string::npos)
      << AllErrors(bad);
  EXPECT_EQ(AllErrors(bad).find("Sekr1t"), std::string::npos) << AllErrors(bad);
}

TEST(PipelineConfig, ServiceNameIsRequiredWhenTheConninfoHasNoDatabase) {
  auto r = Parse("source:\n  conninfo: host=db\nwarehouse: /w\n");
  ASSERT_FALSE(r.config);
  EXPECT_NE(AllErrors(r).find("set `service`"), std::string::npos) << AllErrors(r);
}

TEST(PipelineConfig, PublicationForms) {
  auto all = Parse(
      "source:\n  conninfo: dbname=d\n  publication: {name: p, create: all_tables}\n"
      "warehouse: /w\n");
  ASSERT_TRUE(all.config) << AllErrors(all);
  EXPECT_EQ(all.config->source.publication_mode, PublicationMode::kAllTables);

  auto listed = Parse(
      "source:\n  conninfo: dbname=d\n  publication: {name: p, tables: [a.b]}\n"
      "warehouse: /w\n");
  ASSERT_TRUE(listed.config) << AllErrors(listed);
  EXPECT_EQ(listed.config->source.publication_mode, PublicationMode::kTables);

  auto empty = Parse(
      "source:\n  conninfo: dbname=d\n  publication: {name: p, create: tables}\n"
      "warehouse: /w\n");
  EXPECT_FALSE(empty.config);

  auto bad_table = Parse(
      "source:\n  conninfo: dbname=d\n  publication: {tables: [justatable]}\n"
      "warehouse: /w\n");
  ASSERT_FALSE(bad_table.config);
  EXPECT_NE(AllErrors(bad_table).find("schema-qualified"), std::string::npos);
}

TEST(PipelineConfig, RejectsOtherRemoteWarehousesAndUnknownCatalogTypes) {
  auto r = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: gs://bucket/wh\ncatalog: {type: "
      "glue}\n");
  ASSERT_FALSE(r.config);
  ASSERT_EQ(r.errors.size(), 2u) << AllErrors(r);
  EXPECT_NE(r.errors[0].message.find("neither a local directory nor on S3"),
            std::string::npos);
  EXPECT_NE(r.errors[1].hint.find("sqlite"), std::string::npos);
  auto s3a = Parse("source:\n  conninfo: dbname=d\nwarehouse: s3a://b/wh\n");
  ASSERT_EQ(s3a.errors.size(), 1u) << AllErrors(s3a);
  EXPECT_NE(s3a.errors[0].hint.find("warehouse: s3://b/wh"), std::string::npos);
  for (const char* prefix : {"a/../x", "a//b", "./a", "q?x=1", "a#frag", "a/.."}) {
    auto odd = Parse(std::string("source:\n  conninfo: dbname=d\nwarehouse: \"s3://b/") +
                     prefix + "\"\ncatalog: {path: c.db}\n");
    ASSERT_EQ(odd.errors.size(), 1u) << prefix << "\n" << AllErrors(odd);
    EXPECT_NE(odd.errors[0].message.find("in its prefix"), std::string::npos) << prefix;
  }
  for (const char* prefix : {"a b/ünï", "lake/prod/", "", "a.b/c..d"}) {
    auto fine = Parse(std::string("source:\n  conninfo: dbname=d\nwarehouse: \"s3://b/") +
                      prefix + "\"\ncatalog: {path: c.db}\n");
    EXPECT_TRUE(fine.config) << prefix << "\n" << AllErrors(fine);
  }
  auto nobucket = Parse("source:\n  conninfo: dbname=d\nwarehouse: s3:///wh\n");
  ASSERT_EQ(nobucket.errors.size(), 1u) << AllErrors(nobucket);
  EXPECT_NE(nobucket.errors[0].message.find("names no bucket"), std::string::npos);
}

TEST(PipelineConfig, AnS3WarehouseWithItsSettingsAndALocalCatalog) {
  // The SQLite catalog cannot default into the bucket.
  auto no_catalog = Parse("source:\n  conninfo: dbname=d\nwarehouse: s3://lake/prod/\n");
  ASSERT_EQ(no_catalog.errors.size(), 1u) << AllErrors(no_catalog);
  EXPECT_NE(no_catalog.errors[0].hint.find("set catalog.path to a local file"),
            std::string::npos);

  auto r = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: s3://lake/prod/\n"
      "catalog: {path: cat.db}\n"
      "s3:\n  endpoint: http://127.0.0.1:9000/\n  region: eu-west-1\n"
      "  access_key_id: AKIDEXAMPLE\n  secret_access_key: ${S3_SECRET}\n"
      "  connect_timeout: 2s\n  request_timeout: 90s\n  max_attempts: 4\n",
      {{"S3_SECRET", "wJalrXUtnFEMI"}});
  ASSERT_TRUE(r.config) << AllErrors(r);
  const PipelineConfig& c = *r.config;
  EXPECT_EQ(c.warehouse, "s3://lake/prod");
  EXPECT_EQ(c.catalog.uri, "/etc/floe/cat.db");
  EXPECT_EQ(c.s3.endpoint, "http://127.0.0.1:9000/");
  EXPECT_TRUE(c.s3.path_style);  // the default with an endpoint
  EXPECT_EQ(c.s3.region, "eu-west-1");
  EXPECT_EQ(c.s3.access_key_id, "AKIDEXAMPLE");
  EXPECT_EQ(c.s3.secret_access_key, "wJalrXUtnFEMI");
  EXPECT_EQ(c.s3.connect_timeout_s, 2);
  EXPECT_EQ(c.s3.request_timeout_s, 90);
  EXPECT_EQ(c.s3.max_attempts, 4);
  const std::string dump = c.ToRedactedYaml();
  EXPECT_EQ(dump.find("wJalrXUtnFEMI"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("AKIDEXAMPLE"), std::string::npos) << dump;
  EXPECT_NE(dump.find("http://127.0.0.1:9000/"), std::string::npos) << dump;

  auto bad = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: /w\n"
      "s3:\n  endpoint: 127.0.0.1:9000\n  path_style: maybe\n  access_key_id: x\n"
      "  max_attempts: 0\n  bucket: b\n");
  ASSERT_FALSE(bad.config);
  const std::string all = AllErrors(bad);
  EXPECT_NE(all.find("has no http:// or https://"), std::string::npos) << all;
  EXPECT_NE(all.find("path_style"), std::string::npos) << all;
  EXPECT_NE(all.find("both `access_key_id` and `secret_access_key`"), std::string::npos)
      << all;
  EXPECT_NE(all.find("max_attempts"), std::string::npos) << all;
  EXPECT_NE(all.find("bucket"), std::string::npos) << all;
}

TEST(PipelineConfig, ARestCatalogWithItsSettings) {
  auto r = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: s3://lake/prod\n"
      "catalog:\n  type: rest\n  uri: https://cat.example.com/api/catalog/\n"
      "  warehouse: prod\n  client_id: floe\n  client_secret: ${CAT_SECRET}\n"
      "  scope: PRINCIPAL_ROLE:ALL\n  headers: {X-Iceberg-Access-Delegation: "
      "vended-credentials}\n  request_timeout: 5s\n  max_attempts: 2\n",
      {{"CAT_SECRET", "oauth-s3cret"}});
  ASSERT_TRUE(r.config) << AllErrors(r);
  const PipelineConfig& c = *r.config;
  EXPECT_EQ(c.catalog.type, CatalogType::kRest);
  EXPECT_EQ(c.catalog.rest.uri, "https://cat.example.com/api/catalog");
  EXPECT_EQ(c.catalog.rest.warehouse, "prod");
  EXPECT_EQ(c.catalog.rest.client_id, "floe");
  EXPECT_EQ(c.catalog.rest.client_secret, "oauth-s3cret");
  EXPECT_EQ(c.catalog.rest.scope, "PRINCIPAL_ROLE:ALL");
  EXPECT_EQ(c.catalog.rest.headers.at("X-Iceberg-Access-Delegation"),
            "vended-credentials");
  EXPECT_EQ(c.catalog.rest.request_timeout_s, 5);
  EXPECT_EQ(c.catalog.rest.max_attempts, 2);
  const std::string dump = c.ToRedactedYaml();
  EXPECT_EQ(dump.find("oauth-s3cret"), std::string::npos) << dump;
  EXPECT_EQ(dump.find("vended-credentials"), std::string::npos) << dump;
  EXPECT_NE(dump.find("https://cat.example.com/api/catalog/v1/oauth/tokens"),
            std::string::npos)
      << dump;

  auto token = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: /w\n"
      "catalog: {type: rest, uri: \"http://127.0.0.1:8181\", token: abc}\n");
  ASSERT_TRUE(token.config) << AllErrors(token);
  EXPECT_EQ(token.config->catalog.rest.token, "abc");
  EXPECT_EQ(token.config->catalog.rest.max_attempts, 4);

  auto bad = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: /w\n"
      "catalog: {type: rest, uri: \"127.0.0.1:8181\", token: a, client_id: b, "
      "path: c.db, headers: [x]}\n");
  ASSERT_FALSE(bad.config);
  std::string all = AllErrors(bad);
  EXPECT_NE(all.find("has no http:// or https://"), std::string::npos) << all;
  EXPECT_NE(all.find("`token` or `client_id` and `client_secret`, not both"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("takes `uri`, not `path`"), std::string::npos) << all;
  EXPECT_NE(all.find("`headers` must be a mapping"), std::string::npos) << all;

  auto missing = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: /w\n"
      "catalog: {type: rest, client_id: b, headers: {\"Bad Name\": x}}\n");
  all = AllErrors(missing);
  EXPECT_NE(all.find("needs `uri`"), std::string::npos) << all;
  EXPECT_NE(all.find("both `client_id` and `client_secret`"), std::string::npos) << all;
  EXPECT_NE(all.find("header `Bad Name`"), std::string::npos) << all;

  // REST settings on another catalog are refused with the fix.
  auto sqlite = Parse(
      "source:\n  conninfo: dbname=d\nwarehouse: /w\n"
      "catalog: {uri: \"http://127.0.0.1:8181\"}\n");
  ASSERT_EQ(sqlite.errors.size(), 1u) << AllErrors(sqlite);
  EXPECT_NE(sqlite.errors[0].hint.find("type: rest"), std::string::npos);
}

TEST(PipelineConfig, SilverSectionDefaultsAndSettings) {
  auto defaults = Parse("source:\n  conninfo: dbname=shop\nwarehouse: /w\n");
  ASSERT_TRUE(defaults.config) << AllErrors(defaults);
  EXPECT_EQ(defaults.config->silver.every, std::chrono::hours(4));
  EXPECT_EQ(defaults.config->silver.concurrency, 5);
  EXPECT_TRUE(defaults.config->silver.keys.empty());
  EXPECT_EQ(defaults.config->SilverIdentifier({"public", "orders"}),
            (std::vector<std::string>{"silver", "shop", "public", "orders"}));

  auto r = Parse(
      "source:\n  conninfo: dbname=shop\nwarehouse: /w\n"
      "naming:\n"
      "  silver_namespace: curated\n"
      "  tables:\n"
      "    public.invoices: {silver: gold.billing.invoices}\n"
      "silver:\n"
      "  every: 30m\n"
      "  concurrency: 2\n"
      "  keys:\n"
      "    public.events: [tenant_id, event_id]\n"
      "    '\"Odd\".\"t\"': [id]\n");
  ASSERT_TRUE(r.config) << AllErrors(r);
  const PipelineConfig& c = *r.config;
  EXPECT_EQ(c.silver.every, std::chrono::minutes(30));
  EXPECT_EQ(c.silver.concurrency, 2);
  ASSERT_EQ(c.silver.keys.size(), 2u);
  EXPECT_EQ(c.silver.keys.at(QualifiedName{"public", "events"}),
            (std::vector<std::string>{"tenant_id", "event_id"}));
  EXPECT_EQ(c.silver.keys.at(QualifiedName{"Odd", "t"}), std::vector<std::string>{"id"});
  EXPECT_EQ(c.SilverIdentifier({"public", "orders"}),
            (std::vector<std::string>{"curated", "shop", "public", "orders"}));
  EXPECT_EQ(c.SilverIdentifier({"public", "invoices"}),
            (std::vector<std::string>{"gold", "billing", "invoices"}));
  const std::string dump = c.ToRedactedYaml();
  EXPECT_NE(dump.find("concurrency: 2"), std::string::npos) << dump;
  EXPECT_NE(dump.find("public.events: [tenant_id, event_id]"), std::string::npos) << dump;
  // The dump (its redacted conninfo put back) parses back to the same settings.
  std::string reparsable = dump;
  reparsable.replace(reparsable.find("<redacted>"), 10, "dbname=shop");
  auto again = Parse(reparsable);
  ASSERT_TRUE(again.config) << AllErrors(again) << dump;
  EXPECT_EQ(again.config->silver.keys, c.silver.keys);
  EXPECT_EQ(again.config->silver.every, c.silver.every);
}

TEST(PipelineConfig, MetricsListenAddress) {
  auto defaults = Parse("source:\n  conninfo: dbname=shop\nwarehouse: /w\n");
  ASSERT_TRUE(defaults.config) << AllErrors(defaults);
  EXPECT_EQ(defaults.config->metrics.listen, "127.0.0.1:9464");
  auto set = Parse(
      "source:\n  conninfo: dbname=shop\nwarehouse: /w\nmetrics:\n  listen: "
      "0.0.0.0:0\n");
  ASSERT_TRUE(set.config) << AllErrors(set);
  EXPECT_EQ(set.config->metrics.listen, "0.0.0.0:0");
  EXPECT_NE(set.config->ToRedactedYaml().find("listen: 0.0.0.0:0"), std::string::npos);
  auto off = Parse(
      "source:\n  conninfo: dbname=shop\nwarehouse: /w\nmetrics: {listen: \"\"}\n");
  ASSERT_TRUE(off.config) << AllErrors(off);
  EXPECT_EQ(off.config->metrics.listen, "");
  auto bad = Parse(
      "source:\n  conninfo: dbname=shop\nwarehouse: /w\nmetrics:\n  listen: "
      "localhost\n  port: 3\n");
  ASSERT_FALSE(bad.config);
  const std::string all = AllErrors(bad);
  EXPECT_NE(all.find("p.yaml:5:11: error: `metrics.listen` must be host:port"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("unknown key `port` in `metrics`"), std::string::npos) << all;
}

TEST(PipelineConfig, SilverSectionErrorsHaveLineColumnAndHint) {
  auto r = Parse(
      "source:\n  conninfo: dbname=shop\nwarehouse: /w\n"
      "silver:\n"
      "  every: soon\n"
      "  concurrency: 0\n"
      "  keyz: {}\n"
      "  keys:\n"
      "    events: [id]\n"
      "    public.a: []\n"
      "    public.b: id\n"
      "    public.c: [id, id]\n");
  ASSERT_FALSE(r.config);
  const std::string all = AllErrors(r);
  ASSERT_EQ(r.errors.size(), 7u) << all;
  EXPECT_NE(all.find("p.yaml:5:10: error: `silver.every`: `soon` is not a duration"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:6:16: error: `silver.concurrency` must be a whole number"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:7:3: error: unknown key `keyz` in `silver`"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("did you mean `keys`?"), std::string::npos) << all;
  EXPECT_NE(all.find("p.yaml:9:5: error: `events` is not a schema-qualified table name"),
            std::string::npos)
      << all;
  EXPECT_NE(
      all.find("p.yaml:10:15: error: the key of `public.a` must be a non-empty list"),
      std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:12:20: error: key column `id` is listed twice"),
            std::string::npos)
      << all;
  // `public.b: id` is a scalar, not a list.
  EXPECT_NE(all.find("p.yaml:11:15: error: the key of `public.b`"), std::string::npos)
      << all;
}

TEST(PipelineConfig, BackfillChunkRows) {
  auto ok = Parse(
      "source:\n"
      "  conninfo: host=db dbname=shop\n"
      "  backfill_chunk_rows: 250\n"
      "warehouse: /wh\n");
  ASSERT_TRUE(ok.config) << AllErrors(ok);
  EXPECT_EQ(ok.config->source.backfill_chunk_rows, 250);
  EXPECT_NE(ok.config->ToRedactedYaml().find("backfill_chunk_rows: 250"),
            std::string::npos);
  for (const char* bad : {"0", "-5", "many", "2000000"}) {
    auto r = Parse(std::string("source:\n"
                               "  conninfo: host=db dbname=shop\n"
                               "  backfill_chunk_rows: ") +
                   bad + "\nwarehouse: /wh\n");
    EXPECT_FALSE(r.config) << bad;
    EXPECT_NE(AllErrors(r).find("p.yaml:3:"), std::string::npos) << AllErrors(r);
    EXPECT_NE(AllErrors(r).find("backfill_chunk_rows"), std::string::npos);
  }
}

TEST(PipelineConfig, SnapshotWorkers) {
  auto defaults = Parse("source:\n  conninfo: host=db dbname=shop\nwarehouse: /wh\n");
  ASSERT_TRUE(defaults.config) << AllErrors(defaults);
  EXPECT_EQ(defaults.config->source.snapshot_workers, 2);
  auto ok = Parse(
      "source:\n"
      "  conninfo: host=db dbname=shop\n"
      "  snapshot_workers: 8\n"
      "warehouse: /wh\n");
  ASSERT_TRUE(ok.config) << AllErrors(ok);
  EXPECT_EQ(ok.config->source.snapshot_workers, 8);
  EXPECT_NE(ok.config->ToRedactedYaml().find("snapshot_workers: 8"), std::string::npos);
  for (const char* bad : {"0", "65", "-1", "two", "1.5"}) {
    auto r = Parse(std::string("source:\n"
                               "  conninfo: host=db dbname=shop\n"
                               "  snapshot_workers: ") +
                   bad + "\nwarehouse: /wh\n");
    EXPECT_FALSE(r.config) << bad;
    EXPECT_NE(
        AllErrors(r).find("p.yaml:3:21: error: `source.snapshot_workers` must be a whole "
                          "number from 1 to 64"),
        std::string::npos)
        << AllErrors(r);
  }
}

TEST(PipelineConfig, SilverWriteModesAndTargetFileSize) {
  auto defaults = Parse("source:\n  conninfo: host=db dbname=shop\nwarehouse: /wh\n");
  ASSERT_TRUE(defaults.config) << AllErrors(defaults);
  const SilverConfig& d = defaults.config->silver;
  EXPECT_EQ(d.write_mode, SilverWriteMode::kMergeOnRead);
  EXPECT_TRUE(d.write_modes.empty());
  EXPECT_EQ(d.target_file_size, int64_t{128} << 20);
  EXPECT_EQ(d.WriteModeOf({"public", "orders"}), SilverWriteMode::kMergeOnRead);

  auto r = Parse(
      "source:\n  conninfo: host=db dbname=shop\nwarehouse: /wh\n"
      "silver:\n"
      "  write_mode: copy-on-write\n"
      "  write_modes:\n"
      "    public.events: merge-on-read\n"
      "    public.not_published: merge-on-read\n"
      "    '\"Odd\".\"t.1\"': copy-on-write\n"
      "  target_file_size: 64MiB\n"
      "  memory_limit: 96MiB\n"
      "  spill_dir: /var/spill\n");
  ASSERT_TRUE(r.config) << AllErrors(r);
  const SilverConfig& c = r.config->silver;
  EXPECT_EQ(c.write_mode, SilverWriteMode::kCopyOnWrite);
  EXPECT_EQ(c.WriteModeOf({"public", "events"}), SilverWriteMode::kMergeOnRead);
  EXPECT_EQ(c.WriteModeOf({"Odd", "t.1"}), SilverWriteMode::kCopyOnWrite);
  EXPECT_EQ(c.WriteModeOf({"public", "orders"}), SilverWriteMode::kCopyOnWrite);
  EXPECT_EQ(c.write_modes.size(), 3u);
  EXPECT_EQ(c.target_file_size, int64_t{64} << 20);
  EXPECT_EQ(c.memory_limit, int64_t{96} << 20);
  EXPECT_EQ(c.spill_dir, "/var/spill");
  const std::string dump = r.config->ToRedactedYaml();
  EXPECT_NE(dump.find("write_mode: copy-on-write"), std::string::npos) << dump;
  EXPECT_NE(dump.find("public.events: merge-on-read"), std::string::npos) << dump;
  EXPECT_NE(dump.find("target_file_size: 67108864"), std::string::npos) << dump;
  // The dump parses back to the same settings.
  auto again = Parse("source:\n  conninfo: host=db dbname=shop\nwarehouse: /wh\n" +
                     dump.substr(dump.find("silver:")));
  ASSERT_TRUE(again.config) << AllErrors(again);
  EXPECT_EQ(again.config->silver.write_modes, c.write_modes);
  EXPECT_EQ(again.config->silver.target_file_size, c.target_file_size);
  EXPECT_EQ(again.config->silver.memory_limit, c.memory_limit);
  EXPECT_EQ(again.config->silver.spill_dir, c.spill_dir);

  auto bad = Parse(
      "source:\n  conninfo: host=db dbname=shop\nwarehouse: /wh\n"
      "silver:\n"
      "  write_mode: cow\n"
      "  write_modes:\n"
      "    events: copy-on-write\n"
      "    public.a: merge_on_read\n"
      "  target_file_size: 512KiB\n"
      "  memory_limit: 32MiB\n");
  ASSERT_FALSE(bad.config);
  const std::string all = AllErrors(bad);
  ASSERT_EQ(bad.errors.size(), 5u) << all;
  EXPECT_NE(all.find("p.yaml:10:17: error: `silver.memory_limit` must be a size of "
                     "at least 64MiB"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:5:15: error: `silver.write_mode` must be merge-on-read or "
                     "copy-on-write, not `cow`"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:7:5: error: `events` is not a schema-qualified table name"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:8:15: error: `silver.write_modes.public.a` must be "
                     "merge-on-read or copy-on-write, not `merge_on_read`"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("p.yaml:9:21: error: `silver.target_file_size` must be a size of "
                     "at least 1MiB"),
            std::string::npos)
      << all;
  auto not_a_map = Parse(
      "source:\n  conninfo: host=db dbname=shop\nwarehouse: /wh\n"
      "silver:\n  write_modes: copy-on-write\n");
  ASSERT_FALSE(not_a_map.config);
  EXPECT_NE(AllErrors(not_a_map).find("`silver.write_modes` must map schema.table"),
            std::string::npos)
      << AllErrors(not_a_map);
}

TEST(ParseQualifiedName, HandlesQuotesAndRejectsMalformedNames) {
  EXPECT_EQ(ParseQualifiedName("public.orders"), (QualifiedName{"public", "orders"}));
  EXPECT_EQ(ParseQualifiedName("\"a.b\".\"c\"\"d\""), (QualifiedName{"a.b", "c\"d"}));
  EXPECT_FALSE(ParseQualifiedName("orders"));
  EXPECT_FALSE(ParseQualifiedName("a.b.c"));
  EXPECT_FALSE(ParseQualifiedName("a."));
  EXPECT_FALSE(ParseQualifiedName("\"open.b"));
  EXPECT_EQ((QualifiedName{"a.b", "C"}).ToString(), "\"a.b\".\"C\"");
}

TEST(ParseDurationAndSize, AcceptTheDocumentedUnits) {
  EXPECT_EQ(ParseDuration("500ms"), std::chrono::milliseconds(500));
  EXPECT_EQ(ParseDuration("10"), std::chrono::seconds(10));
  EXPECT_EQ(ParseDuration("4h"), std::chrono::hours(4));
  EXPECT_FALSE(ParseDuration("10 s"));
  EXPECT_FALSE(ParseDuration("s"));
  EXPECT_EQ(ParseByteSize("256MiB"), int64_t{256} << 20);
  EXPECT_EQ(ParseByteSize("1GB"), 1'000'000'000);
  EXPECT_FALSE(ParseByteSize("lots"));
}

}  // namespace
}  // namespace floe::config
