// Assertions for arrow::Status / arrow::Result<T> in GoogleTest unit tests (test
// code only: this header needs gtest).
#pragma once

#include <utility>

#include <arrow/result.h>
#include <arrow/status.h>
#include <gtest/gtest.h>

/// Fails the test (returning from it) unless `expr`, an arrow::Status, is OK.
#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const arrow::Status _st = (expr);                         \
    ASSERT_TRUE(_st.ok()) << #expr << ": " << _st.ToString(); \
  } while (false)

#define FLOE_CONCAT_INNER(a, b) a##b
#define FLOE_CONCAT(a, b) FLOE_CONCAT_INNER(a, b)
#define FLOE_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, rexpr)               \
  auto tmp = (rexpr);                                                 \
  ASSERT_TRUE(tmp.ok()) << #rexpr << ": " << tmp.status().ToString(); \
  lhs = std::move(tmp).ValueUnsafe()
/// `lhs = ` the value of `rexpr`, an arrow::Result; fails the test unless it is OK.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  FLOE_ASSERT_OK_AND_ASSIGN_IMPL(FLOE_CONCAT(_result_, __LINE__), lhs, rexpr)
