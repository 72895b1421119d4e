// The scalar reference backend: the whole spec, one element after another.
#pragma once

#include <memory>

#include "optim/dispatch/backend.h"

namespace luminav {

std::unique_ptr<Backend> make_scalar_backend();

}  // namespace luminav
