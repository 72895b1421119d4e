// luminamoon._native: registers each area's bindings (one file per area).
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void register_optim(nb::module_& m);
void register_optim_step_plan(nb::module_& m);
void register_data_batch(nb::module_& m);
void register_data_dedup(nb::module_& m);
void register_data_pipeline(nb::module_& m);
void register_data_tokens(nb::module_& m);
void register_data_state(nb::module_& m);

NB_MODULE(_native, m) {
  m.doc() = "LuminaMoon native core (LuminaV optimizer and data engine)";
  register_optim(m);
  register_optim_step_plan(m);
  register_data_batch(m);
  register_data_dedup(m);
  register_data_pipeline(m);
  register_data_tokens(m);
  register_data_state(m);
}
