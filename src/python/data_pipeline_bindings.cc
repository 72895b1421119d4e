// Bindings of the data pipeline area (placeholder until that area lands).
#include <nanobind/nanobind.h>

namespace nb = nanobind;

void register_data_pipeline(nb::module_& m) { (void)m; }
