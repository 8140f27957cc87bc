#include "floe/metrics/http_server.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include <httplib.h>

namespace floe::metrics {

namespace {

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kTextContentType = "text/plain; charset=utf-8";

}  // namespace

arrow::Result<ListenAddress> ParseListenAddress(std::string_view address) {
  auto invalid = [&](std::string_view why) {
    return arrow::Status::Invalid("metrics.listen: '", address, "' ", why,
                                  "; expected host:port such as ", kDefaultListenAddress,
                                  " or [::1]:9464");
  };
  ListenAddress out;
  std::string_view port_text;
  if (address.starts_with('[')) {
    size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return invalid("is not [IPv6 address]:port");
    }
    out.host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return invalid("has no port");
    out.host = std::string(address.substr(0, colon));
    // A bare IPv6 literal would be ambiguous (`::1:9464`): brackets are required.
    if (out.host.find(':') != std::string::npos) {
      return invalid("has an IPv6 address without brackets");
    }
    port_text = address.substr(colon + 1);
  }
  if (out.host.empty()) return invalid("has no host (use 0.0.0.0 for every interface)");
  auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), out.port);
  if (port_text.empty() || ec != std::errc() ||
      end != port_text.data() + port_text.size() || out.port < 0 || out.port > 65535) {
    return invalid("has no valid port (0-65535)");
  }
  return out;
}

MetricsServer::MetricsServer() = default;

MetricsServer::~MetricsServer() { Stop(); }

arrow::Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    std::string_view listen_address, const Registry& registry, ReadyCheck ready_check) {
  ARROW_ASSIGN_OR_RAISE(ListenAddress address, ParseListenAddress(listen_address));

  std::unique_ptr<MetricsServer> self(new MetricsServer());
  self->server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *self->server_;
  // Scrapes and probes are rare and cheap; the library's default pool (at least 8
  // threads) would be wasted on a process whose cores belong to replication.
  s.new_task_queue = [] { return new httplib::ThreadPool(2); };

  // The library's default sets SO_REUSEPORT, which lets a second floe bind the same
  // port and silently share the scrapes with the first. SO_REUSEADDR alone still
  // allows a restart while old connections linger in TIME_WAIT.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });

  const Registry* reg = &registry;
  s.Get("/metrics", [reg](const httplib::Request&, httplib::Response& res) {
    res.set_content(reg->Render(), kMetricsContentType);
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", kTextContentType);
  });
  s.Get("/readyz", [check = std::move(ready_check)](const httplib::Request&,
                                                    httplib::Response& res) {
    std::optional<std::string> not_ready = check ? check() : std::nullopt;
    if (!not_ready) {
      res.set_content("ready", kTextContentType);
    } else {
      res.status = 503;
      res.set_content(not_ready->empty() ? "not ready" : *not_ready, kTextContentType);
    }
  });
  // Unrouted paths get a body, so a typo in a scrape config is obvious in curl.
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) res.set_content("not found", kTextContentType);
  });

  errno = 0;
  if (address.port == 0) {
    int port = s.bind_to_any_port(address.host);
    if (port > 0) address.port = port;
  } else if (!s.bind_to_port(address.host, address.port)) {
    address.port = -1;
  }
  if (address.port <= 0) {
    int err = errno;
    return arrow::Status::IOError(
        "cannot listen for metrics on ", listen_address, " (",
        err != 0 ? std::strerror(err) : "address unavailable or host not resolvable",
        "); set metrics.listen in the pipeline config to a free host:port "
        "(default ",
        kDefaultListenAddress, "; port 0 picks any free port)");
  }
  self->host_ = address.host;
  self->port_ = address.port;
  // The socket is bound and listening already, so connections made from here on
  // queue until the thread accepts them.
  self->thread_ = std::thread([&s, done = &self->listen_returned_] {
    s.listen_after_bind();
    *done = true;
  });
  // httplib's stop() does nothing until the accept loop has begun, so a Stop()
  // right after Start() would leave the thread serving forever; wait for the loop.
  while (!s.is_running() && !self->listen_returned_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return self;
}

void MetricsServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace floe::metrics
