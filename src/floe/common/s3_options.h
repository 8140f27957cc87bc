// How floe reaches an S3-compatible object store: the `s3:` section of the
// pipeline file (docs/configuration.md), parsed by config/ and used by iceberg/'s
// FileIO, with no dependency on the client library.
#pragma once

#include <string>

namespace floe {

struct S3Options {
  /// `http(s)://host:port` of an S3-compatible server; empty: AWS's own endpoints.
  std::string endpoint;
  /// Empty: the AWS SDK's default (AWS_REGION, the profile, else us-east-1).
  std::string region;
  /// Bucket in the path (`host/bucket/key`) instead of the host name.
  bool path_style = false;
  /// Both empty: the AWS default credential chain (environment variables, the
  /// shared credentials file and profile, web identity, instance metadata).
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  /// Seconds; 0 leaves the SDK's default.
  double connect_timeout_s = 10;
  double request_timeout_s = 60;
  /// Attempts of a request that fails with a retryable error (throttling, 5xx,
  /// a dropped connection), backing off between them.
  int max_attempts = 10;
};

}  // namespace floe
