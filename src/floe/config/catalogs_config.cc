#include "floe/config/catalogs_config.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string_view>

#include "floe/config/keys.h"
#include "floe/config/rest_config.h"
#include "floe/config/s3_config.h"

namespace floe::config {

namespace {

constexpr char kRedacted[] = "<redacted>";

bool HasWildcard(const std::string& glob) {
  return glob.find_first_of("*?[") != std::string::npos;
}

bool GlobMatches(const std::string& glob, const std::string& name) {
  return fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

// A route pattern as its two globs; `*` alone is `*.*`.
std::optional<QualifiedName> SplitPattern(const std::string& pattern) {
  if (pattern == "*") return QualifiedName{"*", "*"};
  return ParseQualifiedName(pattern);
}

// Whether glob `wide` matches every name glob `narrow` matches (decided for the
// cases that matter: equal globs, `*`, and a plain name `wide` matches).
bool GlobCovers(const std::string& wide, const std::string& narrow) {
  if (wide == narrow || wide == "*") return true;
  return !HasWildcard(narrow) && GlobMatches(wide, narrow);
}

// What makes a route pattern match nothing it was meant to: capitals outside double
// quotes (PostgreSQL folds unquoted names to lower case; floe.source.table and
// patterns are compared as the catalog stores names), or a `[` without its `]`.
std::string PatternProblem(const std::string& pattern) {
  bool quoted = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '"') {
      quoted = !quoted;
    } else if (!quoted && std::isupper(static_cast<unsigned char>(c))) {
      return "capitals outside double quotes: PostgreSQL folds unquoted names to lower "
             "case, so this would match only tables created with quoted capitals";
    } else if (c == '[' && pattern.find(']', i + 2) == std::string::npos) {
      return "a `[` without its `]`";
    }
  }
  return "";
}

std::string CatalogKeys(const PipelineConfig& cfg) {
  std::string out = std::string("`") + kMainCatalogKey + "` (the `catalog:` section)";
  for (const auto& named : cfg.catalogs) out += ", `" + named.key + "`";
  return out;
}

}  // namespace

void ParseCatalog(Reader& r, const YAML::Node& node, const std::string& where,
                  CatalogConfig* out) {
  // Every catalog takes the keys of `catalog:` (keys.h declares them once).
  if (!r.CheckKeys(node, where, keys::KeysOf("catalog"))) return;
  std::string type = "sqlite";
  if (node["type"]) {
    auto t = r.Choice(node["type"], keys::kCatalogType);
    if (!t) return;
    type = *t;
  }
  if (type == "sqlite") {
    out->type = CatalogType::kSqlite;
    if (node["conninfo"] || node["conninfo_file"]) {
      r.Error(node["conninfo"] ? node["conninfo"] : node["conninfo_file"],
              "a sqlite catalog takes `path`, not `conninfo`",
              "set type: postgres to keep the catalog in PostgreSQL");
    }
    if (node["path"]) {
      if (auto p = r.String(node["path"], "path")) out->uri = r.Resolve(*p);
    }
  } else if (type == "postgres") {
    out->type = CatalogType::kPostgres;
    if (node["path"]) {
      r.Error(node["path"], "a postgres catalog takes `conninfo`, not `path`");
    }
    if (auto conninfo = r.Secret(node, "conninfo", where, /*required=*/true)) {
      const YAML::Node at = node["conninfo"] ? node["conninfo"] : node["conninfo_file"];
      if (CheckConninfo(r, at, *conninfo, where + ".conninfo")) out->uri = *conninfo;
    }
  } else if (type == "rest") {
    out->type = CatalogType::kRest;
    ParseRestCatalog(r, node, &out->rest);
    out->rest.setting = where;
  }
  if (type != "rest") {
    for (const char* key : {"uri", "warehouse", "token", "token_file", "client_id",
                            "client_secret", "client_secret_file", "oauth2_server_uri",
                            "scope", "headers", "request_timeout", "max_attempts"}) {
      if (node[key]) {
        r.Error(node[key], std::string("`") + key + "` is a setting of a REST catalog",
                "set type: rest to use an Iceberg REST catalog");
      }
    }
  }
  if (node["name"]) {
    if (auto n = r.String(node["name"], "name")) {
      if (n->empty()) {
        r.Error(node["name"], "catalog `name` must not be empty");
      } else {
        out->name = *n;
      }
    }
  }
}

