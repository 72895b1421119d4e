// Where one tensor's second moment lives in its exp_avg_sq slot and how a
// traversal finds an element's share of it (spec "TD-CLM second moment").
#pragma once

#include <cstddef>
#include <cstdint>

#include "luminav/luminav.h"
#include "optim/core/host_device.h"
#include "optim/core/step_constants.h"

namespace luminav::core {

// Note [second moment layouts]: four traversals cover the spec's forms.
//   kElementwise  CLM's v_i; also TD-CLM factored or row with C = 1, where the
//                 row factor has one number per element and its update is CLM's
//                 (a_r = g_r^2): the same per-element code, no reduction.
//   kTensor       TD-CLM tensor (version 1): the scalar s, from sum g^2.
//   kRow          TD-CLM row, C > 1: vhat_i = row_r(i); pass 1 sums each row.
//   kFactored     TD-CLM factored, C > 1: vhat_i = row_r(i) * col_c(i) / rho;
//                 pass 1 sums each row and each column.
enum class SecondMoment : int { kElementwise = 0, kTensor = 1, kRow = 2, kFactored = 3 };

struct MomentLayout {
  SecondMoment kind = SecondMoment::kElementwise;
  uint64_t rows = 0;  // rows of this buffer (kRow, kFactored)
  uint64_t cols = 0;  // C (kRow, kFactored)
};

// C of a TD-CLM factored/row tensor (rows validated: >= 1, dividing N).
LUMINAV_HD uint64_t columns_of(uint64_t num_elements, uint64_t rows) {
  return rows == 0 ? 0 : num_elements / rows;
}

// The layout of a validated tensor (num_elements > 0) under `tdclm`.
LUMINAV_HD MomentLayout moment_layout(bool tdclm, const luminav_tensor& t) {
  MomentLayout l;
  if (!tdclm) return l;
  if (t.td_factor == LUMINAV_TD_TENSOR) {
    l.kind = SecondMoment::kTensor;
    return l;
  }
  l.rows = t.rows;
  l.cols = columns_of(t.num_elements, t.rows);
  if (l.cols == 1) {
    l.kind = SecondMoment::kElementwise;
  } else {
    l.kind = t.td_factor == LUMINAV_TD_ROW ? SecondMoment::kRow : SecondMoment::kFactored;
  }
  return l;
}

LUMINAV_HD bool has_row_factor(const MomentLayout& l) {
  return l.kind == SecondMoment::kRow || l.kind == SecondMoment::kFactored;
}

// exp_avg_sq floats (luminav_exp_avg_sq_length; 0 for invalid arguments).
LUMINAV_HD size_t exp_avg_sq_length(uint64_t num_elements, uint64_t rows, int buffer_mode,
                                           int td_factor) {
  if (buffer_mode == LUMINAV_MODE_CLM) return static_cast<size_t>(num_elements);
  if (buffer_mode != LUMINAV_MODE_TDCLM) return 0;
  if (td_factor == LUMINAV_TD_TENSOR) return 1;
  if (td_factor != LUMINAV_TD_FACTORED && td_factor != LUMINAV_TD_ROW) return 0;
  if (rows == 0 || num_elements % rows != 0) return 0;
  const uint64_t cols = num_elements / rows;
  if (td_factor == LUMINAV_TD_ROW || cols == 1) return static_cast<size_t>(rows);
  return static_cast<size_t>(rows + cols);
}

// The element math's constants for a tensor of this layout: a per-element
// TD-CLM second moment runs CLM's code (k.tdclm = 0 there, Note [second
// moment layouts]); the reduction rounds keep reading the step's own k.
LUMINAV_HD StepConstants element_constants(const StepConstants& k, const MomentLayout& l) {
  StepConstants e = k;
  e.tdclm = l.kind == SecondMoment::kTensor ? 1 : 0;
  return e;
}

}  // namespace luminav::core
