# nf_add_test(<name> SOURCES <files...> LABELS <labels...> [GPU] [NO_TEST] [LIBS <targets...>] [ARGS <args...>])
#
# One Criterion executable per test source.  LABELS are CTest labels (cpu,
# mpfr, gpu, slow).  GPU tests link property_tests/gpu_main.c, whose main()
# exits 77 with a line saying why when no CUDA device is visible; CTest
# counts that as skipped (SKIP_RETURN_CODE), never as passed.  NO_TEST builds
# the executable only, for callers that add their own CTest entries (one per
# Criterion --filter).
function(nf_add_test name)
  cmake_parse_arguments(T "GPU;NO_TEST" "TIMEOUT" "SOURCES;LABELS;LIBS;ARGS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE nf::criterion nf_oracles normfuse ${T_LIBS})
  target_link_options(${name} PRIVATE ${NF_TEST_LINK_OPTIONS})
  if(T_GPU)
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/property_tests/gpu_main.c)
    target_link_libraries(${name} PRIVATE CUDA::cudart)
  endif()
  if(T_NO_TEST)
    return()
  endif()
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT})
endfunction()
