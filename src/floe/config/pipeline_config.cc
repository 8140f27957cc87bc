#include "floe/config/pipeline_config.h"
#include "floe/common/parse.h"
#include "floe/config/catalogs_config.h"
#include "floe/config/keys.h"
#include "floe/config/reader.h"
#include "floe/config/rest_config.h"
#include "floe/config/s3_config.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace floe::config {
namespace {

namespace fs = std::filesystem;

constexpr char kRedacted[] = "<redacted>";

std::vector<std::string> SplitDots(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t dot = text.find('.', start);
    out.push_back(text.substr(start, dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

}  // namespace

bool ValidNamespaceLevel(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c == '.' || std::isspace(c) || std::iscntrl(c)) return false;
  }
  return true;
}

namespace {

bool ValidSlotName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::islower(c) || std::isdigit(c) || c == '_';
  });
}

std::string SlotNameFor(const std::string& service) {
  std::string out = "floe_";
  for (unsigned char c : service) {
    out += (std::isalnum(c)) ? static_cast<char>(std::tolower(c)) : '_';
  }
  return out.substr(0, 63);
}

std::optional<std::string> DatabaseName(const std::string& conninfo) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &err);
  if (options == nullptr) {
    PQfreemem(err);
    return std::nullopt;
  }
  std::optional<std::string> dbname;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (std::string_view(o->keyword) == "dbname" && o->val && *o->val) dbname = o->val;
  }
  PQconninfoFree(options);
  return dbname;
}

}  // namespace

// Checks a conninfo parses, without ever repeating it.
bool CheckConninfo(Reader& r, const YAML::Node& at, const std::string& conninfo,
                   const std::string& what) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &err);
  if (options == nullptr) {
    // libpq's message quotes the text around the fault, which may be (part of) a
    // password ("invalid percent-encoded token: \"s3cret%\"", a whole URI): none
    // of it is repeated.
    PQfreemem(err);
    r.Error(at,
            "`" + what +
                "` is not a valid libpq connection string (its text is not shown: it "
                "may hold a password)",
            "use key=value pairs (host=... dbname=... user=...), quoting values with "
            "spaces or quotes in single quotes, or a postgresql://user@host/dbname URI "
            "with reserved characters %-escaped (e.g. @ as %40, % as %25)");
    return false;
  }
  PQconninfoFree(options);
  return true;
}

