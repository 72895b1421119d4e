// luminav_version(): the library's version string.
#include "luminav/luminav.h"
#include "optim/capi/export.h"

#define LUMINAV_STR2(x) #x
#define LUMINAV_STR(x) LUMINAV_STR2(x)

LUMINAV_EXPORT const char* luminav_version(void) {
  return LUMINAV_STR(LUMINAV_VERSION_MAJOR) "." LUMINAV_STR(LUMINAV_VERSION_MINOR) "." LUMINAV_STR(
      LUMINAV_VERSION_PATCH);
}
