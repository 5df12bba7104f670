# The harness properties (harness/props.h): one executable, one CTest entry
# per property (Criterion --filter), each run in-process against every
# registry entry.  GPU tests (exit 77 = skipped without a device); the slow
# ones run many MPFR or large cases.
nf_add_test(props_test SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/props_test.c GPU NO_TEST
            LIBS nf_harness)
foreach(_p rstd_commute cluster_equality backward_mpfr determinism special_values incumbent catches_bugs)
  set(_labels gpu)
  if(_p MATCHES "^(backward_mpfr|special_values|incumbent|catches_bugs)$")
    list(APPEND _labels slow)
  endif()
  add_test(NAME prop_${_p} COMMAND props_test --filter "harness_properties/${_p}")
  set_tests_properties(prop_${_p} PROPERTIES LABELS "${_labels}" SKIP_RETURN_CODE 77 TIMEOUT 1800)
endforeach()
