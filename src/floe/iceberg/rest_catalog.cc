#include "floe/iceberg/rest_catalog.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "floe/iceberg/rest_http.h"
#include "floe/iceberg/rest_updates.h"
#include "floe/iceberg/table.h"
#include "floe/iceberg/table_metadata.h"
#include "floe/iceberg/vended_credentials.h"

namespace floe::iceberg {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;


class RestCatalog : public Catalog {
 public:
  RestCatalog(std::string name, RestCatalogOptions options, BaseUri base)
      : name_(std::move(name)), options_(std::move(options)), base_(std::move(base)) {}
  // The credentials it vended stay (until they expire); nobody refreshes them now.
  ~RestCatalog() override { VendedCredentials::Global().Forget(this); }

  arrow::Status Initialize() {
    if (!options_.client_id.empty()) {
      std::string token_uri = options_.oauth2_server_uri;
      if (token_uri.empty()) {
        token_uri = base_.scheme_host_port + base_.path + "/v1/oauth/tokens";
      }
      ARROW_ASSIGN_OR_RAISE(
          token_base_,
          SplitUri(token_uri, (options_.setting + ".oauth2_server_uri").c_str()));
      token_client_ = MakeClient(token_base_.scheme_host_port);
      ARROW_RETURN_NOT_OK(Bearer(true).status());
    }
    std::string path = base_.path + "/v1/config";
    if (!options_.warehouse.empty())
      path += "?warehouse=" + UrlEscape(options_.warehouse);
    ARROW_ASSIGN_OR_RAISE(HttpResponse response, Send("GET", path, nullptr, true));
    if (response.status != 200) {
      arrow::Status failed = Failure("GET " + path, response);
      if (base_.path.ends_with("/v1")) {
        // The client adds /v1 itself: a uri ending in it asks for /v1/v1/config.
        failed = failed.WithMessage(failed.message(), " (", options_.setting,
                                    ".uri ends in /v1, which floe adds itself: drop it)");
      }
      return failed;
    }
    ARROW_ASSIGN_OR_RAISE(json config, ParseBody(response, "GET /v1/config"));
    const CatalogConfig read = ReadCatalogConfig(config);
    prefix_ = read.prefix;
    if (!read.unused.empty()) {
      std::string list;
      for (const auto& u : read.unused) list += (list.empty() ? "" : ", ") + u;
      spdlog::info(
          "REST catalog {}: /v1/config also gives {}; floe does not apply these (its "
          "object-store settings come from the pipeline file's s3: section and the "
          "credentials the server vends per table; docs/configuration.md, \"REST "
          "catalogs\")",
          name_, list);
    }
    v1_ = base_.path + "/v1";
    if (!prefix_.empty()) v1_ += "/" + prefix_;
    create_tables_ = read.create_tables;
    if (create_tables_) {
      spdlog::info(
          "REST catalog {} does not offer register: floe creates its tables with "
          "createTable, at the locations it asks for",
          name_);
    }
    return arrow::Status::OK();
  }

  const std::string& name() const override { return name_; }

  arrow::Status CreateNamespace(
      const Namespace& ns,
      const std::map<std::string, std::string>& properties) override {
    ARROW_RETURN_NOT_OK(CheckNamespace(ns));
    json body = {{"namespace", ns}, {"properties", json::object()}};
    for (const auto& [k, v] : properties) body["properties"][k] = v;
    const std::string what = "create namespace " + NamespaceToString(ns);
    // Repeated after a lost answer: a 409 then may be this very namespace, which
    // EnsureNamespace takes as existing.
    ARROW_ASSIGN_OR_RAISE(HttpResponse r,
                          Send("POST", v1_ + "/namespaces", &body, /*idempotent=*/true));
    if (r.status == 200 || r.status == 204) return arrow::Status::OK();
    if (r.status == 409) {
      return CatalogError(CatalogErrorKind::kAlreadyExists,
                          "namespace " + NamespaceToString(ns) + " already exists");
    }
    return Failure(what, r);
  }

