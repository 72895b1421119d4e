// Bindings of the optim area (placeholder until that area lands).
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void register_optim(nb::module_& m) { (void)m; }
