// The configuration's YAML reader: typed values of declared keys (keys.h), `${NAME}`
// from the environment, secrets inline or in files, and errors with their line,
// column and fix. Internal to config/: pipeline_config.cc parses each section with it.

#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "floe/config/keys.h"
#include "floe/config/pipeline_config.h"

namespace floe::config {

/// Collects errors while walking the YAML tree.
class Reader {
 public:
  Reader(std::string base_dir, const EnvLookup& env)
      : base_dir_(std::move(base_dir)), env_(env) {}

  std::vector<ConfigError> TakeErrors() { return std::move(errors_); }
  bool ok() const { return errors_.empty(); }

  void Error(const YAML::Node& at, std::string message, std::string hint = "");

  // Reports keys of `map` that are not in `allowed`, suggesting the closest.
  bool CheckKeys(const YAML::Node& map, const std::string& where,
                 const std::vector<std::string>& allowed);

  // A scalar string with `${NAME}` substituted from the environment. `secret`
  // values never appear in errors.
  std::optional<std::string> String(const YAML::Node& node, const std::string& what,
                                    bool secret = false);

  std::optional<std::string> ReadSecretFile(const YAML::Node& node,
                                            const std::string& what);

  // `key` or `key_file` (exactly one) as a secret.
  std::optional<std::string> Secret(const YAML::Node& parent, const std::string& key,
                                    const std::string& where, bool required);

  // A key of kind kInteger, within its declared range.
  std::optional<int64_t> Integer(const YAML::Node& node, const keys::Key& key);

  // A key of kind kDuration, at least its declared minimum.
  std::optional<std::chrono::milliseconds> Duration(const YAML::Node& node,
                                                    const keys::Key& key);

  // A key of kind kByteSize, at least its declared minimum.
  std::optional<int64_t> ByteSize(const YAML::Node& node, const keys::Key& key);

  // A key of kind kChoice: one of its declared words.
  std::optional<std::string> Choice(const YAML::Node& node, const keys::Key& key);

  // CheckKeys with the keys declared for `section` (keys.h).
  bool CheckDeclaredKeys(const YAML::Node& map, const std::string& section);

  std::string Resolve(const std::string& path) const;

 private:
  std::string base_dir_;
  const EnvLookup& env_;
  std::vector<ConfigError> errors_;
};

}  // namespace floe::config
