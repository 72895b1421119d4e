// luminav_version(): the library's version string.
#include "luminav/luminav.h"

#define LUMINAV_STR2(x) #x
#define LUMINAV_STR(x) LUMINAV_STR2(x)

extern "C" __attribute__((visibility("default"))) const char* luminav_version(void) {
  return LUMINAV_STR(LUMINAV_VERSION_MAJOR) "." LUMINAV_STR(LUMINAV_VERSION_MINOR) "." LUMINAV_STR(
      LUMINAV_VERSION_PATCH);
}