  arrow::Result<bool> NamespaceExists(const Namespace& ns) override {
    if (ns.empty()) return true;
    ARROW_ASSIGN_OR_RAISE(HttpResponse r, Send("HEAD", NamespacePath(ns), nullptr, true));
    if (r.status == 200 || r.status == 204) return true;
    if (r.status == 404) return false;
    // A server without HEAD: load it instead.
    auto props = LoadNamespaceProperties(ns);
    if (props.ok()) return true;
    if (GetCatalogErrorKind(props.status()) == CatalogErrorKind::kNoSuchNamespace) {
      return false;
    }
    return props.status();
  }

  arrow::Result<std::vector<Namespace>> ListNamespaces(const Namespace& parent) override {
    std::vector<Namespace> out;
    std::string query = parent.empty() ? "" : "parent=" + EscapeNamespace(parent);
    ARROW_RETURN_NOT_OK(Paged(
        v1_ + "/namespaces", query, "list namespaces under " + NamespaceToString(parent),
        [&](const json& page) -> arrow::Status {
          if (!page.contains("namespaces") || !page["namespaces"].is_array()) {
            return arrow::Status::IOError("REST catalog ", name_,
                                          ": a namespace list without `namespaces`");
          }
          for (const json& ns : page["namespaces"]) {
            if (!ns.is_array()) continue;
            Namespace levels;
            for (const json& level : ns) {
              if (level.is_string()) levels.push_back(level.get<std::string>());
            }
            out.push_back(std::move(levels));
          }
          return arrow::Status::OK();
        },
        CatalogErrorKind::kNoSuchNamespace));
    return out;
  }

  arrow::Result<std::map<std::string, std::string>> LoadNamespaceProperties(
      const Namespace& ns) override {
    ARROW_ASSIGN_OR_RAISE(HttpResponse r, Send("GET", NamespacePath(ns), nullptr, true));
    const std::string what = "load namespace " + NamespaceToString(ns);
    if (r.status == 404) return NotFound(CatalogErrorKind::kNoSuchNamespace, ns, r);
    if (r.status != 200) return Failure(what, r);
    ARROW_ASSIGN_OR_RAISE(json body, ParseBody(r, what));
    std::map<std::string, std::string> out;
    if (body.contains("properties") && body["properties"].is_object()) {
      for (const auto& [k, v] : body["properties"].items()) {
        if (v.is_string()) out[k] = v.get<std::string>();
      }
    }
    return out;
  }

  arrow::Status UpdateNamespaceProperties(
      const Namespace& ns, const std::map<std::string, std::string>& updates,
      const std::vector<std::string>& removals) override {
    json body = {{"updates", json::object()}, {"removals", removals}};
    for (const auto& [k, v] : updates) body["updates"][k] = v;
    // Setting and removing keys again gives the same result: safe to repeat.
    ARROW_ASSIGN_OR_RAISE(HttpResponse r,
                          Send("POST", NamespacePath(ns) + "/properties", &body, true));
    if (r.status == 200 || r.status == 204) return arrow::Status::OK();
    if (r.status == 404) return NotFound(CatalogErrorKind::kNoSuchNamespace, ns, r);
    return Failure("update the properties of namespace " + NamespaceToString(ns), r);
  }

  arrow::Status DropNamespace(const Namespace& ns) override {
    ARROW_ASSIGN_OR_RAISE(HttpResponse r,
                          Send("DELETE", NamespacePath(ns), nullptr, true));
    if (r.status == 200 || r.status == 204) return arrow::Status::OK();
    if (r.status == 404) return NotFound(CatalogErrorKind::kNoSuchNamespace, ns, r);
    if (r.status == 409) {
      return CatalogError(CatalogErrorKind::kNamespaceNotEmpty,
                          "namespace " + NamespaceToString(ns) + " is not empty");
    }
    return Failure("drop namespace " + NamespaceToString(ns), r);
  }

  arrow::Status CheckIdentifier(const TableIdentifier& id) override {
    if (id.name.empty()) return arrow::Status::Invalid("a table needs a name");
    return CheckNamespace(id.ns);
  }

