// Bindings of the data dedup area (placeholder until that area lands).
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void register_data_dedup(nb::module_& m) { (void)m; }