void DefaultCatalogPath(Reader& r, const YAML::Node& at, const std::string& where,
                        const std::string& warehouse, CatalogConfig* catalog) {
  if (catalog->type != CatalogType::kSqlite || !catalog->uri.empty()) return;
  if (warehouse.starts_with("file://")) {
    catalog->uri = warehouse.substr(7) + "/catalog.db";
  } else if (!warehouse.empty()) {
    r.Error(at, "a SQLite catalog cannot live in the object-store warehouse " + warehouse,
            "set " + where + ".path to a local file ({type: sqlite, path: " +
                "/var/lib/floe/catalog.db}), or use type: postgres");
  }
}

void ParseCatalogs(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!node.IsMap() || node.size() == 0) {
    r.Error(node, "`catalogs` must map names to catalogs",
            "for example:\ncatalogs:\n  pii:\n    catalog: {type: rest, uri: "
            "https://catalog.internal}\n    warehouse: s3://pii-bucket/lake");
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = it->first.as<std::string>("");
    const std::string where = "catalogs." + key;
    if (key == kMainCatalogKey || !ValidNamespaceLevel(key)) {
      r.Error(it->first,
              key == kMainCatalogKey
                  ? std::string("`main` names the `catalog:` section; a catalog in "
                                "`catalogs` needs another name")
                  : "`" + key + "` cannot name a catalog",
              "use a short name without dots or spaces, e.g. pii");
      continue;
    }
    const YAML::Node entry = it->second;
    if (!r.CheckKeys(entry, where, {"catalog", "warehouse"})) continue;
    NamedCatalog named{.key = key};
    if (const YAML::Node wh = entry["warehouse"]) {
      if (auto w = ParseWarehouse(r, wh)) named.warehouse = *w;
    } else {
      r.Error(entry, "missing `" + where + ".warehouse`: where its tables' files go",
              "add warehouse: s3://bucket/prefix (or a local directory)");
    }
    if (const YAML::Node catalog = entry["catalog"]) {
      ParseCatalog(r, catalog, where + ".catalog", &named.catalog);
    }
    DefaultCatalogPath(r, entry["catalog"] ? entry["catalog"] : entry, where + ".catalog",
                       named.warehouse, &named.catalog);
    cfg->catalogs.push_back(std::move(named));
  }
}