  arrow::Status RegisterTable(const TableIdentifier& id,
                              const std::string& metadata_location) override {
    json body = {{"name", id.name}, {"metadata-location", metadata_location}};
    // After a lost answer a 409 may be this very registration.
    auto ours = [&] {
      auto current = LoadTable(id);
      return current.ok() && *current == metadata_location;
    };
    return PostNewTable(id, "register", body, ours).status();
  }

  arrow::Result<std::optional<std::string>> CreateTable(
      const TableIdentifier& id, const TableMetadata& metadata) override {
    if (!create_tables_) return std::nullopt;
    ARROW_ASSIGN_OR_RAISE(json body, CreateTableRequest(id.name, metadata));
    // A table at the location asked for without a snapshot is this very creation
    // after a lost answer (a twin's would be the same table).
    ARROW_ASSIGN_OR_RAISE(json answer, PostNewTable(id, "tables", body, [&] {
                            return CreatedByThis(id, body);
                          }));
    if (answer.contains("metadata-location") && answer["metadata-location"].is_string()) {
      return answer["metadata-location"].get<std::string>();
    }
    return LoadTable(id);  // the answer lost: the table loaded
  }

  // POSTs a new table to .../namespaces/{ns}/<`verb`>: repeated after a failure
  // that may not have reached the server. Once one may have, a 409 is asked of
  // `ours` (this very request, applied, its answer lost), and a last failure is of
  // unknown outcome: the caller must not delete what the table would reference.
  // The answer (null when it was lost and `ours` said so).
  arrow::Result<json> PostNewTable(const TableIdentifier& id, const std::string& verb,
                                   const json& body, const std::function<bool()>& ours) {
    const std::string what =
        (verb == "register" ? "register table " : "create table ") + id.ToString();
    bool maybe_applied = false;
    for (int attempt = 1;; ++attempt) {
      auto sent = Send("POST", NamespacePath(id.ns) + "/" + verb, &body, false);
      if (!sent.ok()) {
        maybe_applied = true;
        if (attempt >= options_.max_attempts) {
          return CatalogError(CatalogErrorKind::kCommitStateUnknown,
                              sent.status().message());
        }
        Backoff(attempt);
        continue;
      }
      const HttpResponse& r = *sent;
      if (r.status == 200) {
        json answer = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
        if (!answer.is_object()) answer = json::object();
        KeepVendedCredentials(id, answer);
        return answer;
      }
      if (r.status == 404) return NotFound(CatalogErrorKind::kNoSuchNamespace, id.ns, r);
      if (r.status == 409) {
        if (maybe_applied && ours()) return json();
        return CatalogError(CatalogErrorKind::kAlreadyExists,
                            "table " + id.ToString() + " already exists");
      }
      if (Retryable(r.status)) {
        maybe_applied = true;
        if (attempt < options_.max_attempts) {
          Backoff(attempt);
          continue;
        }
      }
      if (maybe_applied) {
        return CatalogError(CatalogErrorKind::kCommitStateUnknown, Describe(what, r));
      }
      return Failure(what, r);
    }
  }

  // Whether table `id` is as the createTable `body` makes it: at its location and
  // without a snapshot.
  bool CreatedByThis(const TableIdentifier& id, const json& body) {
    auto r = Send("GET", TablePath(id), nullptr, true);
    if (!r.ok() || r->status != 200) return false;
    auto answer = ParseBody(*r, "load table " + id.ToString());
    if (!answer.ok() || !answer->contains("metadata")) return false;
    const json& m = (*answer)["metadata"];
    if (!m.is_object() || m.value("location", json()) != body["location"]) return false;
    const json snapshot = m.value("current-snapshot-id", json());
    return snapshot.is_null() || snapshot == -1;
  }

  arrow::Result<std::string> LoadTable(const TableIdentifier& id) override {
    ARROW_ASSIGN_OR_RAISE(HttpResponse r, Send("GET", TablePath(id), nullptr, true));
    const std::string what = "load table " + id.ToString();
    if (r.status == 404) return NotFoundTable(id, r);
    if (r.status != 200) return Failure(what, r);
    ARROW_ASSIGN_OR_RAISE(json body, ParseBody(r, what));
    if (!body.contains("metadata-location") || !body["metadata-location"].is_string()) {
      return arrow::Status::IOError("REST catalog ", name_, ": ", what,
                                    ": the answer has no metadata-location");
    }
    KeepVendedCredentials(id, body);
    return body["metadata-location"].get<std::string>();
  }

