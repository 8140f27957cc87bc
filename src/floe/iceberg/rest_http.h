// Pieces of the Iceberg REST catalog client's HTTP exchange (rest_catalog.cc):
// the base URI, a namespace as a path segment, a response and what a failed one
// says. Internal to iceberg/.
#pragma once

#include <string>

#include <arrow/result.h>

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
