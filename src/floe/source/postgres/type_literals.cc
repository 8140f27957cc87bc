// PostgreSQL's text literals of arrays, composites and ranges, split into their
// items (type_mapping.h).

#include "floe/source/postgres/type_mapping.h"

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

namespace floe::postgres {

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

arrow::Status BadLiteral(std::string_view what, std::string_view text, size_t pos) {
  return arrow::Status::Invalid("malformed ", what, " literal at offset ", pos, ": '",
                                text.substr(0, 200), "'");
}

class ArrayParser {
 public:
  ArrayParser(std::string_view text, char delimiter) : s_(text), delim_(delimiter) {}

  arrow::Result<ArrayLiteral> Parse() {
    ArrayLiteral out;
    SkipSpace();
    if (Peek() == '[') ARROW_RETURN_NOT_OK(ParseBounds(&out));
    SkipSpace();
    if (Peek() != '{') return Bad();
    // Dimension count = number of leading braces.
    size_t p = pos_;
    int dims = 0;
    while (p < s_.size() && (s_[p] == '{' || IsSpace(s_[p]))) {
      if (s_[p] == '{') ++dims;
      ++p;
    }
    std::vector<int32_t> lengths(dims, -1);
    ARROW_RETURN_NOT_OK(ParseLevel(0, dims, &lengths, &out.elements));
    SkipSpace();
    if (pos_ != s_.size()) return Bad();
    // `{}`: zero dimensions.
    if (dims == 1 && lengths[0] == 0) {
      dims = 0;
      lengths.clear();
    }
    if (!out.lower_bounds.empty() && static_cast<int>(out.lower_bounds.size()) != dims) {
      return Bad();
    }
    out.dimensions = dims;
    out.lengths = lengths;
    if (out.lower_bounds.empty()) out.lower_bounds.assign(dims, 1);
    if (!explicit_lengths_.empty() && explicit_lengths_ != out.lengths) return Bad();
    return out;
  }

 private:
  char Peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
  }
  arrow::Status Bad() const { return BadLiteral("array", s_, pos_); }

  bool ParseInt(int32_t* v) {
    const char* b = s_.data() + pos_;
    const char* e = s_.data() + s_.size();
    if (b < e && *b == '+') ++b;
    auto [ptr, ec] = std::from_chars(b, e, *v);
    if (ec != std::errc()) return false;
    pos_ = static_cast<size_t>(ptr - s_.data());
    return true;
  }

  // `[l:u][l:u]...=`
  arrow::Status ParseBounds(ArrayLiteral* out) {
    while (Peek() == '[') {
      ++pos_;
      int32_t lower = 1;
      int32_t upper = 0;
      if (!ParseInt(&lower)) return Bad();
      if (Peek() == ':') {
        ++pos_;
        if (!ParseInt(&upper)) return Bad();
      } else {
        upper = lower;
        lower = 1;
      }
      if (Peek() != ']' || upper < lower - 1) return Bad();
      ++pos_;
      out->lower_bounds.push_back(lower);
      explicit_lengths_.push_back(upper - lower + 1);
    }
    if (Peek() != '=') return Bad();
    ++pos_;
    return arrow::Status::OK();
  }

  arrow::Status ParseLevel(int level, int dims, std::vector<int32_t>* lengths,
                           std::vector<LiteralItem>* elements) {
    SkipSpace();
    if (Peek() != '{') return Bad();
    ++pos_;
    int32_t count = 0;
    SkipSpace();
    if (Peek() == '}') {
      ++pos_;
    } else {
      while (true) {
        SkipSpace();
        if (level + 1 < dims) {
          ARROW_RETURN_NOT_OK(ParseLevel(level + 1, dims, lengths, elements));
        } else {
          if (Peek() == '{') return Bad();
          ARROW_RETURN_NOT_OK(ParseElement(elements));
        }
        ++count;
        SkipSpace();
        if (Peek() == delim_) {
          ++pos_;
          continue;
        }
        if (Peek() == '}') {
          ++pos_;
          break;
        }
        return Bad();
      }
    }
    if ((*lengths)[level] == -1) {
      (*lengths)[level] = count;
    } else if ((*lengths)[level] != count) {
      return Bad();  // ragged
    }
    // An empty sub-array inside a multi-dimensional one is not valid Postgres output.
    if (count == 0 && dims > 1) return Bad();
    return arrow::Status::OK();
  }

