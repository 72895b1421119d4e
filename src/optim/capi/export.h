// Marks the C API's definitions as the only symbols libluminav exports (the
// build hides everything else).
#pragma once

#define LUMINAV_EXPORT extern "C" __attribute__((visibility("default")))