namespace {

void ParseSource(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!r.CheckDeclaredKeys(node, "source")) return;
  if (auto conninfo = r.Secret(node, "conninfo", "source", /*required=*/true)) {
    const YAML::Node at = node["conninfo"] ? node["conninfo"] : node["conninfo_file"];
    if (CheckConninfo(r, at, *conninfo, "source.conninfo")) {
      cfg->source.conninfo = *conninfo;
    }
  }
  if (const YAML::Node slot = node["slot"]) {
    if (auto s = r.String(slot, "slot")) {
      if (ValidSlotName(*s)) {
        cfg->source.slot = *s;
      } else {
        r.Error(slot, "slot name `" + *s + "` is not allowed by PostgreSQL",
                "use at most 63 lower-case letters, digits and underscores, e.g. " +
                    SlotNameFor(*s).substr(5));
      }
    }
  }
  if (const YAML::Node pub = node["publication"]) {
    if (pub.IsScalar()) {
      if (auto name = r.String(pub, "publication")) cfg->source.publication = *name;
    } else if (r.CheckDeclaredKeys(pub, "source.publication")) {
      if (pub["name"]) {
        if (auto name = r.String(pub["name"], "name")) cfg->source.publication = *name;
      }
      if (const YAML::Node tables = pub["tables"]) {
        if (!tables.IsSequence()) {
          r.Error(tables, "`publication.tables` must be a list of schema.table names",
                  "for example: tables: [public.orders, public.customers]");
        } else {
          for (const auto& t : tables) {
            auto text = r.String(t, "tables");
            if (!text) continue;
            if (auto q = ParseQualifiedName(*text)) {
              cfg->source.publication_tables.push_back(*q);
            } else {
              r.Error(
                  t, "`" + *text + "` is not a schema-qualified table name",
                  "write schema.table, quoting odd names: \"My Schema\".\"my.table\"");
            }
          }
        }
      }
      std::string create = "no";
      if (pub["create"]) {
        create = r.Choice(pub["create"], keys::kPublicationCreate).value_or("no");
      }
      if (create == "all_tables") {
        cfg->source.publication_mode = PublicationMode::kAllTables;
      } else if (create == "tables" ||
                 (!cfg->source.publication_tables.empty() && !pub["create"])) {
        cfg->source.publication_mode = PublicationMode::kTables;
      }
      if (cfg->source.publication_mode == PublicationMode::kTables &&
          cfg->source.publication_tables.empty()) {
        r.Error(pub, "`publication.create: tables` needs a `tables` list",
                "add tables: [schema.table, ...]");
      }
      if (cfg->source.publication_mode == PublicationMode::kAllTables &&
          !cfg->source.publication_tables.empty()) {
        r.Error(pub["tables"], "`publication.tables` conflicts with create: all_tables",
                "drop `tables`, or use create: tables");
      }
    }
  }
  if (const YAML::Node snap = node["snapshot"]) {
    if (auto s = r.Choice(snap, keys::kSourceSnapshot)) {
      cfg->source.snapshot =
          *s == "never" ? SnapshotPolicy::kNever : SnapshotPolicy::kInitial;
    }
  }
  if (const YAML::Node chunk = node["backfill_chunk_rows"]) {
    if (auto rows = r.Integer(chunk, keys::kBackfillChunkRows)) {
      cfg->source.backfill_chunk_rows = *rows;
    }
  }
  if (const YAML::Node workers = node["snapshot_workers"]) {
    if (auto n = r.Integer(workers, keys::kSnapshotWorkers)) {
      cfg->source.snapshot_workers = static_cast<int>(*n);
    }
  }
  if (auto primary = r.Secret(node, "primary_conninfo", "source", /*required=*/false)) {
    const YAML::Node at = node["primary_conninfo"] ? node["primary_conninfo"]
                                                   : node["primary_conninfo_file"];
    if (CheckConninfo(r, at, *primary, "source.primary_conninfo")) {
      cfg->source.primary_conninfo = *primary;
    }
  }
  if (const YAML::Node failover = node["failover"]) {
    if (auto f = r.Choice(failover, keys::kSourceFailover))
      cfg->source.failover = *f == "true";
  }
}

void ParseCheckpoint(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!r.CheckDeclaredKeys(node, "checkpoint")) return;
  if (node["interval"]) {
    if (auto d = r.Duration(node["interval"], keys::kCheckpointInterval)) {
      cfg->checkpoint.interval = *d;
    }
  }
  if (node["max_bytes"]) {
    if (auto b = r.ByteSize(node["max_bytes"], keys::kCheckpointMaxBytes)) {
      cfg->checkpoint.max_bytes = *b;
    }
  }
}

bool ValidIdentifier(const std::string& text) {
  auto parts = SplitDots(text);
  if (parts.size() < 2) return false;
  return std::all_of(parts.begin(), parts.end(),
                     [](const std::string& p) { return ValidNamespaceLevel(p); });
}

