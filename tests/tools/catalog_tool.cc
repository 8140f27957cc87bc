// Drives floe's SQL catalog from the command line so integration tests can check
// that floe and other engines (PyIceberg, Java) share one catalog database.
// Prints JSON results; exits 3 with the error kind on a catalog error.
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "floe/iceberg/sql_catalog.h"

namespace {

using floe::iceberg::Namespace;
using floe::iceberg::TableIdentifier;

Namespace SplitDots(const std::string& text) {
  Namespace out;
  if (text.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t dot = text.find('.', start);
    out.push_back(text.substr(start, dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

TableIdentifier ParseTable(const std::string& text) {
  Namespace parts = SplitDots(text);
  TableIdentifier id;
  id.name = parts.back();
  parts.pop_back();
  id.ns = parts;
  return id;
}

int Report(const arrow::Status& st) {
  if (st.ok()) return 0;
  auto kind = floe::iceberg::GetCatalogErrorKind(st);
  nlohmann::json j;
  j["error"] = st.message();
  j["kind"] = kind ? std::string(floe::iceberg::CatalogErrorKindName(*kind)) : "other";
  std::cout << j.dump() << "\n";
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"floe SQL catalog test tool"};
  std::string db, pg, name = "floe";
  auto* db_opt = app.add_option("--db", db, "SQLite catalog file");
  app.add_option("--pg", pg, "PostgreSQL conninfo of the catalog database")
      ->excludes(db_opt);
  app.add_option("--catalog", name, "catalog name");
  app.require_subcommand(1);

  std::string ident, location, expected, property;
  auto* load = app.add_subcommand("load", "print a table's metadata location");
  load->add_option("table", ident)->required();
  auto* reg = app.add_subcommand("register", "register a table at a metadata file");
  reg->add_option("table", ident)->required();
  reg->add_option("location", location)->required();
  auto* commit = app.add_subcommand("commit", "compare-and-swap a table's location");
  commit->add_option("table", ident)->required();
  commit->add_option("expected", expected)->required();
  commit->add_option("location", location)->required();
  auto* mkns = app.add_subcommand("create-namespace", "create a namespace");
  mkns->add_option("namespace", ident)->required();
  mkns->add_option("--property", property, "key=value");
  auto* lsns = app.add_subcommand("list-namespaces", "list child namespaces");
  lsns->add_option("parent", ident);
  auto* lstb = app.add_subcommand("list-tables", "list tables of a namespace");
  lstb->add_option("namespace", ident)->required();
  CLI11_PARSE(app, argc, argv);

  if (db.empty() == pg.empty()) {
    std::cerr << "give exactly one of --db or --pg\n";
    return 2;
  }
  auto conn =
      pg.empty() ? floe::iceberg::OpenSqlite(db) : floe::iceberg::OpenPostgres(pg);
  if (!conn.ok()) return Report(conn.status());
  auto opened = floe::iceberg::SqlCatalog::Open(name, std::move(*conn));
  if (!opened.ok()) return Report(opened.status());
  auto& catalog = **opened;

  nlohmann::json out;
  if (*load) {
    auto loc = catalog.LoadTable(ParseTable(ident));
    if (!loc.ok()) return Report(loc.status());
    out["metadata_location"] = *loc;
  } else if (*reg) {
    if (int rc = Report(catalog.RegisterTable(ParseTable(ident), location))) return rc;
    out["ok"] = true;
  } else if (*commit) {
    if (int rc = Report(catalog.CommitTable(ParseTable(ident), expected, location))) {
      return rc;
    }
    out["ok"] = true;
  } else if (*mkns) {
    std::map<std::string, std::string> props;
    if (auto eq = property.find('='); eq != std::string::npos) {
      props[property.substr(0, eq)] = property.substr(eq + 1);
    }
    if (int rc = Report(catalog.CreateNamespace(SplitDots(ident), props))) return rc;
    out["ok"] = true;
  } else if (*lsns) {
    auto list = catalog.ListNamespaces(SplitDots(ident));
    if (!list.ok()) return Report(list.status());
    out["namespaces"] = *list;
  } else if (*lstb) {
    auto list = catalog.ListTables(SplitDots(ident));
    if (!list.ok()) return Report(list.status());
    out["tables"] = nlohmann::json::array();
    for (const auto& t : *list) out["tables"].push_back(t.name);
  }
  std::cout << out.dump() << "\n";
  return 0;
}
