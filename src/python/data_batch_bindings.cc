// Bindings of the data batch area (placeholder until that area lands).
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void register_data_batch(nb::module_& m) { (void)m; }
