// The `s3:` section of the pipeline file (internal to the parser).
#pragma once

#include <yaml-cpp/yaml.h>

#include "floe/config/pipeline_config.h"
#include "floe/config/reader.h"

namespace floe::config {

/// Parses `s3:` into cfg->s3.
void ParseS3(Reader& r, const YAML::Node& node, PipelineConfig* cfg);

/// The warehouse as `file:///abs` or `s3://bucket[/prefix]`; nullopt (an error
/// reported) if it is neither.
std::optional<std::string> ParseWarehouse(Reader& r, const YAML::Node& node);

}  // namespace floe::config