  arrow::Result<bool> TableExists(const TableIdentifier& id) override {
    ARROW_ASSIGN_OR_RAISE(HttpResponse r, Send("HEAD", TablePath(id), nullptr, true));
    if (r.status == 200 || r.status == 204) return true;
    if (r.status == 404) return false;
    auto loaded = LoadTable(id);
    if (loaded.ok()) return true;
    const auto kind = GetCatalogErrorKind(loaded.status());
    if (kind == CatalogErrorKind::kNoSuchTable ||
        kind == CatalogErrorKind::kNoSuchNamespace) {
      return false;
    }
    return loaded.status();
  }

  arrow::Result<std::vector<TableIdentifier>> ListTables(const Namespace& ns) override {
    std::vector<TableIdentifier> out;
    ARROW_RETURN_NOT_OK(Paged(
        NamespacePath(ns) + "/tables", "", "list tables of " + NamespaceToString(ns),
        [&](const json& page) -> arrow::Status {
          if (!page.contains("identifiers") || !page["identifiers"].is_array()) {
            return arrow::Status::IOError("REST catalog ", name_,
                                          ": a table list without `identifiers`");
          }
          for (const json& ident : page["identifiers"]) {
            if (!ident.is_object() || !ident.contains("name") ||
                !ident["name"].is_string()) {
              continue;
            }
            TableIdentifier id;
            id.ns = ns;
            id.name = ident["name"].get<std::string>();
            out.push_back(std::move(id));
          }
          return arrow::Status::OK();
        },
        CatalogErrorKind::kNoSuchNamespace));
    return out;
  }

  arrow::Status DropTable(const TableIdentifier& id) override {
    ARROW_ASSIGN_OR_RAISE(
        HttpResponse r,
        Send("DELETE", TablePath(id) + "?purgeRequested=false", nullptr, true));
    if (r.status == 200 || r.status == 204) return arrow::Status::OK();
    if (r.status == 404) return NotFoundTable(id, r);
    return Failure("drop table " + id.ToString(), r);
  }

  arrow::Status RenameTable(const TableIdentifier& from,
                            const TableIdentifier& to) override {
    json body = {{"source", {{"namespace", from.ns}, {"name", from.name}}},
                 {"destination", {{"namespace", to.ns}, {"name", to.name}}}};
    ARROW_ASSIGN_OR_RAISE(HttpResponse r,
                          Send("POST", v1_ + "/tables/rename", &body, false));
    if (r.status == 200 || r.status == 204) return arrow::Status::OK();
    if (r.status == 404) return NotFoundTable(from, r);
    if (r.status == 409) {
      return CatalogError(CatalogErrorKind::kAlreadyExists,
                          "table " + to.ToString() + " already exists");
    }
    return Failure("rename table " + from.ToString(), r);
  }

  arrow::Status CommitTable(const TableIdentifier& id, const std::string&,
                            const std::string&) override {
    return arrow::Status::NotImplemented("REST catalog ", name_,
                                         " writes metadata itself: commit ",
                                         id.ToString(), " as changes");
  }

  bool WritesMetadata() const override { return true; }

