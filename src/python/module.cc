// luminamoon._native: registers each area's bindings (one file per area).
//
// Note [free-threaded bindings]: nanobind_add_module(... FREE_THREADED) makes
// this module (and _data_io) declare Py_mod_gil = Py_MOD_GIL_NOT_USED on a
// free-threaded CPython, so importing them leaves the GIL off. That claim
// rests on this audit of every binding (issue 22; docs/free_threading.md):
// - Free functions (optim step/reduce/apply, clean_batch, filter_quality,
//   the _core_* hooks, the pipeline queries) keep no state of their own: they
//   copy their arguments into C structs (the hyperparameter structs by value,
//   a snapshot another thread cannot change during the call) and call the
//   engines, which are reentrant: backends and CPU features probed once under
//   std::call_once / C++ static init, thread-local error messages and
//   last-backend labels, the oneTBB arenas and the output block cache behind
//   mutexes, thread counts in atomics, Vectorscan scratch per thread, the
//   reader/writer registries behind a mutex.
// - StringTensor is immutable once built; its lazily built view slots use
//   std::call_once. PIIMasker::mask is const (scratch per thread).
// - StreamDeduplicator and MinHashLSH objects may be shared: every call that
//   touches one holds its mutex, taken with the interpreter released.
// - A StepPlan (the torch optimizer's step) is refused from a second thread
//   while one uses it (Note [one step at a time] in optim_step_plan.cc).
// - A stream()'s BatchStream hands batches over a locked queue; close() joins
//   its worker once, whichever thread gets there first.
// - FusedPipeline: the Python front end builds a fresh native pipeline per
//   run(); progress() reads atomics, cancel() sets one.
// - Interned names and exception types are created at import, never lazily
//   (a thread blocked on a C++ static's guard would stall a stop-the-world).
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
