#include "floe/config/keys.h"

#include <algorithm>
#include <array>

namespace floe::config::keys {

namespace {

constexpr std::array<const Key*, 55> kAll = {
    &kService,
    &kSourceConninfo,
    &kSourceSlot,
    &kSourcePublication,
    &kPublicationName,
    &kPublicationCreate,
    &kPublicationTables,
    &kSourceSnapshot,
    &kBackfillChunkRows,
    &kSnapshotWorkers,
    &kSourceFailover,
    &kSourcePrimaryConninfo,
    &kCatalogType,
    &kCatalogPath,
    &kCatalogConninfo,
    &kCatalogName,
    &kCatalogUri,
    &kCatalogWarehouse,
    &kCatalogToken,
    &kCatalogClientId,
    &kCatalogClientSecret,
    &kCatalogOauth2ServerUri,
    &kCatalogScope,
    &kCatalogHeaders,
    &kCatalogRequestTimeout,
    &kCatalogMaxAttempts,
    &kWarehouse,
    &kCatalogs,
    &kRoutesTables,
    &kRoutesCatalog,
    &kRoutesBronzeNamespace,
    &kRoutesSilverNamespace,
    &kS3Endpoint,
    &kS3Region,
    &kS3PathStyle,
    &kS3AccessKeyId,
    &kS3SecretAccessKey,
    &kS3SessionToken,
    &kS3ConnectTimeout,
    &kS3RequestTimeout,
    &kS3MaxAttempts,
    &kCheckpointInterval,
    &kCheckpointMaxBytes,
    &kBronzeNamespace,
    &kSilverNamespace,
    &kNamingTables,
    &kSilverEvery,
    &kSilverConcurrency,
    &kSilverKeys,
    &kSilverWriteMode,
    &kSilverWriteModes,
    &kSilverTargetFileSize,
    &kSilverMemoryLimit,
    &kSilverSpillDir,
    &kMetricsListen,
};

// The path's parent ("" at the top level).
std::string_view Parent(std::string_view path) {
  const size_t dot = path.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : path.substr(0, dot);
}

}  // namespace

std::span<const Key* const> All() { return kAll; }

std::string_view Leaf(const Key& key) {
  const size_t dot = key.path.rfind('.');
  return dot == std::string_view::npos ? key.path : key.path.substr(dot + 1);
}

std::vector<std::string> KeysOf(std::string_view section) {
  std::vector<std::string> out;
  auto add = [&](std::string name) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  };
  for (const Key* key : kAll) {
    std::string_view path = key->path;
    // A key below `section`: its first component after it names a key of it (a
    // top-level section such as `source` is named by its keys).
    if (!section.empty()) {
      if (!path.starts_with(section) || path.size() <= section.size() ||
          path[section.size()] != '.') {
        continue;
      }
      path.remove_prefix(section.size() + 1);
    }
    const std::string first(path.substr(0, path.find('.')));
    add(first);
    if (key->kind == Kind::kSecret && Parent(key->path) == section) add(first + "_file");
  }
  return out;
}

std::string SettingsTable() {
  std::string out = "| key | default | meaning |\n|---|---|---|\n";
  for (const Key* key : kAll) {
    std::string name;
    if (!key->table_key.empty()) {
      name = std::string(key->table_key);
    } else {
      name = "`" + std::string(key->path) + "`";
      if (key->kind == Kind::kSecret) name += " / `" + std::string(key->path) + "_file`";
    }
    out += "| " + name + " | " + std::string(key->default_text) + " | " +
           std::string(key->meaning) + " |\n";
  }
  return out;
}

}  // namespace floe::config::keys