void ParseRoutes(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!node.IsSequence()) {
    r.Error(node, "`routes` must be a list of rules",
            "for example:\nroutes:\n  - tables: [\"hr.*\"]\n    catalog: pii");
    return;
  }
  // Every pattern so far, with where it was written: a later pattern one of them
  // covers would never route a table.
  struct Seen {
    QualifiedName globs;
    std::string text;
    int line;
  };
  std::vector<Seen> seen;
  std::set<std::string> used;
  for (const YAML::Node& item : node) {
    if (!item.IsMap()) {
      r.Error(item, "a route is a mapping with `tables` and `catalog`",
              "for example: - {tables: [\"hr.*\"], catalog: pii}");
      continue;
    }
    if (!r.CheckDeclaredKeys(item, "routes")) continue;
    Route route;
    if (const YAML::Node c = item["catalog"]) {
      if (auto name = r.String(c, "catalog")) {
        const bool known =
            *name == kMainCatalogKey ||
            std::any_of(cfg->catalogs.begin(), cfg->catalogs.end(),
                        [&](const NamedCatalog& n) { return n.key == *name; });
        if (known) {
          route.catalog = *name;
          used.insert(*name);
        } else {
          r.Error(c, "route to unknown catalog `" + *name + "`",
                  "name one of " + CatalogKeys(*cfg));
        }
      }
    } else {
      r.Error(item, "a route needs `catalog`: where its tables go",
              "name one of " + CatalogKeys(*cfg));
    }
    for (auto [key, target] : {std::pair{"bronze_namespace", &route.bronze_namespace},
                               std::pair{"silver_namespace", &route.silver_namespace}}) {
      if (!item[key]) continue;
      if (auto s = r.String(item[key], key)) {
        if (ValidNamespaceLevel(*s)) {
          *target = *s;
        } else {
          r.Error(item[key], std::string("`") + key + "` must be one namespace level",
                  std::string("no dots or spaces, e.g. ") +
                      (std::string_view(key) == "bronze_namespace" ? "bronze_pii"
                                                                   : "silver_pii"));
        }
      }
    }
    YAML::Node tables = item["tables"];
    if (!tables) {
      r.Error(item, "a route needs `tables`: the schema.table patterns it sends",
              "for example: tables: [\"hr.*\", public.payroll]");
      continue;
    }
    std::vector<YAML::Node> patterns;
    if (tables.IsScalar()) {
      patterns.push_back(tables);
    } else if (tables.IsSequence() && tables.size() > 0) {
      for (const YAML::Node& p : tables) patterns.push_back(p);
    } else {
      r.Error(tables, "`tables` must be a pattern or a non-empty list of them",
              "for example: tables: [\"hr.*\", public.payroll]");
      continue;
    }
    for (const YAML::Node& p : patterns) {
      auto text = r.String(p, "tables");
      if (!text) continue;
      if (const std::string problem = PatternProblem(*text); !problem.empty()) {
        r.Error(p, "`" + *text + "`: " + problem,
                "write schema.table as PostgreSQL names them: unquoted parts in lower "
                "case (\"hr.*\"), a name created with capitals in double quotes "
                "('\"Sales\".*'), and `[` with its `]`");
        continue;
      }
      auto globs = SplitPattern(*text);
      if (!globs) {
        r.Error(p, "`" + *text + "` is not a schema.table pattern",
                "write schema.table with * ? [...] as wildcards, e.g. \"hr.*\" "
                "(quote odd names: '\"My Schema\".\"*\"')");
        continue;
      }
      auto earlier = std::find_if(seen.begin(), seen.end(), [&](const Seen& s) {
        return GlobCovers(s.globs.schema, globs->schema) &&
               GlobCovers(s.globs.table, globs->table);
      });
      if (earlier != seen.end()) {
        r.Error(p,
                "`" + *text + "` is routed already by `" + earlier->text + "` on line " +
                    std::to_string(earlier->line) +
                    ": the first match wins, so this pattern would never route a table",
                "move the narrower rule above the wider one, or remove it");
        continue;
      }
      seen.push_back({*globs, *text, p.Mark().line + 1});
      route.patterns.push_back(*text);
    }
    cfg->routes.push_back(std::move(route));
  }
  const YAML::Node catalogs_at = node;  // where an unused catalog is reported
  for (const auto& named : cfg->catalogs) {
    if (used.contains(named.key)) continue;
    r.Error(catalogs_at, "catalog `" + named.key + "` is not named by any route",
            "add a route with catalog: " + named.key + ", or remove it from `catalogs`");
  }
}

