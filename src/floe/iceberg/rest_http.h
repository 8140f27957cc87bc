// Pieces of the Iceberg REST catalog client's HTTP exchange (rest_catalog.cc):
// the base URI, a namespace as a path segment, a response and what a failed one
// says. Internal to iceberg/.
#pragma once

#include <string>
#include <vector>

#include <arrow/result.h>
#include <nlohmann/json.hpp>

#include "floe/iceberg/catalog.h"

namespace floe::iceberg {

/// `http(s)://host[:port]` and the path after it (no trailing `/`).
struct BaseUri {
  std::string scheme_host_port;
  std::string path;
};

/// `uri` split; Invalid (naming `what`, the setting) when it is not http(s) or
/// names no host.
arrow::Result<BaseUri> SplitUri(const std::string& uri, const char* what);

/// A namespace as one path segment: levels joined by the unit separator (0x1F), as
/// the specification says, percent-encoded.
std::string EscapeNamespace(const Namespace& ns);

/// What floe takes from `GET /v1/config`'s answer.
struct CatalogConfig {
  /// The path prefix (`prefix` of its `defaults`, which its `overrides` win over;
  /// empty: none), percent-encoded where a request path cannot hold it as it is.
  std::string prefix;
  /// Its other properties (a Java client's: `s3.endpoint`, ...), which floe does not
  /// apply, as `<section> <key>[=<value>]`, the value only of settings that are no
  /// secret (endpoints, regions, flags).
  std::vector<std::string> unused;
  /// It lists its `endpoints`, createTable among them but not register (S3 Tables,
  /// say): new tables are created, not registered.
  bool create_tables = false;
};
CatalogConfig ReadCatalogConfig(const nlohmann::json& config);

struct HttpResponse {
  int status = 0;
  std::string body;
};

/// The ErrorModel of a failed response: its message and type, as far as the body
/// has them (the message cut at 400 bytes, control characters as spaces).
struct ServerError {
  std::string type;
  std::string message;
};
ServerError ParseServerError(const HttpResponse& response);

/// Whether a request safe to repeat is repeated after this answer.
inline bool Retryable(int status) { return status == 429 || status >= 500; }

}  // namespace floe::iceberg