  arrow::Result<Committed> CommitChanges(const TableIdentifier& id,
                                         const TableMetadata& base,
                                         const TableMetadata& next) override {
    ARROW_ASSIGN_OR_RAISE(json body, TableCommitRequest(base, next));
    body["identifier"] = {{"namespace", id.ns}, {"name", id.name}};
    const std::string what = "commit to " + id.ToString();
    auto sent = Send("POST", TablePath(id), &body, /*idempotent=*/false);
    if (!sent.ok()) {
      // Sent or not, applied or not: nobody can say.
      return CatalogError(CatalogErrorKind::kCommitStateUnknown, sent.status().message());
    }
    const HttpResponse& r = *sent;
    if (r.status == 409) {
      return CatalogError(CatalogErrorKind::kCommitFailed,
                          Describe(what, r) + " (the table moved on; reload and retry)");
    }
    if (r.status >= 500) {
      return CatalogError(CatalogErrorKind::kCommitStateUnknown, Describe(what, r));
    }
    if (r.status == 404) return NotFoundTable(id, r);
    if (r.status != 200) return Failure(what, r);
    auto parsed = ParseBody(r, what);
    if (!parsed.ok() || !parsed->contains("metadata-location") ||
        !(*parsed)["metadata-location"].is_string() || !parsed->contains("metadata")) {
      // Applied, but floe cannot tell what became of the table from this answer.
      return CatalogError(CatalogErrorKind::kCommitStateUnknown,
                          what + ": the answer is not a commit result");
    }
    Committed out;
    out.metadata_location = (*parsed)["metadata-location"].get<std::string>();
    out.metadata_json = (*parsed)["metadata"].dump();
    return out;
  }

 private:
  std::unique_ptr<httplib::Client> MakeClient(const std::string& scheme_host_port) {
    auto client = std::make_unique<httplib::Client>(scheme_host_port);
    const auto to_duration = [](double s) {
      return std::chrono::microseconds(static_cast<int64_t>(std::llround(s * 1e6)));
    };
    client->set_connection_timeout(to_duration(options_.connect_timeout_s));
    client->set_read_timeout(to_duration(options_.request_timeout_s));
    client->set_write_timeout(to_duration(options_.request_timeout_s));
    client->set_keep_alive(true);
    client->set_url_encode(false);  // paths are escaped here
    return client;
  }

  static arrow::Status CheckNamespace(const Namespace& ns) {
    for (const auto& level : ns) {
      if (level.empty()) return arrow::Status::Invalid("a namespace level is empty");
      if (level.find('\x1f') != std::string::npos) {
        return arrow::Status::Invalid(
            "namespace level contains the unit separator (0x1F), which the REST "
            "protocol uses between levels");
      }
      // The protocol itself carries it, but catalogs behind it (a JDBC catalog, Hive)
      // and readers given dotted names split a level at its dots: the table would
      // show under other namespaces than floe's. Refused as the SQL catalog does.
      if (level.find('.') != std::string::npos) {
        return arrow::Status::Invalid(
            "namespace level '", level,
            "' contains '.', which catalogs and readers take as a level separator; "
            "rename it (for example replace '.' with '_')");
      }
    }
    return arrow::Status::OK();
  }

  std::string NamespacePath(const Namespace& ns) const {
    return v1_ + "/namespaces/" + EscapeNamespace(ns);
  }
  std::string TablePath(const TableIdentifier& id) const {
    return NamespacePath(id.ns) + "/tables/" + UrlEscape(id.name);
  }

  void Backoff(int attempt) {
    static thread_local std::mt19937 rng{std::random_device{}()};
    int64_t wait = 200;
    for (int i = 1; i < attempt && wait < 5000; ++i) wait *= 2;
    std::uniform_int_distribution<int64_t> jitter(wait / 2,
                                                  std::min<int64_t>(wait, 5000));
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
  }

