#include "floe/config/reader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace floe::config {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min(
          {prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

// "100ms", "1s", "4h": a whole number of the largest unit that divides `ms`.
std::string FormatMillis(int64_t ms) {
  constexpr std::pair<int64_t, const char*> kUnits[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1'000, "s"}};
  for (const auto& [unit, name] : kUnits) {
    if (ms > 0 && ms % unit == 0) return std::to_string(ms / unit) + name;
  }
  return std::to_string(ms) + "ms";
}

// "1MiB", "256MiB", "1GiB": likewise for sizes.
std::string FormatBytes(int64_t bytes) {
  constexpr std::pair<int64_t, const char*> kUnits[] = {
      {int64_t{1} << 30, "GiB"}, {int64_t{1} << 20, "MiB"}, {int64_t{1} << 10, "KiB"}};
  for (const auto& [unit, name] : kUnits) {
    if (bytes > 0 && bytes % unit == 0) return std::to_string(bytes / unit) + name;
  }
  return std::to_string(bytes) + "B";
}

}  // namespace

void Reader::Error(const YAML::Node& at, std::string message, std::string hint) {
  YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
  errors_.push_back({mark.line >= 0 ? mark.line + 1 : 0,
                     mark.column >= 0 ? mark.column + 1 : 0, std::move(message),
                     std::move(hint)});
}

bool Reader::CheckKeys(const YAML::Node& map, const std::string& where,
                       const std::vector<std::string>& allowed) {
  if (!map.IsMap()) {
    Error(map, "`" + where + "` must be a mapping of keys to values",
          "write it as `" + where + ":` followed by indented `key: value` lines");
    return false;
  }
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.as<std::string>("");
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string best;
    size_t best_distance = 3;
    for (const auto& candidate : allowed) {
      size_t d = EditDistance(key, candidate);
      if (d < best_distance) {
        best_distance = d;
        best = candidate;
      }
    }
    std::string where_text = where.empty() ? "at the top level" : "in `" + where + "`";
    Error(it->first, "unknown key `" + key + "` " + where_text,
          best.empty() ? "known keys: " + Join(allowed, ", ")
                       : "did you mean `" + best + "`?");
  }
  return true;
}

std::optional<std::string> Reader::String(const YAML::Node& node, const std::string& what,
                                          bool secret) {
  if (!node.IsScalar()) {
    Error(node, "`" + what + "` must be a single value, not a list or mapping");
    return std::nullopt;
  }
  const std::string raw = node.Scalar();
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '$') {
      out += raw[i];
      continue;
    }
    if (i + 1 < raw.size() && raw[i + 1] == '$') {  // "$$" is a literal '$'
      out += '$';
      ++i;
      continue;
    }
    if (i + 1 >= raw.size() || raw[i + 1] != '{') {
      out += '$';
      continue;
    }
    size_t close = raw.find('}', i + 2);
    std::string name =
        close == std::string::npos ? "" : raw.substr(i + 2, close - (i + 2));
    bool valid = !name.empty() &&
                 (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name) {
      valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    }
    if (!valid) {
      Error(node, "`" + what + "` has a malformed ${...} reference",
            "write ${NAME} with NAME made of letters, digits and _ (and $$ for a "
            "literal $)");
      return std::nullopt;
    }
    std::optional<std::string> value = env_(name);
    if (!value) {
      Error(
          node, "`" + what + "` uses environment variable " + name + ", which is not set",
          "export " + name + " before starting floe" +
              (secret ? ", or keep the whole value in a file and use `" + what + "_file`"
                      : ""));
      return std::nullopt;
    }
    out += *value;
    i = close;
  }
  return out;
}

std::optional<std::string> Reader::ReadSecretFile(const YAML::Node& node,
                                                  const std::string& what) {
  auto path = String(node, what);
  if (!path) return std::nullopt;
  std::ifstream in(Resolve(*path));
  if (!in) {
    Error(node, "cannot read `" + what + "` file " + Resolve(*path),
          "check that the file exists and that floe's user may read it");
    return std::nullopt;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.pop_back();
  }
  if (text.empty()) {
    Error(node, "`" + what + "` file " + Resolve(*path) + " is empty");
    return std::nullopt;
  }
  return text;
}

