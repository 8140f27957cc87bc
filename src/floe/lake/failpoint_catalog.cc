#include "floe/lake/failpoint_catalog.h"

#include <cstdlib>
#include <string>

#include "floe/common/failpoint.h"

namespace floe::lake {
namespace {

namespace ice = floe::iceberg;

/// Runs `call` as the failpoint `name` says (see WithCatalogFailpoints).
template <typename Call>
arrow::Status ActOut(std::string_view name, Call&& call) {
  const std::string action = FailpointAction(name);
  const std::string what = "failpoint " + std::string(name) + "=" + action;
  if (action == "error") return arrow::Status::IOError(what, ": nothing applied");
  if (action == "unknown") {
    return ice::CatalogError(ice::CatalogErrorKind::kCommitStateUnknown,
                             what + ": nothing applied");
  }
  arrow::Status st = call();
  if (action == "lost" && st.ok()) {
    return ice::CatalogError(ice::CatalogErrorKind::kCommitStateUnknown,
                             what + ": applied, the reply lost");
  }
  return st;
}

class FailpointCatalog : public ice::ForwardingCatalog {
 public:
  using ForwardingCatalog::ForwardingCatalog;

  arrow::Status UpdateNamespaceProperties(
      const ice::Namespace& ns, const std::map<std::string, std::string>& updates,
      const std::vector<std::string>& removals) override {
    return ActOut("catalog.namespace-update", [&] {
      return inner().UpdateNamespaceProperties(ns, updates, removals);
    });
  }
  arrow::Status CommitTable(const ice::TableIdentifier& id, const std::string& expected,
                            const std::string& next) override {
    return ActOut("catalog.commit",
                  [&] { return inner().CommitTable(id, expected, next); });
  }
  arrow::Result<Committed> CommitChanges(const ice::TableIdentifier& id,
                                         const ice::TableMetadata& base,
                                         const ice::TableMetadata& next) override {
    Committed committed;
    ARROW_RETURN_NOT_OK(ActOut("catalog.commit", [&]() -> arrow::Status {
      ARROW_ASSIGN_OR_RAISE(committed, inner().CommitChanges(id, base, next));
      return arrow::Status::OK();
    }));
    return committed;
  }
};

}  // namespace

std::unique_ptr<ice::Catalog> WithCatalogFailpoints(std::unique_ptr<ice::Catalog> inner) {
  const char* spec = std::getenv("FLOE_FAILPOINT");
  if (spec == nullptr || *spec == '\0') return inner;
  return std::make_unique<FailpointCatalog>(std::move(inner));
}

}  // namespace floe::lake
