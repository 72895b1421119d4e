# lumina_part(<target> <label>
#             [REQUIRES <var>...] [WHY <text>]
#             SOURCES <file>...
#             [PUBLIC_LINK <lib>...] [PRIVATE_LINK <lib>...]
#             [PUBLIC_DEFINES <def>...] [PRIVATE_DEFINES <def>...]
#             [TEST <name> TEST_SOURCES <file>... [TEST_LIBS <lib>...]])
#
# One optional part of a library (a data-engine stage, an optimizer backend):
# when every REQUIRES variable is true, its sources (relative to the calling
# folder), links and definitions are added to <target> and its GoogleTest
# executable is registered; otherwise the configure log says which part is off
# and why. Sets LUMINA_PART_ON in the caller, for what a folder adds beyond this.
function(lumina_part target label)
  cmake_parse_arguments(ARG "" "WHY;TEST"
    "REQUIRES;SOURCES;PUBLIC_LINK;PRIVATE_LINK;PUBLIC_DEFINES;PRIVATE_DEFINES;TEST_SOURCES;TEST_LIBS" ${ARGN})
  foreach(var IN LISTS ARG_REQUIRES)
    if(NOT ${var})
      message(STATUS "LuminaMoon: ${label}: disabled (${ARG_WHY})")
      set(LUMINA_PART_ON OFF PARENT_SCOPE)
      return()
    endif()
  endforeach()
  list(TRANSFORM ARG_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  target_sources(${target} PRIVATE ${ARG_SOURCES})
  if(ARG_PUBLIC_LINK OR ARG_PRIVATE_LINK)
    target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_LINK} PRIVATE ${ARG_PRIVATE_LINK})
  endif()
  if(ARG_PUBLIC_DEFINES OR ARG_PRIVATE_DEFINES)
    target_compile_definitions(${target} PUBLIC ${ARG_PUBLIC_DEFINES} PRIVATE ${ARG_PRIVATE_DEFINES})
  endif()
  if(ARG_TEST)
    lumina_add_gtest(${ARG_TEST} SOURCES ${ARG_TEST_SOURCES} LIBS ${ARG_TEST_LIBS})
  endif()
  set(LUMINA_PART_ON ON PARENT_SCOPE)
endfunction()
