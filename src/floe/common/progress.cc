#include "floe/common/progress.h"

#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

namespace floe {

namespace {

std::string Seconds(double s) {
  const auto whole = static_cast<int64_t>(s + 0.5);
  if (whole < 120) return std::to_string(whole) + "s";
  if (whole < 7200) return std::to_string(whole / 60) + "m" + std::to_string(whole % 60) + "s";
  return std::to_string(whole / 3600) + "h" + std::to_string(whole % 3600 / 60) + "m";
}

}  // namespace

std::string ProgressBar(double fraction) {
  constexpr int kBarWidth = 20;
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * kBarWidth);
  return "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "]";
}

std::string FormatProgress(const ProgressSample& s, bool bar) {
  const bool known = s.total > 0;
  const double fraction =
      known ? std::clamp(static_cast<double>(s.done) / static_cast<double>(s.total), 0.0,
                         1.0)
            : 0.0;
  const bool complete = s.finished && !s.failed;
  std::string line = s.label + ": ";
  if (bar && known) line += ProgressBar(complete ? 1.0 : fraction) + " ";
  line += std::to_string(s.done);
  if (known) line += "/" + std::to_string(std::max(s.total, s.done));
  line += " " + s.unit;
  if (known) {
    const int pct = complete ? 100 : std::min(99, static_cast<int>(fraction * 100));
    line += " (" + std::to_string(pct) + "%)";
  }
  if (!s.detail.empty()) line += ", " + s.detail;
  const double seconds = std::chrono::duration<double>(s.elapsed).count();
  if (seconds > 0 && s.done > 0) {
    line += ", " + std::to_string(static_cast<int64_t>(s.done / seconds)) + " " + s.unit +
            "/s";
  }
  if (s.failed) {
    line += ", failed after " + Seconds(seconds);
  } else if (s.finished) {
    line += ", done in " + Seconds(seconds);
  } else if (known && s.done > 0 && fraction < 1) {
    line += ", ETA " + Seconds(seconds * (1 - fraction) / fraction);
  }
  return line;
}

ProgressReporter::ProgressReporter(std::string label, std::string unit, FILE* terminal,
                                   Options options)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      terminal_(terminal),
      tty_(terminal != nullptr && isatty(fileno(terminal))),
      options_(options),
      start_(std::chrono::steady_clock::now()) {
  thread_ = std::thread([this] {
    const auto interval = tty_ ? options_.tty_interval : options_.log_interval;
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, interval, [this] { return finishing_; })) {
      lock.unlock();
      Report(/*last=*/false);
      lock.lock();
    }
  });
}

ProgressReporter::~ProgressReporter() { Finish(); }

void ProgressReporter::SetDetail(std::string detail) {
  std::lock_guard lock(mu_);
  detail_ = std::move(detail);
}

ProgressSample ProgressReporter::Sample() const {
  ProgressSample s;
  s.label = label_;
  s.unit = unit_;
  s.done = done_.load(std::memory_order_relaxed);
  s.total = total_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    s.detail = detail_;
  }
  s.elapsed = std::chrono::steady_clock::now() - start_;
  return s;
}

void ProgressReporter::Report(bool last) {
  ProgressSample s = Sample();
  s.finished = last;
  s.failed = last && failed_;
  if (tty_) {
    std::fprintf(terminal_, "\r%s\x1b[K%s", FormatProgress(s, true).c_str(),
                 last ? "\n" : "");
    std::fflush(terminal_);
  } else if (!last || options_.log_final) {
    spdlog::info("{}", FormatProgress(s, false));
  }
}

void ProgressReporter::Finish() { Stop(/*failed=*/false); }

void ProgressReporter::Fail() { Stop(/*failed=*/true); }

void ProgressReporter::Stop(bool failed) {
  {
    std::lock_guard lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    failed_ = failed;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Report(/*last=*/true);
}

}  // namespace floe
