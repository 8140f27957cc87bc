#include "floe/config/s3_config.h"

#include <algorithm>
#include <cctype>

#include <string>

#include "floe/config/keys.h"

namespace floe::config {

void ParseS3(Reader& r, const YAML::Node& node, PipelineConfig* cfg) {
  if (!r.CheckDeclaredKeys(node, "s3")) return;
  S3Options& s3 = cfg->s3;
  if (node["endpoint"]) {
    if (auto e = r.String(node["endpoint"], "endpoint")) {
      if (e->empty()) {
        // AWS's own endpoints (as the settings dump writes the default).
      } else if (!e->starts_with("http://") && !e->starts_with("https://")) {
        r.Error(node["endpoint"], "s3 `endpoint` has no http:// or https://",
                "for example: endpoint: http://127.0.0.1:9000");
      } else if (const size_t host = e->find("://") + 3;
                 e->substr(host, e->find_first_of("/?#", host) - host).find('@') !=
                     std::string::npos ||
                 e->find_first_of("?#") != std::string::npos) {
        // Neither is an endpoint's; either may be a credential. Not repeated.
        r.Error(node["endpoint"],
                "s3 `endpoint` must be scheme://host[:port] only (no user:password@, "
                "query or fragment; its text is not shown)",
                "for example: endpoint: https://minio.internal:9000, with credentials "
                "in access_key_id and secret_access_key_file");
      } else {
        s3.endpoint = *e;
        s3.path_style = true;
      }
    }
  }
  if (node["region"]) {
    if (auto v = r.String(node["region"], "region")) s3.region = *v;
  }
  if (node["path_style"]) {
    if (auto v = r.Choice(node["path_style"], keys::kS3PathStyle)) {
      s3.path_style = *v == "true";
    }
  }
  const bool has_key = node["access_key_id"] || node["access_key_id_file"];
  const bool has_secret = node["secret_access_key"] || node["secret_access_key_file"];
  if (has_key != has_secret) {
    r.Error(node, "s3 needs both `access_key_id` and `secret_access_key`, or neither",
            "leave both out to use the AWS default credential chain (AWS_ACCESS_KEY_ID "
            "and AWS_SECRET_ACCESS_KEY, the shared credentials file, instance metadata)");
  } else if (has_key) {
    if (auto v = r.Secret(node, "access_key_id", "s3", true)) s3.access_key_id = *v;
    if (auto v = r.Secret(node, "secret_access_key", "s3", true)) {
      s3.secret_access_key = *v;
    }
  }
  if (node["session_token"] || node["session_token_file"]) {
    if (!has_key) {
      r.Error(node["session_token"] ? node["session_token"] : node["session_token_file"],
              "s3 `session_token` needs `access_key_id` and `secret_access_key`");
    } else if (auto v = r.Secret(node, "session_token", "s3", true)) {
      s3.session_token = *v;
    }
  }
  if (node["connect_timeout"]) {
    if (auto d = r.Duration(node["connect_timeout"], keys::kS3ConnectTimeout)) {
      s3.connect_timeout_s = static_cast<double>(d->count()) / 1000;
    }
  }
  if (node["request_timeout"]) {
    if (auto d = r.Duration(node["request_timeout"], keys::kS3RequestTimeout)) {
      s3.request_timeout_s = static_cast<double>(d->count()) / 1000;
    }
  }
  if (node["max_attempts"]) {
    if (auto n = r.Integer(node["max_attempts"], keys::kS3MaxAttempts)) {
      s3.max_attempts = static_cast<int>(*n);
    }
  }
}

std::optional<std::string> ParseWarehouse(Reader& r, const YAML::Node& node) {
  auto s = r.String(node, "warehouse");
  if (!s) return std::nullopt;
  std::string path = *s;
  if (path.starts_with("s3://")) {
    while (path.size() > 5 && path.ends_with('/')) path.pop_back();
    const std::string bucket = path.substr(5, path.find('/', 5) - 5);
    if (bucket.empty()) {
      r.Error(node, "warehouse `" + *s + "` names no bucket",
              "for example: warehouse: s3://my-bucket/lake");
      return std::nullopt;
    }
    // Bucket names are letters, digits, dots, hyphens (and underscores in old
    // buckets): anything else (`user:secret@bucket`) is not a bucket, and the text
    // is not repeated (it may hold credentials).
    if (!std::all_of(bucket.begin(), bucket.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '.' || c == '-' || c == '_';
        })) {
      r.Error(node,
              "warehouse: `s3://` must be followed by a bucket name (letters, digits, "
              "`.`, `-`); its text is not shown",
              "for example: warehouse: s3://my-bucket/lake, with credentials in `s3:` "
              "(access_key_id, secret_access_key_file)");
      return std::nullopt;
    }
    // Table locations are the prefix plus escaped names, stored as they are: a
    // segment that clients resolve (`.`, `..`), drop (an empty one) or read as part
    // of a URL (`?`, `#`) would name other objects than the ones written.
    const std::string prefix =
        path.size() > 5 + bucket.size() ? path.substr(6 + bucket.size()) : std::string();
    std::string bad;
    size_t at = 0;
    while (bad.empty() && !prefix.empty() && at <= prefix.size()) {
      const size_t end = std::min(prefix.find('/', at), prefix.size());
      const std::string segment = prefix.substr(at, end - at);
      if (segment.empty()) bad = "an empty segment (`//`)";
      if (segment == "." || segment == "..") bad = "a `" + segment + "` segment";
      at = end + 1;
    }
    if (bad.empty() && prefix.find_first_of("?#") != std::string::npos) {
      bad = "`?` or `#`";
    }
    for (char c : prefix) {
      if (bad.empty() && static_cast<unsigned char>(c) < 0x20)
        bad = "a control character";
    }
    if (!bad.empty()) {
      r.Error(node, "warehouse `" + *s + "` has " + bad + " in its prefix",
              "use plain path segments, e.g. warehouse: s3://" + bucket + "/lake/prod");
      return std::nullopt;
    }
    return path;
  }
  if (path.starts_with("s3a://") || path.starts_with("s3n://")) {
    r.Error(node, "warehouse `" + *s + "`: floe writes s3:// locations",
            "use warehouse: s3://" + path.substr(path.find("://") + 3) +
                " (floe reads s3a:// and s3n:// locations Java engines wrote)");
    return std::nullopt;
  }
  if (path.starts_with("file://")) {
    path = path.substr(7);
  } else if (path.find("://") != std::string::npos) {
    r.Error(node, "warehouse `" + *s + "` is neither a local directory nor on S3",
            "use a path, file:///abs/path or s3://bucket/prefix");
    return std::nullopt;
  }
  if (path.empty()) return std::nullopt;
  return "file://" + r.Resolve(path);
}

}  // namespace floe::config
