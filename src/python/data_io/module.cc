// luminamoon._data_io: the FusedPipeline with Arrow C++ formats (Parquet input,
// Parquet and Arrow IPC output). Separate from _native so that importing the
// optimizer never needs pyarrow; import pyarrow before this module.
#include <nanobind/nanobind.h>

namespace nb = nanobind;
namespace luminamoon {
void register_arrow_io();
}
void register_data_pipeline(nb::module_& m);

NB_MODULE(_data_io, m) {
  m.doc() = "LuminaMoon data pipeline with Arrow C++ I/O (Parquet, Arrow IPC)";
  luminamoon::register_arrow_io();
  register_data_pipeline(m);
}
