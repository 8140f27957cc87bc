// The Iceberg REST catalog client (the REST OpenAPI specification of Apache
// Iceberg): namespaces and tables through `/v1/...`, new tables registered from the
// first metadata file floe writes, and every later commit sent as requirements and
// updates (`POST .../tables/{table}`), the server writing the metadata file. Auth: a
// static bearer token or OAuth2 client credentials, refreshed before expiry.
//
// Errors map to CatalogErrorKind: 409 on a commit is kCommitFailed (reload and
// retry); a 5xx, a timeout or a connection broken after the request was sent is
// kCommitStateUnknown (reload and look for the commit first). Requests that are safe
// to repeat are retried on 429, 5xx and connection failures.
#pragma once

#include <memory>

#include <arrow/result.h>

#include "floe/common/rest_options.h"
#include "floe/iceberg/catalog.h"

namespace floe::iceberg {

/// Connects to the REST catalog at options.uri as catalog `name`: fetches an OAuth2
/// token when client credentials are given, then `GET /v1/config` (the path prefix
/// and the server's overrides). Fails with the server's answer when it cannot.
/// Thread-safe.
arrow::Result<std::unique_ptr<Catalog>> OpenRestCatalog(std::string name,
                                                        RestCatalogOptions options);

}  // namespace floe::iceberg
