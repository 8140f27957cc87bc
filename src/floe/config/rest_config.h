// The REST settings of the `catalog:` section (`type: rest`) of the pipeline file:
// parsing and the redacted dump (internal to the parser).
#pragma once

#include <yaml-cpp/yaml.h>

#include "floe/common/rest_options.h"
#include "floe/config/reader.h"

namespace floe::config {

/// Parses a `catalog:` section with `type: rest` into `rest`.
void ParseRestCatalog(Reader& r, const YAML::Node& node, RestCatalogOptions* rest);

/// The section's settings after `type: rest`, secrets as `<redacted>`.
void EmitRestCatalog(YAML::Emitter& out, const RestCatalogOptions& rest);

}  // namespace floe::config