void CheckCatalogsApart(Reader& r, const YAML::Node& root, const PipelineConfig& cfg) {
  const YAML::Node catalogs = root["catalogs"];
  // Where each catalog is written: the main one's `catalog:` (or the top), a named
  // one's entry.
  auto at = [&](const std::string& key, const char* leaf) -> YAML::Node {
    if (key == kMainCatalogKey) {
      return root[leaf] ? root[leaf] : root;
    }
    if (catalogs && catalogs.IsMap() && catalogs[key]) {
      YAML::Node entry = catalogs[key];
      return entry[leaf] ? entry[leaf] : entry;
    }
    return root;
  };
  struct Placed {
    std::string key;
    const CatalogConfig* catalog;
    std::string warehouse;
  };
  std::vector<Placed> all = {{kMainCatalogKey, &cfg.catalog, cfg.warehouse}};
  for (const auto& named : cfg.catalogs) {
    all.push_back({named.key, &named.catalog, named.warehouse});
  }
  auto same_catalog = [](const CatalogConfig& a, const CatalogConfig& b) {
    if (a.type != b.type) return false;
    if (a.type == CatalogType::kRest) {
      return a.rest.uri == b.rest.uri && a.rest.warehouse == b.rest.warehouse;
    }
    return a.uri == b.uri && a.name == b.name;
  };
  auto inside = [](std::string a, std::string b) {  // b is a or below it
    while (a.size() > 1 && a.ends_with('/')) a.pop_back();
    while (b.size() > 1 && b.ends_with('/')) b.pop_back();
    return b == a || b.starts_with(a + "/");
  };
  for (size_t j = 1; j < all.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      const std::string name_i = all[i].key == kMainCatalogKey
                                     ? std::string("the main catalog")
                                     : "catalog `" + all[i].key + "`";
      if (same_catalog(*all[i].catalog, *all[j].catalog)) {
        r.Error(at(all[j].key, "catalog"),
                "catalog `" + all[j].key + "` is " + name_i + " again (same " +
                    (all[j].catalog->type == CatalogType::kRest ? "uri and warehouse"
                                                                : "path and name") +
                    "): its tables would not be apart from " + name_i + "'s",
                "point it at another catalog, or route the tables to " +
                    (all[i].key == kMainCatalogKey ? std::string(kMainCatalogKey)
                                                   : all[i].key));
      }
      if (!all[i].warehouse.empty() && !all[j].warehouse.empty() &&
          (inside(all[i].warehouse, all[j].warehouse) ||
           inside(all[j].warehouse, all[i].warehouse))) {
        r.Error(at(all[j].key, "warehouse"),
                "catalog `" + all[j].key + "`'s warehouse " + all[j].warehouse + " and " +
                    name_i + "'s " + all[i].warehouse +
                    " are one inside the other: tables of the two catalogs could share "
                    "a directory, and `floe remove-orphans` of one would delete the "
                    "other's files",
                "give each catalog a warehouse of its own, side by side (e.g. "
                "s3://bucket/lake and s3://bucket/pii)");
      }
    }
  }
  // Bronze and Silver tables of one source table must not meet: every Bronze
  // namespace apart from every Silver one.
  std::set<std::string> bronze = {cfg.naming.bronze_namespace};
  std::set<std::string> silver = {cfg.naming.silver_namespace};
  for (const Route& route : cfg.routes) {
    bronze.insert(route.bronze_namespace.empty() ? cfg.naming.bronze_namespace
                                                 : route.bronze_namespace);
    silver.insert(route.silver_namespace.empty() ? cfg.naming.silver_namespace
                                                 : route.silver_namespace);
  }
  for (const std::string& ns : bronze) {
    if (!silver.contains(ns)) continue;
    YAML::Node where = root["naming"] ? root["naming"] : root;
    if (root["routes"] && root["routes"].IsSequence()) {
      for (const YAML::Node& item : root["routes"]) {
        for (const char* key : {"bronze_namespace", "silver_namespace"}) {
          if (item.IsMap() && item[key] && item[key].as<std::string>("") == ns) {
            where = item[key];
          }
        }
      }
    }
    r.Error(where,
            "`" + ns +
                "` is both a Bronze and a Silver namespace: a table's Bronze and "
                "Silver tables would take one name",
            "give Bronze and Silver different first levels (naming.bronze_namespace, "
            "naming.silver_namespace, and each route's)");
  }
}

bool RoutePatternMatches(const std::string& pattern, const QualifiedName& table) {
  auto globs = SplitPattern(pattern);
  return globs && GlobMatches(globs->schema, table.schema) &&
         GlobMatches(globs->table, table.table);
}

