#include "floe/config/rest_config.h"

#include <cmath>
#include <string>

#include "floe/config/keys.h"

namespace floe::config {
namespace {

constexpr char kRedacted[] = "<redacted>";

}  // namespace

namespace {

// Whether an http(s) URI names a user (and maybe a password) before its host.
bool HasUserinfo(const std::string& uri) {
  const size_t start = uri.find("://");
  if (start == std::string::npos) return uri.find('@') != std::string::npos;
  const size_t end = uri.find_first_of("/?#", start + 3);
  return uri.substr(start + 3, end - start - 3).find('@') != std::string::npos;
}

// A catalog's base URI: no credentials in it (they would be printed and logged as a
// part of it), no query or fragment (floe appends /v1/... to it).
bool CheckUri(Reader& r, const YAML::Node& at, const std::string& uri,
              const std::string& key) {
  if (HasUserinfo(uri)) {
    r.Error(at,
            "catalog `" + key +
                "` must not hold credentials (user:password@; its text is not shown)",
            "give a token (token or token_file) or client_id and client_secret, and "
            "headers for anything else the server needs");
    return false;
  }
  if (uri.find_first_of("?#") != std::string::npos) {
    r.Error(at, "catalog `" + key + "` must not have a query or a fragment",
            "floe appends /v1/... to it: give the base URI, e.g. "
            "https://catalog.example.com/api/catalog, and credentials as token");
    return false;
  }
  return true;
}

}  // namespace

void ParseRestCatalog(Reader& r, const YAML::Node& node, RestCatalogOptions* rest) {
  for (const char* key : {"path", "conninfo", "conninfo_file"}) {
    if (node[key]) {
      r.Error(node[key], std::string("a rest catalog takes `uri`, not `") + key + "`",
              "for example: catalog: {type: rest, uri: http://127.0.0.1:8181}");
    }
  }
  if (!node["uri"]) {
    r.Error(node, "a rest catalog needs `uri`",
            "for example: catalog: {type: rest, uri: https://catalog.example.com/api}");
  } else if (auto uri = r.String(node["uri"], "uri")) {
    if (!uri->starts_with("http://") && !uri->starts_with("https://")) {
      r.Error(node["uri"],
              "catalog `uri` has no http:// or https://" +
                  (HasUserinfo(*uri) ? std::string() : " (`" + *uri + "`)"),
              "for example: uri: http://127.0.0.1:8181");
    } else if (CheckUri(r, node["uri"], *uri, "uri")) {
      rest->uri = *uri;
      while (rest->uri.ends_with('/')) rest->uri.pop_back();
    }
  }
  if (node["warehouse"]) {
    if (auto w = r.String(node["warehouse"], "warehouse")) rest->warehouse = *w;
  }
  const bool has_token = node["token"] || node["token_file"];
  const bool has_id = static_cast<bool>(node["client_id"]);
  const bool has_secret = node["client_secret"] || node["client_secret_file"];
  if (has_token && (has_id || has_secret)) {
    r.Error(node,
            "a rest catalog takes `token` or `client_id` and `client_secret`, not both");
  } else if (has_token) {
    if (auto t = r.Secret(node, "token", "catalog", true)) rest->token = *t;
  } else if (has_id != has_secret) {
    r.Error(node, "OAuth2 needs both `client_id` and `client_secret`",
            "for example: client_id: floe, client_secret: ${CATALOG_CLIENT_SECRET}");
  } else if (has_id) {
    if (auto id = r.String(node["client_id"], "client_id")) rest->client_id = *id;
    if (auto secret = r.Secret(node, "client_secret", "catalog", true)) {
      rest->client_secret = *secret;
    }
  }
  if (node["oauth2_server_uri"]) {
    if (auto u = r.String(node["oauth2_server_uri"], "oauth2_server_uri")) {
      if (!u->starts_with("http://") && !u->starts_with("https://")) {
        r.Error(node["oauth2_server_uri"],
                "catalog `oauth2_server_uri` has no http:// or https://");
      } else if (!HasUserinfo(*u)) {
        rest->oauth2_server_uri = *u;
      } else {
        r.Error(node["oauth2_server_uri"],
                "`oauth2_server_uri` must not hold credentials (user:password@; its "
                "text is not shown)",
                "give client_id and client_secret (or client_secret_file) instead");
      }
    }
  }
  if (node["scope"]) {
    if (auto v = r.String(node["scope"], "scope")) rest->scope = *v;
  }
  if (const YAML::Node headers = node["headers"]) {
    if (!headers.IsMap()) {
      r.Error(headers, "catalog `headers` must be a mapping of header names to values",
              "for example: headers: {X-Iceberg-Access-Delegation: vended-credentials}");
    } else {
      for (const auto& entry : headers) {
        const std::string name = entry.first.as<std::string>();
        const bool name_ok =
            !name.empty() && name.find_first_of(":\r\n \t") == std::string::npos;
        if (!entry.second.IsScalar() || !name_ok) {
          r.Error(entry.first,
                  "catalog header `" + name + "` needs a token name and one value");
          continue;
        }
        const std::string value = entry.second.as<std::string>();
        if (value.find_first_of("\r\n") != std::string::npos) {
          r.Error(entry.first,
                  "catalog header `" + name + "` has a line break in its value");
          continue;
        }
        rest->headers[name] = value;
      }
    }
  }
  if (node["request_timeout"]) {
    if (auto d = r.Duration(node["request_timeout"], keys::kCatalogRequestTimeout)) {
      rest->request_timeout_s = static_cast<double>(d->count()) / 1000;
    }
  }
  if (node["max_attempts"]) {
    if (auto n = r.Integer(node["max_attempts"], keys::kCatalogMaxAttempts)) {
      rest->max_attempts = static_cast<int>(*n);
    }
  }
}

void EmitRestCatalog(YAML::Emitter& out, const RestCatalogOptions& rest) {
  out << YAML::Key << "type" << YAML::Value << "rest";
  out << YAML::Key << "uri" << YAML::Value << rest.uri;
  out << YAML::Key << "warehouse" << YAML::Value << rest.warehouse;
  if (!rest.token.empty()) out << YAML::Key << "token" << YAML::Value << kRedacted;
  if (!rest.client_id.empty()) {
    out << YAML::Key << "client_id" << YAML::Value << rest.client_id;
    out << YAML::Key << "client_secret" << YAML::Value << kRedacted;
  }
  out << YAML::Key << "oauth2_server_uri" << YAML::Value
      << (rest.oauth2_server_uri.empty() ? rest.uri + "/v1/oauth/tokens"
                                         : rest.oauth2_server_uri);
  out << YAML::Key << "scope" << YAML::Value << rest.scope;
  out << YAML::Key << "headers" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, value] : rest.headers) {
    out << YAML::Key << name << YAML::Value << kRedacted;
  }
  out << YAML::EndMap;
  out << YAML::Key << "request_timeout" << YAML::Value
      << (std::to_string(std::llround(rest.request_timeout_s * 1000)) + "ms");
  out << YAML::Key << "max_attempts" << YAML::Value << rest.max_attempts;
}

}  // namespace floe::config