void ParseNaming(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!r.CheckDeclaredKeys(node, "naming")) {
    return;
  }
  for (auto [key, target] :
       {std::pair{"bronze_namespace", &cfg->naming.bronze_namespace},
        std::pair{"silver_namespace", &cfg->naming.silver_namespace}}) {
    if (!node[key]) continue;
    if (auto s = r.String(node[key], key)) {
      if (ValidNamespaceLevel(*s)) {
        *target = *s;
      } else {
        r.Error(node[key], std::string("`") + key + "` must be one namespace level",
                "no dots or spaces, e.g. bronze");
      }
    }
  }
  const YAML::Node tables = node["tables"];
  if (!tables) return;
  if (!tables.IsMap()) {
    r.Error(tables, "`naming.tables` must map schema.table to its names",
            "for example:\n    tables:\n      public.orders: {bronze: "
            "bronze.shop.orders_v2}");
    return;
  }
  for (auto it = tables.begin(); it != tables.end(); ++it) {
    const std::string source = it->first.as<std::string>("");
    auto q = ParseQualifiedName(source);
    if (!q) {
      r.Error(it->first, "`" + source + "` is not a schema-qualified table name",
              "write schema.table, quoting odd names: \"My Schema\".\"my.table\"");
      continue;
    }
    if (!r.CheckKeys(it->second, "naming.tables." + source, {"bronze", "silver"}))
      continue;
    TableNaming naming;
    for (auto [key, target] :
         {std::pair{"bronze", &naming.bronze}, std::pair{"silver", &naming.silver}}) {
      if (!it->second[key]) continue;
      if (auto s = r.String(it->second[key], key)) {
        if (ValidIdentifier(*s)) {
          *target = *s;
        } else {
          r.Error(it->second[key],
                  "`" + *s + "` is not a dotted Iceberg identifier with a namespace",
                  std::string("for example: ") + key + ".shop.orders");
        }
      }
    }
    cfg->naming.tables[*q] = naming;
  }
}

void ParseMetrics(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!r.CheckDeclaredKeys(node, "metrics")) return;
  if (node["listen"]) {
    if (auto s = r.String(node["listen"], "listen")) {
      const auto colon = s->rfind(':');
      bool ok = s->empty();
      if (colon != std::string::npos && colon > 0 && colon + 1 < s->size()) {
        const std::optional<int32_t> port = ParseInt32(s->substr(colon + 1));
        ok = port && *port >= 0 && *port <= 65535;
      }
      if (!ok) {
        r.Error(node["listen"], "`metrics.listen` must be host:port",
                "for example: 127.0.0.1:9464 (port 0 picks a free port; \"\" turns "
                "the endpoint off)");
      } else {
        cfg->metrics.listen = *s;
      }
    }
  }
}