void EmitCatalog(YAML::Emitter& out, const CatalogConfig& catalog) {
  if (catalog.type == CatalogType::kSqlite) {
    out << YAML::Key << "type" << YAML::Value << "sqlite";
    out << YAML::Key << "path" << YAML::Value << catalog.uri;
  } else if (catalog.type == CatalogType::kPostgres) {
    out << YAML::Key << "type" << YAML::Value << "postgres";
    out << YAML::Key << "conninfo" << YAML::Value << kRedacted;
  } else {
    EmitRestCatalog(out, catalog.rest);
  }
  out << YAML::Key << "name" << YAML::Value << catalog.name;
}

void EmitCatalogsAndRoutes(YAML::Emitter& out, const PipelineConfig& cfg) {
  if (!cfg.catalogs.empty()) {
    out << YAML::Key << "catalogs" << YAML::Value << YAML::BeginMap;
    for (const auto& named : cfg.catalogs) {
      out << YAML::Key << named.key << YAML::Value << YAML::BeginMap;
      out << YAML::Key << "catalog" << YAML::Value << YAML::BeginMap;
      EmitCatalog(out, named.catalog);
      out << YAML::EndMap;
      out << YAML::Key << "warehouse" << YAML::Value << named.warehouse;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  if (!cfg.routes.empty()) {
    out << YAML::Key << "routes" << YAML::Value << YAML::BeginSeq;
    for (const auto& route : cfg.routes) {
      out << YAML::BeginMap;
      out << YAML::Key << "tables" << YAML::Value << YAML::Flow << route.patterns;
      out << YAML::Key << "catalog" << YAML::Value << route.catalog;
      out << YAML::Key << "bronze_namespace" << YAML::Value
          << (route.bronze_namespace.empty() ? cfg.naming.bronze_namespace
                                             : route.bronze_namespace);
      out << YAML::Key << "silver_namespace" << YAML::Value
          << (route.silver_namespace.empty() ? cfg.naming.silver_namespace
                                             : route.silver_namespace);
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
}

const Route* PipelineConfig::RouteOf(const QualifiedName& table) const {
  for (const Route& route : routes) {
    for (const std::string& pattern : route.patterns) {
      if (RoutePatternMatches(pattern, table)) return &route;
    }
  }
  return nullptr;
}

std::string PipelineConfig::CatalogKeyOf(const std::vector<std::string>& levels) const {
  if (routes.empty()) return kMainCatalogKey;
  auto key_of = [&](const QualifiedName& table) {
    const Route* route = RouteOf(table);
    return route == nullptr ? std::string(kMainCatalogKey) : route->catalog;
  };
  for (const auto& [table, names] : naming.tables) {
    if (levels == BronzeIdentifier(table) || levels == SilverIdentifier(table)) {
      return key_of(table);
    }
  }
  if (levels.size() == 4 && levels[1] == service) {
    const QualifiedName table{levels[2], levels[3]};
    if (levels == BronzeIdentifier(table) || levels == SilverIdentifier(table)) {
      return key_of(table);
    }
  }
  return kMainCatalogKey;
}

const std::string& PipelineConfig::WarehouseOf(const std::string& catalog_key) const {
  for (const auto& named : catalogs) {
    if (named.key == catalog_key) return named.warehouse;
  }
  return warehouse;
}

const std::string& PipelineConfig::WarehouseOf(const QualifiedName& table) const {
  const Route* route = RouteOf(table);
  return route == nullptr ? warehouse : WarehouseOf(route->catalog);
}

std::vector<std::vector<std::string>> PipelineConfig::BronzeRoots() const {
  std::vector<std::vector<std::string>> out = {{naming.bronze_namespace, service}};
  for (const Route& route : routes) {
    if (route.bronze_namespace.empty()) continue;
    std::vector<std::string> root = {route.bronze_namespace, service};
    if (std::find(out.begin(), out.end(), root) == out.end()) out.push_back(root);
  }
  return out;
}

}  // namespace floe::config
