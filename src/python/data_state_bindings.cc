// Bindings of the StateTracker (the dual-slot .meta checkpoint) for a user's
// own loop: conversion and DataError translation only.
#include <nanobind/nanobind.h>

namespace nb = nanobind;

#if defined(LUMINA_HAVE_STATE_TRACKER)

#include <nanobind/stl/string.h>

#include "luminamoon/state_tracker.h"
#include "python/data_error_bridge.h"

using namespace luminamoon;
using bridge::translating;

namespace {

nb::dict coordinate_dict(const StreamCoordinate& c) {
  nb::dict d;
  d["shard_id"] = c.shard_id;
  d["byte_offset"] = c.byte_offset;
  d["row_group_idx"] = c.row_group_idx;
  d["page_idx"] = c.page_idx;
  d["row_offset_in_page"] = c.row_offset_in_page;
  d["global_row_idx"] = c.global_row_idx;
  return d;
}

StreamCoordinate coordinate_from(nb::dict d) {
  StreamCoordinate c;
  for (auto [key, value] : d) {
    std::string k = nb::cast<std::string>(key);
    if (k == "shard_id") c.shard_id = nb::cast<uint32_t>(value);
    else if (k == "byte_offset") c.byte_offset = nb::cast<uint64_t>(value);
    else if (k == "row_group_idx") c.row_group_idx = nb::cast<uint32_t>(value);
    else if (k == "page_idx") c.page_idx = nb::cast<uint32_t>(value);
    else if (k == "row_offset_in_page") c.row_offset_in_page = nb::cast<uint32_t>(value);
    else if (k == "global_row_idx") c.global_row_idx = nb::cast<uint64_t>(value);
    else throw DataError(DataErrorKind::kUsage, "unknown coordinate field '" + k + "'");
  }
  return c;
}

nb::object checkpoint_object(const std::optional<Checkpoint>& cp) {
  if (!cp) return nb::none();
  nb::dict d;
  d["sequence"] = cp->sequence;
  d["flags"] = cp->flags;
  d["finished"] = (cp->flags & kCheckpointFinished) != 0;
  d["coordinate"] = coordinate_dict(cp->coordinate);
  d["output_position"] = cp->output_position;
  return d;
}

}  // namespace

void register_data_state(nb::module_& m) {
  nb::class_<StateTracker>(m, "_StateTracker")
      .def(nb::init<std::string>(), nb::arg("meta_path"))
      .def("load", [](StateTracker& t) { return checkpoint_object(translating([&] { return t.load(); })); })
      .def(
          "commit",
          [](StateTracker& t, nb::dict coordinate, uint64_t output_position, uint16_t flags) {
            StreamCoordinate c = translating([&] { return coordinate_from(coordinate); });
            Checkpoint cp = translating([&] {
              nb::gil_scoped_release release;
              return t.commit(c, output_position, flags);
            });
            return checkpoint_object(cp);
          },
          nb::arg("coordinate"), nb::arg("output_position"), nb::arg("flags") = 0)
      .def_prop_ro("latest", [](const StateTracker& t) { return checkpoint_object(t.latest()); })
      .def_prop_ro("invalid_slots_at_load", &StateTracker::invalid_slots_at_load)
      .def_prop_ro("path", &StateTracker::path);
  m.attr("_CHECKPOINT_FINISHED") = kCheckpointFinished;
}

#else

void register_data_state(nb::module_& m) { (void)m; }

#endif
