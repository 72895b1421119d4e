# Runs one libFuzzer target for ctest (see fuzz/CMakeLists.txt):
#   MODE=replay: every seed and regression input once (-runs=0);
#   MODE=run:    fuzz for SECONDS from a scratch copy of the seeds, then
#                print where any crash reproducer went (add it to
#                fuzz/regressions/<name>/ with the fix).
file(MAKE_DIRECTORY ${WORK})
set(dirs)
foreach(d ${SEEDS} ${REGRESSIONS})
  if(IS_DIRECTORY ${d})
    list(APPEND dirs ${d})
  endif()
endforeach()
set(common -rss_limit_mb=2560 -timeout=25 -print_final_stats=1)
if(MODE STREQUAL "replay")
  execute_process(COMMAND ${FUZZER} ${common} -runs=0 ${dirs} RESULT_VARIABLE rc)
else()
  set(scratch ${WORK}/corpus)
  file(REMOVE_RECURSE ${scratch})
  file(MAKE_DIRECTORY ${scratch})
  foreach(d ${dirs})
    file(GLOB inputs ${d}/*)
    if(inputs)
      file(COPY ${inputs} DESTINATION ${scratch})
    endif()
  endforeach()
  execute_process(COMMAND ${FUZZER} ${common} -max_total_time=${SECONDS} -artifact_prefix=${WORK}/
                          ${scratch}
                  RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); a reproducer is in ${WORK}/ (crash-*, timeout-*, oom-*)")
endif()
