// The catalog settings of the pipeline file: `catalog:` (the main catalog),
// `catalogs:` (further ones, each with its own warehouse) and `routes:` (which source
// tables go to which), parsed, checked and dumped redacted. Internal to config/.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "floe/config/pipeline_config.h"
#include "floe/config/reader.h"

namespace floe::config {

/// Parses a `catalog:` section (the main one, or a `catalogs.<key>.catalog`) into
/// `out`; `where` names it in errors ("catalog", "catalogs.pii.catalog").
void ParseCatalog(Reader& r, const YAML::Node& node, const std::string& where,
                  CatalogConfig* out);

/// The default that depends on the warehouse: a SQLite catalog without a path lives
/// in a local warehouse as catalog.db; in an object-store one it is an error at `at`.
void DefaultCatalogPath(Reader& r, const YAML::Node& at, const std::string& where,
                        const std::string& warehouse, CatalogConfig* catalog);

/// Parses `catalogs:` into cfg->catalogs.
void ParseCatalogs(Reader& r, const YAML::Node& node, PipelineConfig* cfg);

/// Parses `routes:` into cfg->routes; checks every route names a known catalog and
/// that no pattern is covered by an earlier one (it would never route a table).
/// Needs cfg->catalogs parsed.
void ParseRoutes(Reader& r, const YAML::Node& node, PipelineConfig* cfg);

/// Checks across the catalogs and names, once everything is parsed: no catalog twice,
/// no warehouse inside another, no namespace both a Bronze and a Silver one.
void CheckCatalogsApart(Reader& r, const YAML::Node& root, const PipelineConfig& cfg);

/// A catalog's settings, secrets as `<redacted>`, in an open map.
void EmitCatalog(YAML::Emitter& out, const CatalogConfig& catalog);

/// `catalogs:` and `routes:` (nothing when there are none), secrets redacted.
void EmitCatalogsAndRoutes(YAML::Emitter& out, const PipelineConfig& cfg);

// Shared with pipeline_config.cc.
bool CheckConninfo(Reader& r, const YAML::Node& at, const std::string& conninfo,
                   const std::string& what);
bool ValidNamespaceLevel(const std::string& s);

}  // namespace floe::config