void ParseSilver(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!r.CheckDeclaredKeys(node, "silver")) return;
  // A write mode: silver.write_mode's words, named `what` in errors.
  auto parse_mode = [&](const YAML::Node& at,
                        const std::string& what) -> std::optional<SilverWriteMode> {
    keys::Key key = keys::kSilverWriteMode;
    key.path = what;
    auto s = r.Choice(at, key);
    if (!s) return std::nullopt;
    return *s == "copy-on-write" ? SilverWriteMode::kCopyOnWrite
                                 : SilverWriteMode::kMergeOnRead;
  };
  if (node["write_mode"]) {
    if (auto mode = parse_mode(node["write_mode"], "silver.write_mode")) {
      cfg->silver.write_mode = *mode;
    }
  }
  if (const YAML::Node modes = node["write_modes"]) {
    if (!modes.IsMap()) {
      r.Error(modes, "`silver.write_modes` must map schema.table to a write mode",
              "for example:\n    write_modes:\n      public.small_lookup: copy-on-write");
    } else {
      for (auto it = modes.begin(); it != modes.end(); ++it) {
        const std::string source = it->first.as<std::string>("");
        auto q = ParseQualifiedName(source);
        if (!q) {
          r.Error(it->first, "`" + source + "` is not a schema-qualified table name",
                  "write schema.table, quoting odd names: \"My Schema\".\"my.table\"");
          continue;
        }
        if (auto mode = parse_mode(it->second, "silver.write_modes." + source)) {
          cfg->silver.write_modes[*q] = *mode;
        }
      }
    }
  }
  if (node["target_file_size"]) {
    if (auto b = r.ByteSize(node["target_file_size"], keys::kSilverTargetFileSize)) {
      cfg->silver.target_file_size = *b;
    }
  }
  if (node["memory_limit"]) {
    if (auto b = r.ByteSize(node["memory_limit"], keys::kSilverMemoryLimit)) {
      cfg->silver.memory_limit = *b;
    }
  }
  if (node["spill_dir"]) {
    if (auto p = r.String(node["spill_dir"], "spill_dir")) {
      cfg->silver.spill_dir = r.Resolve(*p);
    }
  }
  if (node["every"]) {
    if (auto d = r.Duration(node["every"], keys::kSilverEvery)) cfg->silver.every = *d;
  }
  if (node["concurrency"]) {
    if (auto n = r.Integer(node["concurrency"], keys::kSilverConcurrency)) {
      cfg->silver.concurrency = static_cast<int>(*n);
    }
  }
  const YAML::Node keys = node["keys"];
  if (!keys) return;
  if (!keys.IsMap()) {
    r.Error(keys, "`silver.keys` must map schema.table to a list of key columns",
            "for example:\n    keys:\n      public.events: [tenant_id, event_id]");
    return;
  }
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const std::string source = it->first.as<std::string>("");
    auto q = ParseQualifiedName(source);
    if (!q) {
      r.Error(it->first, "`" + source + "` is not a schema-qualified table name",
              "write schema.table, quoting odd names: \"My Schema\".\"my.table\"");
      continue;
    }
    const YAML::Node columns = it->second;
    if (!columns.IsSequence() || columns.size() == 0) {
      r.Error(columns.IsDefined() ? columns : it->first,
              "the key of `" + source + "` must be a non-empty list of column names",
              "for example: " + source + ": [id] or " + source + ": [tenant_id, id]");
      continue;
    }
    std::vector<std::string> names;
    bool ok = true;
    for (const auto& c : columns) {
      auto name = r.String(c, "keys");
      if (!name) {
        ok = false;
      } else if (name->empty()) {
        r.Error(c, "a key column name must not be empty");
        ok = false;
      } else if (std::find(names.begin(), names.end(), *name) != names.end()) {
        r.Error(c, "key column `" + *name + "` is listed twice for `" + source + "`");
        ok = false;
      } else {
        names.push_back(*name);
      }
    }
    if (ok) cfg->silver.keys[*q] = std::move(names);
  }
}

void ParseTop(Reader& r, const YAML::Node& root, PipelineConfig* cfg) {
  if (!root.IsDefined() || root.IsNull()) {
    r.Error(root, "the configuration file is empty",
            "start from the example in docs/configuration.md");
    return;
  }
  if (!r.CheckDeclaredKeys(root, "")) return;
  if (const YAML::Node source = root["source"]) {
    ParseSource(r, source, cfg);
  } else {
    r.Error(root, "missing `source`: floe needs to know which database to read",
            "add:\nsource:\n  conninfo: \"host=... dbname=... user=...\"");
  }

  if (const YAML::Node service = root["service"]) {
    if (auto s = r.String(service, "service")) {
      if (ValidNamespaceLevel(*s)) {
        cfg->service = *s;
      } else {
        r.Error(service, "`service` must be one Iceberg namespace level",
                "no dots or spaces, e.g. shop or billing_service");
      }
    }
  } else if (!cfg->source.conninfo.empty()) {
    auto db = DatabaseName(cfg->source.conninfo);
    if (db && ValidNamespaceLevel(*db)) {
      cfg->service = *db;
    } else {
      r.Error(root,
              "cannot name the service: set `service`, or put dbname in the conninfo",
              "add service: <name>; it names the namespaces bronze.<service>.*");
    }
  }

  if (const YAML::Node wh = root["warehouse"]) {
    if (auto w = ParseWarehouse(r, wh)) cfg->warehouse = *w;
  } else {
    r.Error(
        root, "missing `warehouse`: where floe writes table files",
        "add warehouse: /var/lib/floe/warehouse (or file:///..., s3://bucket/prefix)");
  }

  if (const YAML::Node catalog = root["catalog"]) {
    ParseCatalog(r, catalog, "catalog", &cfg->catalog);
  }
  if (const YAML::Node catalogs = root["catalogs"]) ParseCatalogs(r, catalogs, cfg);
  if (const YAML::Node routes = root["routes"]) {
    ParseRoutes(r, routes, cfg);
  } else if (!cfg->catalogs.empty()) {
    r.Error(
        root["catalogs"], "`catalogs` is set but no `routes` send a table to them",
        "add routes:\n  - tables: [\"hr.*\"]\n    catalog: " + cfg->catalogs.front().key);
  }
  if (const YAML::Node cp = root["checkpoint"]) ParseCheckpoint(r, cp, cfg);
  if (const YAML::Node naming = root["naming"]) ParseNaming(r, naming, cfg);
  if (const YAML::Node silver = root["silver"]) ParseSilver(r, silver, cfg);
  if (const YAML::Node metrics = root["metrics"]) ParseMetrics(r, metrics, cfg);
  if (const YAML::Node s3 = root["s3"]) ParseS3(r, s3, cfg);

  // Defaults that depend on other settings.
  if (!cfg->service.empty()) {
    if (cfg->source.slot.empty()) cfg->source.slot = SlotNameFor(cfg->service);
    if (cfg->source.publication.empty())
      cfg->source.publication = SlotNameFor(cfg->service);
  }
  DefaultCatalogPath(r, root["catalog"] ? root["catalog"] : root, "catalog",
                     cfg->warehouse, &cfg->catalog);
  if (r.ok()) CheckCatalogsApart(r, root, *cfg);
}

}  // namespace

