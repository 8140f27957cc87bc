// Shared by the value conversions of type_text.cc and type_binary.cc; not part of
// the module's interface.

#pragma once

#include <arrow/array/builder_base.h>

namespace floe::postgres::internal {

/// The builder a ColumnMapping's converter kind makes (ColumnConverter::MakeBuilder).
template <typename Builder>
Builder* As(arrow::ArrayBuilder* b) {
  return static_cast<Builder*>(b);
}

}  // namespace floe::postgres::internal
