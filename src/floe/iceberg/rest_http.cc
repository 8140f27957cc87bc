#include "floe/iceberg/rest_http.h"

#include <nlohmann/json.hpp>

#include "floe/iceberg/table.h"

namespace floe::iceberg {

using json = nlohmann::json;

namespace {

// What a server may say in an error is shown, up to this much of it.
constexpr size_t kMaxServerMessage = 400;

}  // namespace

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
