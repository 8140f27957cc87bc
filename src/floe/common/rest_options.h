// How floe reaches an Iceberg REST catalog: the `catalog:` section of the pipeline
// file with `type: rest` (docs/configuration.md), parsed by config/ and used by
// iceberg/'s REST client, with no dependency on the HTTP library.
#pragma once

#include <map>
#include <string>

namespace floe {

struct RestCatalogOptions {
  /// The catalog's base URI, `http(s)://host[:port][/path]` (the client adds
  /// `/v1/...`).
  std::string uri;
  /// The `warehouse` parameter of `GET /v1/config`: which of the server's
  /// warehouses (or catalogs) floe's tables go to. Empty: the server's default.
  std::string warehouse;
  /// A static bearer token (secret). Exclusive with the OAuth2 client credentials.
  std::string token;
  /// OAuth2 client credentials (the secret is secret): a token is fetched from
  /// `oauth2_server_uri` and refreshed before it expires.
  std::string client_id;
  std::string client_secret;
  /// Empty: `<uri>/v1/oauth/tokens`.
  std::string oauth2_server_uri;
  std::string scope = "catalog";
  /// Extra headers sent with every request (values are treated as secrets).
  std::map<std::string, std::string> headers;
  /// Seconds.
  double connect_timeout_s = 10;
  double request_timeout_s = 60;
  /// Attempts of a request that is safe to repeat (reads, property updates) when
  /// the server answers 429 or 5xx or the connection fails; backing off between.
  int max_attempts = 4;
  /// Where the settings are in the pipeline file, for messages: `catalog`, or
  /// `catalogs.<name>.catalog`.
  std::string setting = "catalog";
};

}  // namespace floe
