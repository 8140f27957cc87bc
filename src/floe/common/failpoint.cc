#include "floe/common/failpoint.h"

#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

namespace floe {
namespace {

struct Point {
  long at = 1;        // fires at this hit
  long sleep_ms = -1;  // -1: kill (or `action`)
  std::string action;  // neither kill nor sleep: for the place to act out
  long hits = 0;
};

struct Points {
  std::mutex mu;
  std::map<std::string, Point, std::less<>> points;
};

// Parsed once; null when FLOE_FAILPOINT is unset or empty.
Points* Configured() {
  static Points* points = []() -> Points* {
    const char* spec = std::getenv("FLOE_FAILPOINT");
    if (spec == nullptr || *spec == '\0') return nullptr;
    auto* out = new Points;
    std::string_view rest(spec);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view entry = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      Point p;
      if (const size_t eq = entry.find('='); eq != std::string_view::npos) {
        const std::string_view action = entry.substr(eq + 1);
        entry = entry.substr(0, eq);
        if (action.starts_with("sleep:")) {
          p.sleep_ms = std::strtol(std::string(action.substr(6)).c_str(), nullptr, 10);
        } else if (action != "kill") {
          p.action = std::string(action);
        }
      }
      if (const size_t at = entry.find('@'); at != std::string_view::npos) {
        p.at = std::strtol(std::string(entry.substr(at + 1)).c_str(), nullptr, 10);
        entry = entry.substr(0, at);
      }
      if (!entry.empty()) out->points[std::string(entry)] = p;
    }
    spdlog::warn("failpoints set (FLOE_FAILPOINT): {}", spec);
    return out;
  }();
  return points;
}

}  // namespace

std::string FailpointAction(std::string_view name) {
  Points* points = Configured();
  if (points == nullptr) return {};
  Point fired;
  {
    std::lock_guard lock(points->mu);
    auto it = points->points.find(name);
    if (it == points->points.end() || ++it->second.hits != it->second.at) return {};
    fired = it->second;
  }
  if (!fired.action.empty()) {
    spdlog::warn("failpoint {} (hit {}): {}", name, fired.hits, fired.action);
    spdlog::default_logger()->flush();
    return fired.action;
  }
  if (fired.sleep_ms >= 0) {
    spdlog::warn("failpoint {} (hit {}): sleeping {} ms", name, fired.hits,
                 fired.sleep_ms);
    spdlog::default_logger()->flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(fired.sleep_ms));
    return {};
  }
  spdlog::warn("failpoint {} (hit {}): killing the process", name, fired.hits);
  spdlog::default_logger()->flush();
  std::raise(SIGKILL);
  return {};
}

void Failpoint(std::string_view name) { FailpointAction(name); }

}  // namespace floe
