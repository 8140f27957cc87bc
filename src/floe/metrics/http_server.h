// The HTTP endpoint of a floe process (cpp-httplib), on its own thread:
//
//   GET /metrics  200, `text/plain; version=0.0.4; charset=utf-8`, Registry::Render()
//   GET /healthz  200 `ok` as long as the process serves at all (liveness)
//   GET /readyz   200 `ready`, or 503 with the reason it is not (readiness)
//   anything else 404
//
// The listen address is the config key `metrics.listen`, default
// `127.0.0.1:9464` (loopback: metrics of a CDC pipeline name tables and are not
// for the whole network unless the operator says so).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <arrow/result.h>
#include <arrow/status.h>

#include "floe/metrics/registry.h"

namespace httplib {
class Server;
}

namespace floe::metrics {

inline constexpr std::string_view kDefaultListenAddress = "127.0.0.1:9464";

/// Returns why the process is not ready (served as the 503 body), or nullopt
/// when it is. Called on the server thread, once per /readyz request.
using ReadyCheck = std::function<std::optional<std::string>()>;

/// A parsed `host:port` (`[v6]:port` for IPv6 literals).
struct ListenAddress {
  std::string host;
  int port = 0;
};

/// Parses `host:port`; port 0 asks the kernel for a free port.
arrow::Result<ListenAddress> ParseListenAddress(std::string_view address);

class MetricsServer {
 public:
  /// Binds `listen_address` and starts serving on a thread of its own. The
  /// registry must outlive the server; a null `ready_check` means always ready.
  /// A bind failure is an IOError naming the address and the `metrics.listen`
  /// key that changes it.
  static arrow::Result<std::unique_ptr<MetricsServer>> Start(
      std::string_view listen_address, const Registry& registry,
      ReadyCheck ready_check = nullptr);

  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// Stops accepting, finishes the requests in flight and joins the thread.
  /// Idempotent.
  void Stop();

  /// The bound port (the kernel's choice when the address said port 0).
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  MetricsServer();

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_ = false;  // the accept loop failed or ended
  std::string host_;
  int port_ = 0;
};

}  // namespace floe::metrics