  arrow::Status FetchToken() {
    httplib::Params form = {{"grant_type", "client_credentials"},
                            {"client_id", options_.client_id},
                            {"client_secret", options_.client_secret}};
    if (!options_.scope.empty()) form.emplace("scope", options_.scope);
    const std::string path =
        token_base_.path.empty() ? std::string("/") : token_base_.path;
    for (int attempt = 1;; ++attempt) {
      auto result = token_client_->Post(path, form);
      if (!result) {
        if (attempt < options_.max_attempts) {
          Backoff(attempt);
          continue;
        }
        return arrow::Status::IOError(
            "REST catalog ", name_, ": the OAuth2 token endpoint ",
            token_base_.scheme_host_port, token_base_.path, " cannot be reached (",
            httplib::to_string(result.error()), "); check ", options_.setting,
            ".oauth2_server_uri");
      }
      HttpResponse r{result->status, result->body};
      if (Retryable(r.status) && attempt < options_.max_attempts) {
        Backoff(attempt);
        continue;
      }
      if (r.status != 200) {
        return arrow::Status::IOError(
            "REST catalog ", name_, ": the OAuth2 token endpoint refused client `",
            options_.client_id, "` (HTTP ", r.status, " ", ParseOAuthError(r),
            "); check catalog.client_id and catalog.client_secret");
      }
      const json body = json::parse(r.body, nullptr, false);
      if (!body.is_object() || !body.contains("access_token") ||
          !body["access_token"].is_string()) {
        return arrow::Status::IOError("REST catalog ", name_,
                                      ": the OAuth2 token endpoint sent no access_token");
      }
      bearer_ = body["access_token"].get<std::string>();
      int64_t expires_in = 3600;
      if (body.contains("expires_in") && body["expires_in"].is_number()) {
        expires_in = std::max<int64_t>(1, body["expires_in"].get<int64_t>());
      }
      // Refreshed with a tenth of its life (at most a minute) to spare.
      const int64_t spare = std::min<int64_t>(60, expires_in / 10);
      refresh_at_ = Clock::now() + std::chrono::seconds(expires_in - spare);
      return arrow::Status::OK();
    }
  }

  // What a failed exchange means, with what to check.
  std::string TransportError(httplib::Error error) const {
    const std::string where = base_.scheme_host_port;
    switch (error) {
      case httplib::Error::Connection:
      case httplib::Error::ConnectionTimeout:
        return "cannot connect to " + where +
               " (refused, unreachable, or the host name does not resolve); check " +
               options_.setting + ".uri and that the catalog is up";
      case httplib::Error::Read:
        return "no answer from " + where + " (the connection broke, or no answer came " +
               "within " + options_.setting + ".request_timeout, " +
               std::to_string(std::llround(options_.request_timeout_s)) + "s)";
      case httplib::Error::Write:
        return "the connection to " + where + " broke while sending";
      case httplib::Error::SSLConnection:
      case httplib::Error::SSLLoadingCerts:
      case httplib::Error::SSLServerVerification:
        return "TLS with " + where + " failed (" + httplib::to_string(error) +
               "); check the server's certificate and the system's CA certificates";
      default:
        return httplib::to_string(error) + " (" + where + ")";
    }
  }

  static std::string ParseOAuthError(const HttpResponse& r) {
    const json body = json::parse(r.body, nullptr, false);
    if (body.is_object() && body.contains("error") && body["error"].is_string()) {
      return body["error"].get<std::string>();
    }
    return ParseServerError(r).type;
  }

  httplib::Headers Headers(const std::string& bearer) const {
    httplib::Headers headers;
    for (const auto& [k, v] : options_.headers) headers.emplace(k, v);
    const std::string& token = bearer.empty() ? options_.token : bearer;
    if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
    headers.emplace("Accept", "application/json");
    headers.emplace("X-Client-Version", "floe");
    // Ask for credentials to the tables' files, as Iceberg's own clients do (a
    // `catalog.headers` entry of the same name replaces it).
    if (!headers.contains("X-Iceberg-Access-Delegation")) {
      headers.emplace("X-Iceberg-Access-Delegation", "vended-credentials");
    }
    return headers;
  }

