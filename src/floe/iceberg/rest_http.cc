#include "floe/iceberg/rest_http.h"

#include <functional>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "floe/iceberg/table.h"

namespace floe::iceberg {

using json = nlohmann::json;

namespace {

// What a server may say in an error is shown, up to this much of it.
constexpr size_t kMaxServerMessage = 400;

// `key=value` for the settings whose values are no secret (endpoints, regions, flags
// and names a Java client reads), the key alone for any other (it may be a key or a
// token).
std::string DescribeConfigProperty(const std::string& key, const json& value) {
  static const std::set<std::string, std::less<>> kPlain = {
      "s3.endpoint", "s3.region", "client.region",  "s3.path-style-access",
      "warehouse",   "io-impl",   "rest-page-size", "s3.remote-signing-enabled"};
  if (!kPlain.contains(key) ||
      !(value.is_string() || value.is_boolean() || value.is_number())) {
    return key;
  }
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return key + "=" + text;
}

// A prefix the server handed out, escaped where a path cannot hold it as it is (a
// space, say); `/` and `%XX` escapes the server wrote stay.
std::string EscapePrefix(const std::string& prefix) {
  return UrlEscape(prefix, "/%!$&'()*+,;=:@");
}

}  // namespace

CatalogConfig ReadCatalogConfig(const json& config) {
  CatalogConfig out;
  // Overrides win over what the client was given; defaults lose to it. floe takes
  // the path prefix from them; the rest are a Java client's properties, which floe
  // sets in its pipeline file instead: said once, so an object-store setting the
  // server expects (its endpoint, say) is not silently missed.
  for (const char* section : {"defaults", "overrides"}) {
    if (!config.contains(section) || !config[section].is_object()) continue;
    for (const auto& [key, value] : config[section].items()) {
      if (key == "prefix" && value.is_string()) {
        out.prefix = EscapePrefix(value.get<std::string>());
      } else if (key != "prefix") {
        out.unused.push_back(std::string(section) + " " +
                             DescribeConfigProperty(key, value));
      }
    }
  }
  // A server that lists its endpoints and not register (S3 Tables, say) gets new
  // tables by createTable; register otherwise (floe writes the first metadata).
  if (config.contains("endpoints") && config["endpoints"].is_array()) {
    bool registers = false;
    bool creates = false;
    for (const json& e : config["endpoints"]) {
      if (!e.is_string()) continue;
      const std::string endpoint = e.get<std::string>();
      registers |= endpoint == "POST /v1/{prefix}/namespaces/{namespace}/register";
      creates |= endpoint == "POST /v1/{prefix}/namespaces/{namespace}/tables";
    }
    out.create_tables = creates && !registers;
  }
  return out;
}

std::string EscapeNamespace(const Namespace& ns) {
  std::string joined;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (i > 0) joined += '\x1f';
    joined += ns[i];
  }
  return UrlEscape(joined);
}

arrow::Result<BaseUri> SplitUri(const std::string& uri, const char* what) {
  const size_t scheme_end = uri.find("://");
  if (scheme_end == std::string::npos || (uri.compare(0, scheme_end, "http") != 0 &&
                                          uri.compare(0, scheme_end, "https") != 0)) {
    return arrow::Status::Invalid(what, " `", uri, "` is not an http:// or https:// URI");
  }
  const size_t path_start = uri.find('/', scheme_end + 3);
  BaseUri out;
  out.scheme_host_port = uri.substr(0, path_start);
  if (path_start != std::string::npos) out.path = uri.substr(path_start);
  while (!out.path.empty() && out.path.back() == '/') out.path.pop_back();
  if (out.scheme_host_port.size() <= scheme_end + 3) {
    return arrow::Status::Invalid(what, " `", uri, "` names no host");
  }
  return out;
}

ServerError ParseServerError(const HttpResponse& response) {
  ServerError out;
  const json body = json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const json& e = body["error"];
    if (e.contains("type") && e["type"].is_string()) out.type = e["type"];
    if (e.contains("message") && e["message"].is_string()) out.message = e["message"];
  }
  if (out.message.empty() && out.type.empty()) out.message = response.body;
  if (out.message.size() > kMaxServerMessage) {
    out.message.resize(kMaxServerMessage);
    out.message += "...";
  }
  for (char& c : out.message) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}

}  // namespace floe::iceberg