std::string ConfigError::Format(const std::string& file) const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": error: " + message;
  if (!hint.empty()) {
    std::string indented;
    for (char c : hint) {
      indented += c;
      if (c == '\n') indented += "        ";
    }
    out += "\n  hint: " + indented;
  }
  return out;
}

std::string QualifiedName::ToString() const {
  auto part = [](const std::string& s) {
    bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
      return std::islower(c) || std::isdigit(c) || c == '_';
    });
    if (plain) return s;
    std::string out = "\"";
    for (char c : s) {
      if (c == '"') out += '"';
      out += c;
    }
    return out + "\"";
  };
  return part(schema) + "." + part(table);
}

std::optional<QualifiedName> ParseQualifiedName(const std::string& text) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i <= text.size()) {
    std::string part;
    if (i < text.size() && text[i] == '"') {
      ++i;
      bool closed = false;
      while (i < text.size()) {
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            part += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        part += text[i++];
      }
      if (!closed) return std::nullopt;
    } else {
      while (i < text.size() && text[i] != '.') part += text[i++];
    }
    if (part.empty()) return std::nullopt;
    parts.push_back(part);
    if (i == text.size()) break;
    if (text[i] != '.') return std::nullopt;
    ++i;
    if (i == text.size()) return std::nullopt;
  }
  if (parts.size() != 2) return std::nullopt;
  return QualifiedName{parts[0], parts[1]};
}

std::optional<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  const std::optional<NumberWithUnit> split = SplitNumberAndUnit(text, 12);
  if (!split) return std::nullopt;
  const int64_t n = split->number;
  const std::string_view unit = split->unit;
  int64_t ms_per_unit = 0;
  if (unit == "ms") {
    ms_per_unit = 1;
  } else if (unit == "s" || unit.empty()) {
    ms_per_unit = 1000;
  } else if (unit == "m") {
    ms_per_unit = 60'000;
  } else if (unit == "h") {
    ms_per_unit = 3'600'000;
  } else if (unit == "d") {
    ms_per_unit = 86'400'000;
  } else {
    return std::nullopt;
  }
  return std::chrono::milliseconds(n * ms_per_unit);
}

std::optional<int64_t> ParseByteSize(const std::string& text) {
  const std::optional<NumberWithUnit> split = SplitNumberAndUnit(text, 15);
  if (!split) return std::nullopt;
  static const std::map<std::string, int64_t, std::less<>> kUnits = {
      {"", 1},          {"B", 1},     {"KiB", 1 << 10},    {"MiB", 1 << 20},
      {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}};
  auto it = kUnits.find(split->unit);
  if (it == kUnits.end()) return std::nullopt;
  return split->number * it->second;
}

