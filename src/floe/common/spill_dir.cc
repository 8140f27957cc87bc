#include "floe/common/spill_dir.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include <arrow/status.h>
#include <spdlog/spdlog.h>

namespace floe {

namespace fs = std::filesystem;

namespace {
constexpr const char* kPrefix = "floe-spill-";

// Whether process `pid` is gone: no such process, or a zombie (killed, and its parent
// has not reaped it yet: a shell that started it in the background, a supervisor
// between two checks). A process of another user counts as alive.
bool Gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "<pid> (<command, which may hold spaces and parentheses>) <state> ..."
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}
}  // namespace

SpillDirectory::~SpillDirectory() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

arrow::Result<std::unique_ptr<SpillDirectory>> SpillDirectory::Make(
    const fs::path& parent, const std::string& work) {
  std::error_code ec;
  fs::path base = parent.empty() ? fs::temp_directory_path(ec) : parent;
  if (ec) base = "/tmp";
  fs::create_directories(base, ec);
  RemoveStale(base);
  std::string templ =
      (base / (kPrefix + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return arrow::Status::IOError("cannot make a spill directory under ", base.string(),
                                  " for ", work, ": ", std::strerror(errno),
                                  "; set silver.spill_dir to a writable local directory");
  }
  auto dir = std::unique_ptr<SpillDirectory>(new SpillDirectory());
  dir->path_ = templ;
  return dir;
}

void SpillDirectory::RemoveStale(const fs::path& base) {
  std::error_code ec;
  const std::string prefix = kPrefix;
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code is_dir;
    if (name.rfind(prefix, 0) != 0 || !it->is_directory(is_dir)) continue;
    const size_t dash = name.find('-', prefix.size());
    if (dash == std::string::npos || dash == prefix.size()) continue;
    const std::string pid_text = name.substr(prefix.size(), dash - prefix.size());
    if (pid_text.size() > 9 ||
        pid_text.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const auto pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid <= 0 || !Gone(pid)) continue;
    std::error_code removed;
    fs::remove_all(it->path(), removed);
    if (!removed) spdlog::info("removed {}, left by a process that was killed", name);
  }
}

}  // namespace floe
