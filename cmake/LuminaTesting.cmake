# lumina_add_gtest(name SOURCES a_test.cc ... LIBS target ...): one GoogleTest
# executable registered with ctest. C++ tests live next to their sources.
if(LUMINA_BUILD_TESTS)
  enable_testing()
  include(GoogleTest)
endif()

function(lumina_add_gtest name)
  if(NOT LUMINA_BUILD_TESTS OR NOT LUMINA_HAVE_GTEST)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
endfunction()
