#include "floe/iceberg/vended_credentials.h"

#include <chrono>

#include "floe/common/parse.h"

namespace floe::iceberg {

namespace {

// Refreshed this long before they expire, at most this often.
constexpr int64_t kRefreshAheadMs = 5 * 60 * 1000;
constexpr int64_t kRefreshEveryMs = 30 * 1000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `s3a://` and `s3n://` are the same objects as `s3://`.
std::string Normalize(std::string_view location) {
  for (std::string_view scheme : {"s3a://", "s3n://"}) {
    if (location.starts_with(scheme)) {
      return "s3://" + std::string(location.substr(scheme.size()));
    }
  }
  return std::string(location);
}

// Whether `location` is `prefix` or below it (a whole path segment).
bool Under(std::string_view location, std::string_view prefix) {
  if (!location.starts_with(prefix)) return false;
  return location.size() == prefix.size() || prefix.ends_with('/') ||
         location[prefix.size()] == '/';
}

}  // namespace

std::optional<std::string> ScopeToTable(std::string_view prefix,
                                        std::string_view table_location) {
  std::string p = Normalize(prefix);
  std::string t = Normalize(table_location);
  while (p.size() > 5 && p.ends_with('/')) p.pop_back();
  while (t.size() > 5 && t.ends_with('/')) t.pop_back();
  if (Under(p, t)) return p;
  if (Under(t, p)) return t;
  return std::nullopt;
}

std::optional<StorageCredential> CredentialFromProperties(
    const std::map<std::string, std::string>& properties) {
  auto get = [&](const char* key) {
    auto it = properties.find(key);
    return it == properties.end() ? std::string() : it->second;
  };
  StorageCredential out;
  out.access_key_id = get("s3.access-key-id");
  out.secret_access_key = get("s3.secret-access-key");
  if (out.access_key_id.empty() || out.secret_access_key.empty()) return std::nullopt;
  out.session_token = get("s3.session-token");
  out.expires_at_ms = ParseInt64(get("s3.session-token-expires-at-ms")).value_or(0);
  return out;
}

VendedCredentials& VendedCredentials::Global() {
  static VendedCredentials* registry = new VendedCredentials();  // never destroyed
  return *registry;
}

void VendedCredentials::Put(std::string prefix, StorageCredential credential,
                            const void* owner, std::function<void()> refresh) {
  prefix = Normalize(prefix);
  while (prefix.size() > 5 && prefix.ends_with('/')) prefix.pop_back();
  std::lock_guard lock(mu_);
  Entry& entry = entries_[prefix];
  entry.credential = std::move(credential);
  entry.owner = owner;
  if (refresh) entry.refresh = std::move(refresh);
}

std::optional<StorageCredential> VendedCredentials::For(std::string_view location) {
  const std::string normalized = Normalize(location);
  for (int round = 0; round < 2; ++round) {
    std::function<void()> refresh;
    {
      std::lock_guard lock(mu_);
      // The longest prefix of the location with credentials.
      Entry* found = nullptr;
      size_t found_size = 0;
      for (auto& [prefix, entry] : entries_) {
        if (prefix.size() >= found_size && Under(normalized, prefix)) {
          found = &entry;
          found_size = prefix.size();
        }
      }
      if (found == nullptr) return std::nullopt;
      Entry& entry = *found;
      const int64_t now = NowMs();
      const bool expiring = entry.credential.expires_at_ms != 0 &&
                            now + kRefreshAheadMs >= entry.credential.expires_at_ms;
      if (round == 1 || !expiring || !entry.refresh ||
          now - entry.last_refresh_ms < kRefreshEveryMs) {
        return entry.credential;
      }
      entry.last_refresh_ms = now;
      refresh = entry.refresh;
    }
    refresh();  // outside the lock: it calls Put
  }
  return std::nullopt;  // not reached
}

void VendedCredentials::Forget(const void* owner) {
  std::lock_guard lock(mu_);
  for (auto& [prefix, entry] : entries_) {
    if (entry.owner == owner) {
      entry.refresh = nullptr;
      entry.owner = nullptr;
    }
  }
}

void VendedCredentials::Clear() {
  std::lock_guard lock(mu_);
  entries_.clear();
}

}  // namespace floe::iceberg
