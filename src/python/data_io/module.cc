// luminamoon._data_io: the FusedPipeline with Arrow C++ formats (Parquet input,
// Parquet and Arrow IPC output). Separate from _native so that importing the
// optimizer never needs pyarrow; import pyarrow before this module.
#include <nanobind/nanobind.h>

namespace nb = nanobind;
#include <cstdint>

namespace luminamoon {
void register_arrow_io();
uint64_t parquet_pages_skipped();
}
void register_data_pipeline(nb::module_& m);

NB_MODULE(_data_io, m) {
  m.doc() = "LuminaMoon data pipeline with Arrow C++ I/O (Parquet, Arrow IPC)";
  luminamoon::register_arrow_io();
  register_data_pipeline(m);
  m.def("_parquet_pages_skipped", &luminamoon::parquet_pages_skipped,
        "Data pages a resume inside a row group skipped unread (page index), since the process started");
}