  // The object-store credentials a loadTable-shaped answer vends (`config`, for the
  // table's location, and `storage-credentials`, each for its prefix), kept for the
  // FileIOs (vended_credentials.h), with a refresh that loads the table again.
  void KeepVendedCredentials(const TableIdentifier& id, const HttpResponse& r) {
    const json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_object()) KeepVendedCredentials(id, body);
  }
  void KeepVendedCredentials(const TableIdentifier& id, const json& body) {
    auto properties = [](const json& config) {
      std::map<std::string, std::string> out;
      if (!config.is_object()) return out;
      for (const auto& [k, v] : config.items()) {
        if (v.is_string()) out[k] = v.get<std::string>();
      }
      return out;
    };
    // Credentials are the table's: they sign files under its location only (a
    // prefix wider than the table is narrowed to it; one apart from it is not used).
    if (!body.contains("metadata") || !body["metadata"].is_object() ||
        !body["metadata"].contains("location") ||
        !body["metadata"]["location"].is_string()) {
      return;
    }
    const std::string location = body["metadata"]["location"].get<std::string>();
    auto refresh = [this, id] { ARROW_UNUSED(LoadTable(id)); };
    VendedCredentials& vended = VendedCredentials::Global();
    if (body.contains("storage-credentials") && body["storage-credentials"].is_array()) {
      for (const json& entry : body["storage-credentials"]) {
        if (!entry.is_object() || !entry.contains("prefix") ||
            !entry["prefix"].is_string() || !entry.contains("config")) {
          continue;
        }
        auto scope = ScopeToTable(entry["prefix"].get<std::string>(), location);
        auto credential = CredentialFromProperties(properties(entry["config"]));
        if (scope && credential)
          vended.Put(*scope, std::move(*credential), this, refresh);
      }
    }
    if (body.contains("config")) {
      if (auto credential = CredentialFromProperties(properties(body["config"]))) {
        vended.Put(location, std::move(*credential), this, refresh);
      }
    }
  }

  // The OAuth2 token to send (empty without client credentials), fetched anew when
  // due or when `force`d.
  arrow::Result<std::string> Bearer(bool force) {
    if (!token_client_) return std::string();
    std::lock_guard lock(token_mutex_);
    if (force || Clock::now() >= refresh_at_) ARROW_RETURN_NOT_OK(FetchToken());
    return bearer_;
  }

  // A connection of the pool (one request at a time each): requests on several
  // threads (tables committing at once) run in parallel.
  std::unique_ptr<httplib::Client> Acquire() {
    {
      std::lock_guard lock(pool_mutex_);
      if (!idle_.empty()) {
        auto client = std::move(idle_.back());
        idle_.pop_back();
        return client;
      }
    }
    return MakeClient(base_.scheme_host_port);
  }
  void Release(std::unique_ptr<httplib::Client> client) {
    std::lock_guard lock(pool_mutex_);
    if (idle_.size() < 16) idle_.push_back(std::move(client));
  }

  // One request. `idempotent` ones are repeated on a connection failure, 429 or
  // 5xx. A connection failure of the last attempt is an IOError; any answer is
  // returned for the caller to read.
  arrow::Result<HttpResponse> Send(const std::string& method, const std::string& path,
                                   const json* body, bool idempotent) {
    bool reauthorized = false;
    for (int attempt = 1;; ++attempt) {
      ARROW_ASSIGN_OR_RAISE(const std::string bearer, Bearer(false));
      httplib::Request request;
      request.method = method;
      request.path = path;
      request.headers = Headers(bearer);
      if (body != nullptr) {
        request.body = body->dump();
        request.headers.emplace("Content-Type", "application/json");
      }
      std::unique_ptr<httplib::Client> client = Acquire();
      auto result = client->send(request);
      // A connection that failed is not reused.
      if (result) Release(std::move(client));
      if (!result) {
        if (idempotent && attempt < options_.max_attempts) {
          Backoff(attempt);
          continue;
        }
        return arrow::Status::IOError("REST catalog ", name_, ": ", method, " ", path,
                                      ": ", TransportError(result.error()));
      }
      HttpResponse response{result->status, std::move(result->body)};
      if (response.status == 401 && token_client_ && !reauthorized) {
        // The token may have been revoked or expired early: one new one.
        reauthorized = true;
        ARROW_RETURN_NOT_OK(Bearer(true).status());
        --attempt;
        continue;
      }
      if (idempotent && Retryable(response.status) && attempt < options_.max_attempts) {
        Backoff(attempt);
        continue;
      }
      return response;
    }
  }