std::optional<std::string> Reader::Secret(const YAML::Node& parent,
                                          const std::string& key,
                                          const std::string& where, bool required) {
  const YAML::Node inline_value = parent[key];
  const YAML::Node file_value = parent[key + "_file"];
  if (inline_value && file_value) {
    Error(file_value, "`" + where + "` has both `" + key + "` and `" + key + "_file`",
          "keep one of them");
    return std::nullopt;
  }
  if (inline_value) return String(inline_value, key, /*secret=*/true);
  if (file_value) return ReadSecretFile(file_value, key + "_file");
  if (required) {
    Error(parent, "`" + where + "` needs `" + key + "` (or `" + key + "_file`)",
          key == "conninfo"
              ? "for example: conninfo: \"host=db.internal dbname=shop user=floe "
                "password=${FLOE_PGPASSWORD}\""
              : "");
  }
  return std::nullopt;
}

std::optional<int64_t> Reader::Integer(const YAML::Node& node, const keys::Key& key) {
  int64_t n = 0;
  if (node.IsScalar() && YAML::convert<int64_t>::decode(node, n) && n >= key.min &&
      n <= key.max) {
    return n;
  }
  Error(node,
        "`" + std::string(key.path) + "` must be a whole number from " +
            std::to_string(key.min) + " to " + std::to_string(key.max),
        std::string(key.hint));
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> Reader::Duration(const YAML::Node& node,
                                                          const keys::Key& key) {
  auto s = String(node, std::string(keys::Leaf(key)));
  if (!s) return std::nullopt;
  auto d = ParseDuration(*s);
  if (d && d->count() >= key.min) return d;
  Error(node,
        d ? "`" + std::string(key.path) + "` must be a duration of at least " +
                FormatMillis(key.min) + ", not " + *s
          : "`" + std::string(key.path) + "`: `" + *s +
                "` is not a duration (a whole number with ms, s, m, h or d, e.g. 30s)",
        std::string(key.hint));
  return std::nullopt;
}

std::optional<int64_t> Reader::ByteSize(const YAML::Node& node, const keys::Key& key) {
  auto s = String(node, std::string(keys::Leaf(key)));
  if (!s) return std::nullopt;
  auto b = ParseByteSize(*s);
  if (b && *b >= key.min) return b;
  Error(node,
        b ? "`" + std::string(key.path) + "` must be a size of at least " +
                FormatBytes(key.min) + ", not " + *s
          : "`" + std::string(key.path) + "`: `" + *s +
                "` is not a size (a whole number of bytes, or with KiB, MiB, GiB, KB, "
                "MB or GB, e.g. 512MiB)",
        std::string(key.hint));
  return std::nullopt;
}

std::optional<std::string> Reader::Choice(const YAML::Node& node, const keys::Key& key) {
  auto s = String(node, std::string(keys::Leaf(key)));
  if (!s) return std::nullopt;
  std::vector<std::string> choices;
  for (size_t start = 0;;) {
    const size_t bar = key.choices.find('|', start);
    choices.emplace_back(key.choices.substr(start, bar - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  if (std::find(choices.begin(), choices.end(), *s) != choices.end()) return s;
  const std::string last = choices.back();
  choices.pop_back();
  Error(node,
        "`" + std::string(key.path) + "` must be " + Join(choices, ", ") + " or " + last +
            ", not `" + *s + "`",
        std::string(key.hint));
  return std::nullopt;
}

bool Reader::CheckDeclaredKeys(const YAML::Node& map, const std::string& section) {
  return CheckKeys(map, section, keys::KeysOf(section));
}

std::string Reader::Resolve(const std::string& path) const {
  if (path.empty()) return path;
  // Normal form (no `//`, `.` or `..`, no trailing `/`): two spellings of one path
  // compare equal (catalogs and warehouses are checked apart by their paths).
  std::string out = (path[0] == '/' ? std::filesystem::path(path)
                                    : std::filesystem::path(base_dir_) / path)
                        .lexically_normal()
                        .string();
  while (out.size() > 1 && out.ends_with('/')) out.pop_back();
  return out;
}

}  // namespace floe::config