const char* SilverWriteModeName(SilverWriteMode mode) {
  return mode == SilverWriteMode::kCopyOnWrite ? "copy-on-write" : "merge-on-read";
}

SilverWriteMode SilverConfig::WriteModeOf(const QualifiedName& table) const {
  auto it = write_modes.find(table);
  return it == write_modes.end() ? write_mode : it->second;
}

std::vector<std::string> PipelineConfig::BronzeIdentifier(
    const QualifiedName& table) const {
  auto it = naming.tables.find(table);
  if (it != naming.tables.end() && !it->second.bronze.empty()) {
    return SplitDots(it->second.bronze);
  }
  const Route* route = RouteOf(table);
  return {route != nullptr && !route->bronze_namespace.empty() ? route->bronze_namespace
                                                               : naming.bronze_namespace,
          service, table.schema, table.table};
}

std::vector<std::string> PipelineConfig::SilverIdentifier(
    const QualifiedName& table) const {
  auto it = naming.tables.find(table);
  if (it != naming.tables.end() && !it->second.silver.empty()) {
    return SplitDots(it->second.silver);
  }
  const Route* route = RouteOf(table);
  return {route != nullptr && !route->silver_namespace.empty() ? route->silver_namespace
                                                               : naming.silver_namespace,
          service, table.schema, table.table};
}

std::string PipelineConfig::ToRedactedYaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "service" << YAML::Value << service;
  out << YAML::Key << "source" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "conninfo" << YAML::Value << kRedacted;
  out << YAML::Key << "slot" << YAML::Value << source.slot;
  out << YAML::Key << "publication" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << source.publication;
  out << YAML::Key << "create" << YAML::Value
      << (source.publication_mode == PublicationMode::kAllTables ? "all_tables"
          : source.publication_mode == PublicationMode::kTables  ? "tables"
                                                                 : "no");
  if (!source.publication_tables.empty()) {
    out << YAML::Key << "tables" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& t : source.publication_tables) out << t.ToString();
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  out << YAML::Key << "snapshot" << YAML::Value
      << (source.snapshot == SnapshotPolicy::kInitial ? "initial" : "never");
  out << YAML::Key << "backfill_chunk_rows" << YAML::Value << source.backfill_chunk_rows;
  out << YAML::Key << "snapshot_workers" << YAML::Value << source.snapshot_workers;
  out << YAML::Key << "failover" << YAML::Value << (source.failover ? "true" : "false");
  if (!source.primary_conninfo.empty()) {
    out << YAML::Key << "primary_conninfo" << YAML::Value << kRedacted;
  }
  out << YAML::EndMap;
  out << YAML::Key << "catalog" << YAML::Value << YAML::BeginMap;
  EmitCatalog(out, catalog);
  out << YAML::EndMap;
  out << YAML::Key << "warehouse" << YAML::Value << warehouse;
  {
    // A secret set is shown redacted; one unset (the default chain) is left out.
    auto secret = [&](const char* key, const std::string& v) {
      if (!v.empty()) out << YAML::Key << key << YAML::Value << kRedacted;
    };
    out << YAML::Key << "s3" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "endpoint" << YAML::Value << s3.endpoint;
    out << YAML::Key << "region" << YAML::Value << s3.region;
    out << YAML::Key << "path_style" << YAML::Value << (s3.path_style ? "true" : "false");
    secret("access_key_id", s3.access_key_id);
    secret("secret_access_key", s3.secret_access_key);
    secret("session_token", s3.session_token);
    out << YAML::Key << "connect_timeout" << YAML::Value
        << (std::to_string(static_cast<int64_t>(s3.connect_timeout_s * 1000)) + "ms");
    out << YAML::Key << "request_timeout" << YAML::Value
        << (std::to_string(static_cast<int64_t>(s3.request_timeout_s * 1000)) + "ms");
    out << YAML::Key << "max_attempts" << YAML::Value << s3.max_attempts;
    out << YAML::EndMap;
  }
  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "interval" << YAML::Value
      << (std::to_string(checkpoint.interval.count()) + "ms");
  out << YAML::Key << "max_bytes" << YAML::Value << checkpoint.max_bytes;
  out << YAML::EndMap;
  out << YAML::Key << "naming" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "bronze_namespace" << YAML::Value << naming.bronze_namespace;
  out << YAML::Key << "silver_namespace" << YAML::Value << naming.silver_namespace;
  if (!naming.tables.empty()) {
    out << YAML::Key << "tables" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, t] : naming.tables) {
      out << YAML::Key << name.ToString() << YAML::Value << YAML::Flow << YAML::BeginMap;
      if (!t.bronze.empty()) out << YAML::Key << "bronze" << YAML::Value << t.bronze;
      if (!t.silver.empty()) out << YAML::Key << "silver" << YAML::Value << t.silver;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  out << YAML::Key << "silver" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "every" << YAML::Value
      << (std::to_string(silver.every.count()) + "ms");
  out << YAML::Key << "concurrency" << YAML::Value << silver.concurrency;
  if (!silver.keys.empty()) {
    out << YAML::Key << "keys" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, columns] : silver.keys) {
      out << YAML::Key << name.ToString() << YAML::Value << YAML::Flow << columns;
    }
    out << YAML::EndMap;
  }
  out << YAML::Key << "write_mode" << YAML::Value
      << SilverWriteModeName(silver.write_mode);
  if (!silver.write_modes.empty()) {
    out << YAML::Key << "write_modes" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, mode] : silver.write_modes) {
      out << YAML::Key << name.ToString() << YAML::Value << SilverWriteModeName(mode);
    }
    out << YAML::EndMap;
  }
  out << YAML::Key << "target_file_size" << YAML::Value << silver.target_file_size;
  out << YAML::Key << "memory_limit" << YAML::Value << silver.memory_limit;
  std::error_code no_temp;
  out << YAML::Key << "spill_dir" << YAML::Value
      << (silver.spill_dir.empty()
              ? std::filesystem::temp_directory_path(no_temp).string()
              : silver.spill_dir);
  out << YAML::EndMap;
  out << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "listen" << YAML::Value << metrics.listen;
  out << YAML::EndMap;
  EmitCatalogsAndRoutes(out, *this);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

