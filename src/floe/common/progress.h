// Progress of long operations (Silver passes, backfills): a bar with rate and ETA
// redrawn on a terminal, and a log line every so often otherwise (so that logs,
// JSON logs included, carry it without a terminal's carriage returns).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace floe {

/// One reading of a ProgressReporter.
struct ProgressSample {
  std::string label;
  std::string unit;
  int64_t done = 0;
  /// <= 0: not known (no percentage, bar or ETA).
  int64_t total = 0;
  /// Free text after the counts, e.g. "3/12 tables".
  std::string detail;
  std::chrono::steady_clock::duration elapsed{};
  bool finished = false;
  /// Finished by failing: the percentage is as far as it got, not 100.
  bool failed = false;
};

/// `[#######.............]`: `fraction` (clamped to 0..1) of 20 characters.
std::string ProgressBar(double fraction);

/// `silver: [#######.............] 3500/10000 rows (35%), 3/12 tables, 700 rows/s,
/// ETA 9s` (the bar only when `bar`; percentage, bar and ETA only when the total is
/// known; the percentage stays below 100 until finished; rate once anything is done;
/// `done in 14s` once finished, `failed after 14s` once failed).
std::string FormatProgress(const ProgressSample& sample, bool bar);

class ProgressReporter {
 public:
  struct Options {
    /// A terminal: the bar is redrawn in place this often.
    std::chrono::milliseconds tty_interval{500};
    /// Not a terminal (or no stream): spdlog::info every this often.
    std::chrono::milliseconds log_interval{10'000};
    /// Whether Finish logs a last line when not on a terminal.
    bool log_final = true;
  };

  /// Reports to `terminal` when it is a tty (e.g. stderr), else through spdlog;
  /// `terminal` null: through spdlog only. Starts the reporting thread.
  ProgressReporter(std::string label, std::string unit, FILE* terminal,
                   Options options);
  ProgressReporter(std::string label, std::string unit, FILE* terminal)
      : ProgressReporter(std::move(label), std::move(unit), terminal, Options{}) {}
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  void Add(int64_t n) { done_.fetch_add(n, std::memory_order_relaxed); }
  void AddTotal(int64_t n) { total_.fetch_add(n, std::memory_order_relaxed); }
  void SetTotal(int64_t n) { total_.store(n, std::memory_order_relaxed); }
  void SetDetail(std::string detail);

  ProgressSample Sample() const;
  /// Stops the thread after a last report. Idempotent; the destructor calls it.
  void Finish();
  /// Finish, the last report saying that the operation failed.
  void Fail();

 private:
  void Report(bool last);
  void Stop(bool failed);

  const std::string label_, unit_;
  FILE* const terminal_;
  const bool tty_;
  const Options options_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> done_{0}, total_{0};
  mutable std::mutex mu_;
  std::string detail_;
  std::condition_variable cv_;
  bool finishing_ = false;
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

}  // namespace floe