  // Every page of a paged list (`next-page-token`).
  arrow::Status Paged(const std::string& path, const std::string& query,
                      const std::string& what,
                      const std::function<arrow::Status(const json&)>& page,
                      CatalogErrorKind not_found) {
    std::string token;
    for (int pages = 0; pages < 1'000'000; ++pages) {
      std::string url = path;
      std::string q = query;
      if (!token.empty()) q += (q.empty() ? "" : "&") + ("pageToken=" + UrlEscape(token));
      if (!q.empty()) url += "?" + q;
      ARROW_ASSIGN_OR_RAISE(HttpResponse r, Send("GET", url, nullptr, true));
      if (r.status == 404) {
        return CatalogError(not_found, what + ": " + ParseServerError(r).message);
      }
      if (r.status != 200) return Failure(what, r);
      ARROW_ASSIGN_OR_RAISE(json body, ParseBody(r, what));
      ARROW_RETURN_NOT_OK(page(body));
      if (!body.contains("next-page-token") || !body["next-page-token"].is_string()) {
        return arrow::Status::OK();
      }
      std::string next = body["next-page-token"].get<std::string>();
      if (next.empty() || next == token) return arrow::Status::OK();
      token = std::move(next);
    }
    return arrow::Status::IOError("REST catalog ", name_, ": ", what,
                                  ": the server keeps sending pages");
  }

  arrow::Result<json> ParseBody(const HttpResponse& r, const std::string& what) const {
    json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
      return arrow::Status::IOError("REST catalog ", name_, ": ", what,
                                    ": the answer is not a JSON object");
    }
    return body;
  }

  std::string Describe(const std::string& what, const HttpResponse& r) const {
    const ServerError e = ParseServerError(r);
    std::string out =
        "REST catalog " + name_ + ": " + what + ": HTTP " + std::to_string(r.status);
    if (!e.type.empty()) out += " " + e.type;
    if (!e.message.empty()) out += ": " + e.message;
    return out;
  }

  arrow::Status Failure(const std::string& what, const HttpResponse& r) const {
    std::string message = Describe(what, r);
    if (r.status == 401 || r.status == 403) {
      message += " (check " + options_.setting + ".token, or " + options_.setting +
                 ".client_id and client_secret)";
      return arrow::Status::IOError(message);
    }
    if (r.status == 400 || r.status == 422) return arrow::Status::Invalid(message);
    return arrow::Status::IOError(message);
  }

  arrow::Status NotFound(CatalogErrorKind kind, const Namespace& ns,
                         const HttpResponse& r) const {
    return CatalogError(kind, "namespace " + NamespaceToString(ns) + " does not exist (" +
                                  ParseServerError(r).message + ")");
  }

  arrow::Status NotFoundTable(const TableIdentifier& id, const HttpResponse& r) const {
    const ServerError e = ParseServerError(r);
    const auto kind = e.type == "NoSuchNamespaceException"
                          ? CatalogErrorKind::kNoSuchNamespace
                          : CatalogErrorKind::kNoSuchTable;
    return CatalogError(kind,
                        "table " + id.ToString() + " does not exist (" + e.message + ")");
  }

  const std::string name_;
  const RestCatalogOptions options_;
  const BaseUri base_;
  std::string prefix_;
  /// New tables by createTable, not register (Initialize).
  bool create_tables_ = false;
  std::string v1_;
  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<httplib::Client>> idle_;
  // Guards the token and its client.
  std::mutex token_mutex_;
  BaseUri token_base_;
  std::unique_ptr<httplib::Client> token_client_;
  std::string bearer_;
  Clock::time_point refresh_at_;
};

}  // namespace

arrow::Result<std::unique_ptr<Catalog>> OpenRestCatalog(std::string name,
                                                        RestCatalogOptions options) {
  if (!options.token.empty() && !options.client_id.empty()) {
    return arrow::Status::Invalid("REST catalog ", name,
                                  ": give a token or client credentials, not both");
  }
  ARROW_ASSIGN_OR_RAISE(BaseUri base,
                        SplitUri(options.uri, (options.setting + ".uri").c_str()));
  auto catalog =
      std::make_unique<RestCatalog>(std::move(name), std::move(options), std::move(base));
  ARROW_RETURN_NOT_OK(catalog->Initialize());
  return catalog;
}

}  // namespace floe::iceberg