  arrow::Status ParseElement(std::vector<LiteralItem>* elements) {
    LiteralItem item;
    if (Peek() == '"') {
      ++pos_;
      while (true) {
        if (pos_ >= s_.size()) return Bad();
        char c = s_[pos_++];
        if (c == '"') break;
        if (c == '\\') {
          if (pos_ >= s_.size()) return Bad();
          c = s_[pos_++];
        }
        item.text.push_back(c);
      }
    } else {
      const size_t start = pos_;
      bool escaped = false;
      size_t last_significant = 0;  // length of item.text up to the last escaped or
                                    // non-space character (trailing spaces trimmed)
      while (pos_ < s_.size()) {
        char c = s_[pos_];
        if (c == delim_ || c == '}') break;
        if (c == '{' || c == '"') return Bad();
        ++pos_;
        if (c == '\\') {
          if (pos_ >= s_.size()) return Bad();
          item.text.push_back(s_[pos_++]);
          escaped = true;
          last_significant = item.text.size();
          continue;
        }
        item.text.push_back(c);
        if (!IsSpace(c)) last_significant = item.text.size();
      }
      item.text.resize(last_significant);
      if (pos_ == start || (item.text.empty() && !escaped)) return Bad();
      if (!escaped && EqualsIgnoreCase(item.text, "NULL")) {
        item.is_null = true;
        item.text.clear();
      }
    }
    elements->push_back(std::move(item));
    return arrow::Status::OK();
  }

  std::string_view s_;
  char delim_;
  size_t pos_ = 0;
  std::vector<int32_t> explicit_lengths_;
};

// A composite field or range bound: quoted (with `""` and backslash escapes) or
// unquoted up to one of `stops`; empty and unquoted is null.
bool ParseRecordItem(std::string_view s, size_t* pos, std::string_view stops,
                     LiteralItem* item) {
  item->is_null = true;
  item->text.clear();
  bool any = false;
  bool in_quotes = false;
  while (*pos < s.size()) {
    const char c = s[*pos];
    if (!in_quotes && stops.find(c) != std::string_view::npos) break;
    ++*pos;
    any = true;
    if (c == '\\') {
      if (*pos >= s.size()) return false;
      item->text.push_back(s[(*pos)++]);
    } else if (c == '"') {
      if (!in_quotes) {
        in_quotes = true;
      } else if (*pos < s.size() && s[*pos] == '"') {
        item->text.push_back('"');
        ++*pos;
      } else {
        in_quotes = false;
      }
    } else {
      item->text.push_back(c);
    }
  }
  if (in_quotes) return false;
  item->is_null = !any;
  return true;
}

}  // namespace

arrow::Result<ArrayLiteral> ParseArrayLiteral(std::string_view text, char delimiter) {
  return ArrayParser(text, delimiter).Parse();
}

arrow::Result<std::vector<LiteralItem>> ParseCompositeLiteral(std::string_view text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    return BadLiteral("composite", text, 0);
  }
  std::vector<LiteralItem> items;
  size_t pos = 1;
  const size_t end = text.size() - 1;
  const std::string_view body = text.substr(0, end);
  // `()` is one null field (a one-attribute row holding NULL; a zero-attribute row
  // prints the same and is handled by the caller).
  while (true) {
    LiteralItem item;
    if (!ParseRecordItem(body, &pos, ",", &item)) {
      return BadLiteral("composite", text, pos);
    }
    items.push_back(std::move(item));
    if (pos == end) break;
    ++pos;  // the comma
  }
  return items;
}

arrow::Result<RangeLiteral> ParseRangeLiteral(std::string_view text) {
  RangeLiteral r;
  if (EqualsIgnoreCase(text, "empty")) {
    r.empty = true;
    r.lower.is_null = true;
    r.upper.is_null = true;
    return r;
  }
  if (text.size() < 3) return BadLiteral("range", text, 0);
  const char open = text.front();
  const char close = text.back();
  if ((open != '[' && open != '(') || (close != ']' && close != ')')) {
    return BadLiteral("range", text, 0);
  }
  r.lower_inclusive = open == '[';
  r.upper_inclusive = close == ']';
  const std::string_view body = text.substr(0, text.size() - 1);
  size_t pos = 1;
  if (!ParseRecordItem(body, &pos, ",", &r.lower) || pos >= body.size()) {
    return BadLiteral("range", text, pos);
  }
  ++pos;
  if (!ParseRecordItem(body, &pos, "", &r.upper) || pos != body.size()) {
    return BadLiteral("range", text, pos);
  }
  // An unbounded side is never inclusive (range_out prints `(` / `)` for it).
  if (r.lower.is_null) r.lower_inclusive = false;
  if (r.upper.is_null) r.upper_inclusive = false;
  return r;
}

}  // namespace floe::postgres
