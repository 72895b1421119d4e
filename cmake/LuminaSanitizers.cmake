# Sanitizer and fuzzing builds (issue 16). LUMINA_SANITIZE=address,undefined
# or thread instruments everything built here; LUMINA_BUILD_FUZZERS builds
# the libFuzzer targets in fuzz/ (clang only: without it the option only
# prints a message). LUMINA_HWY_STATIC_ONLY compiles the Highway kernels for
# the baseline target alone (HWY_COMPILE_ONLY_STATIC): an instrumented build
# of every target of one kernel file took 35 minutes.
set(LUMINA_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined | thread | empty")
option(LUMINA_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)
option(LUMINA_HWY_STATIC_ONLY "Compile Highway kernels for the static target only" OFF)

if(LUMINA_HWY_STATIC_ONLY)
  add_compile_definitions(HWY_COMPILE_ONLY_STATIC=1)
endif()

if(LUMINA_SANITIZE)
  string(REPLACE "," ";" _lumina_sanitizers "${LUMINA_SANITIZE}")
  set(_lumina_san_flags -fsanitize=${LUMINA_SANITIZE} -fno-omit-frame-pointer -g)
  if("undefined" IN_LIST _lumina_sanitizers)
    # Every UB report fails the test instead of printing and going on.
    list(APPEND _lumina_san_flags -fno-sanitize-recover=undefined)
  endif()
  add_compile_options(${_lumina_san_flags})
  add_link_options(-fsanitize=${LUMINA_SANITIZE})
  message(STATUS "LuminaMoon: sanitizers: ${LUMINA_SANITIZE}")
endif()

set(LUMINA_FUZZING OFF)
if(LUMINA_BUILD_FUZZERS)
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer")
  check_cxx_source_compiles(
    "#include <cstdint>
     #include <cstddef>
     extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }"
    LUMINA_HAVE_LIBFUZZER)
  unset(CMAKE_REQUIRED_FLAGS)
  if(LUMINA_HAVE_LIBFUZZER)
    set(LUMINA_FUZZING ON)
    # Coverage feedback for the library code the targets call.
    add_compile_options(-fsanitize=fuzzer-no-link)
    message(STATUS "LuminaMoon: fuzz targets: on (libFuzzer)")
  else()
    message(STATUS "LuminaMoon: fuzz targets: off (the compiler has no libFuzzer; use clang "
                   "with libclang-rt-dev: CXX=clang++)")
  endif()
endif()
