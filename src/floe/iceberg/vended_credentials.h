// Object-store credentials a catalog vends for a table's files (the Iceberg REST
// catalog's `loadTable` answer: `config` with `s3.access-key-id`, ... and
// `storage-credentials`), kept for the FileIOs of this process: a read or write of a
// location under a prefix with vended credentials is signed with them instead of the
// `s3:` settings (docs/configuration.md, "REST catalogs").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace floe::iceberg {

struct StorageCredential {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  /// Unix milliseconds after which they no longer work; 0: not said.
  int64_t expires_at_ms = 0;
  bool operator==(const StorageCredential&) const = default;
};

/// The credential of an object-store property map (`s3.access-key-id`,
/// `s3.secret-access-key`, `s3.session-token`, `s3.session-token-expires-at-ms`);
/// nullopt without both keys.
std::optional<StorageCredential> CredentialFromProperties(
    const std::map<std::string, std::string>& properties);

/// The prefix vended credentials may sign, given the `prefix` a catalog named and the
/// `table_location` they were vended with: the narrower of the two when one holds the
/// other (a credential for a whole bucket signs only that table's files: the catalog
/// vended it for that table), nullopt when they are apart.
std::optional<std::string> ScopeToTable(std::string_view prefix,
                                        std::string_view table_location);

class VendedCredentials {
 public:
  /// The process's registry, shared by every catalog and FileIO.
  static VendedCredentials& Global();

  /// Credentials for every location under `prefix` (an `s3://`, `s3a://` or
  /// `s3n://` location; a longer prefix wins). `refresh`, when given, asks the
  /// catalog for new ones (it calls Put again); it is called by For() once they are
  /// within a few minutes of expiring. `owner` identifies the catalog, for Forget().
  void Put(std::string prefix, StorageCredential credential, const void* owner,
           std::function<void()> refresh = {});

  /// The credentials for `location`, if any prefix of it has some (refreshed first
  /// when they are about to expire and their catalog is still open).
  std::optional<StorageCredential> For(std::string_view location);

  /// Stops calling `owner`'s refresh functions (it is going away); the credentials
  /// stay until they expire.
  void Forget(const void* owner);

  /// Every entry removed (tests).
  void Clear();

 private:
  struct Entry {
    StorageCredential credential;
    const void* owner = nullptr;
    std::function<void()> refresh;
    int64_t last_refresh_ms = 0;
  };
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace floe::iceberg
