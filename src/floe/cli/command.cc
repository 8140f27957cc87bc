#include "floe/cli/command.h"

#include "floe/iceberg/file_io.h"

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "floe/ops/status.h"

namespace floe::cli {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnStopSignal(int) { g_stop.store(true); }

// `%*` in a log pattern: the message as a JSON string (quoted and escaped by
// nlohmann::json), for --json-logs.
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string text =
        nlohmann::json(std::string(msg.payload.data(), msg.payload.size()))
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

// `%&` in a log pattern: the message with control characters other than newline and
// tab written as \xNN. Names and values from the source reach messages; a terminal
// escape sequence or a carriage return in one must not rewrite what an operator sees.
class TextMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (const char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) {
        const char escaped[4] = {'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
        dest.append(escaped, escaped + 4);
      } else {
        dest.push_back(c);
      }
    }
  }
  std::unique_ptr<spdlog::custom_flag_formatter> clone() const override {
    return std::make_unique<TextMessageFlag>();
  }
};

}  // namespace

CLI::Option* AddFileArgument(CLI::App* command, std::string* file) {
  return command->add_option("FILE", *file, "pipeline YAML file")->required();
}

CLI::Option* AddJsonLogsFlag(CLI::App* command, bool* json_logs) {
  return command->add_flag("--json-logs", *json_logs, "log one JSON object per line");
}

std::optional<config::PipelineConfig> LoadConfig(const std::string& file,
                                                 std::string_view outcome) {
  config::ParseResult result = config::LoadPipelineConfig(file);
  if (result.errors.empty()) return std::move(*result.config);
  for (const auto& error : result.errors) std::cerr << error.Format(file) << "\n";
  std::cerr << file << ": " << outcome << " (" << result.errors.size()
            << (result.errors.size() == 1 ? " error" : " errors") << "; floe validate "
            << file << " lists them)\n";
  return std::nullopt;
}

void SetUpLogging(bool json) {
  auto logger = spdlog::stderr_logger_mt("floe");
  auto formatter =
      std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  if (json) {
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":%*})");
  } else {
    formatter->add_flag<TextMessageFlag>('&').set_pattern(
        "%Y-%m-%dT%H:%M:%S.%eZ %-5l %&");
  }
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  spdlog::flush_on(spdlog::level::info);
}

void UseSystemAllocator() { ::setenv("ARROW_DEFAULT_MEMORY_POOL", "system", 0); }

std::atomic<bool>* InstallStopSignals() {
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGPIPE, SIG_IGN);
  iceberg::StopObjectStoreRetries(&g_stop);
  return &g_stop;
}

std::string RedactSecrets(const config::PipelineConfig& config, const std::string& text) {
  std::string out = ops::RedactConninfoSecrets(text, config.source.conninfo);
  // Secrets that are not in a conninfo, wherever a message quotes them.
  std::vector<std::string> secrets = {config.s3.secret_access_key,
                                      config.s3.session_token};
  std::vector<const config::CatalogConfig*> catalogs = {&config.catalog};
  for (const auto& named : config.catalogs) catalogs.push_back(&named.catalog);
  for (const config::CatalogConfig* catalog : catalogs) {
    if (catalog->type == config::CatalogType::kPostgres) {
      out = ops::RedactConninfoSecrets(out, catalog->uri);
    }
    secrets.push_back(catalog->rest.token);
    secrets.push_back(catalog->rest.client_secret);
    for (const auto& [name, value] : catalog->rest.headers) secrets.push_back(value);
  }
  for (const std::string& secret : secrets) {
    if (secret.size() < 4) continue;  // too short to tell from ordinary text
    for (size_t at = out.find(secret); at != std::string::npos;
         at = out.find(secret, at + 10)) {
      out.replace(at, secret.size(), "<redacted>");
    }
  }
  return out;
}

CLI::Validator SchemaTable() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (config::ParseQualifiedName(value)) return "";
        return value + " is not schema.table (e.g. public.orders; quote odd names: " +
               "\"My Schema\".\"my.table\")";
      },
      "schema.table", "SchemaTable");
}

CLI::Validator Duration(std::chrono::milliseconds min, std::string_view min_reason,
                        bool allow_empty) {
  return CLI::Validator(
      [min, reason = std::string(min_reason),
       allow_empty](std::string& value) -> std::string {
        if (value.empty() && allow_empty) return "";
        auto parsed = config::ParseDuration(value);
        if (!parsed || parsed->count() < 0) {
          return value + " is not a duration (write e.g. 30s, 10m, 4h, 30d)";
        }
        if (*parsed < min) return value + " is too short: " + reason;
        return "";
      },
      "DURATION", "Duration");
}

std::chrono::milliseconds DurationOf(const std::string& text) {
  return config::ParseDuration(text).value_or(std::chrono::milliseconds(0));
}

}  // namespace floe::cli