ParseResult ParsePipelineConfig(const std::string& yaml, const std::string& base_dir,
                                const EnvLookup& env) {
  ParseResult result;
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    result.errors.push_back({e.mark.line >= 0 ? e.mark.line + 1 : 0,
                             e.mark.column >= 0 ? e.mark.column + 1 : 0,
                             "this is not valid YAML: " + e.msg,
                             "check the indentation and quoting around this point"});
    return result;
  }
  Reader reader(base_dir, env);
  PipelineConfig cfg;
  try {
    ParseTop(reader, root, &cfg);
  } catch (const YAML::Exception& e) {
    reader.Error(root, std::string("unexpected YAML structure: ") + e.what());
  }
  result.errors = reader.TakeErrors();
  std::stable_sort(result.errors.begin(), result.errors.end(),
                   [](const ConfigError& a, const ConfigError& b) {
                     return std::tie(a.line, a.column) < std::tie(b.line, b.column);
                   });
  if (result.errors.empty()) result.config = std::move(cfg);
  return result;
}

ParseResult LoadPipelineConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ParseResult result;
    result.errors.push_back({0, 0, "cannot read the configuration file",
                             "check the path and that floe's user may read it"});
    return result;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string base_dir =
      fs::absolute(fs::path(path)).parent_path().lexically_normal().string();
  return ParsePipelineConfig(buffer.str(), base_dir,
                             [](const std::string& name) -> std::optional<std::string> {
                               const char* v = std::getenv(name.c_str());
                               if (v == nullptr) return std::nullopt;
                               return std::string(v);
                             });
}

}  // namespace floe::config
