# Finds what normfuse builds against.  Every dependency may also come from a
# prefix unpacked by scripts/prepare_offline_gpu_host.sh: pass
# -DCMAKE_PREFIX_PATH=<prefix>/usr and the searches below look there first.
find_package(CUDAToolkit REQUIRED)
find_package(OpenMP COMPONENTS C)

set(_nf_multiarch_lib "")
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(_nf_multiarch_lib lib/${CMAKE_LIBRARY_ARCHITECTURE})
endif()

# cuDNN: the CUDA toolkit's include directory on some systems, the system one on others.
find_path(NF_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
find_library(NF_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
if(NOT NF_CUDNN_INCLUDE_DIR OR NOT NF_CUDNN_LIBRARY)
  message(FATAL_ERROR "cuDNN 9 not found (cudnn.h: ${NF_CUDNN_INCLUDE_DIR}, libcudnn: ${NF_CUDNN_LIBRARY})")
endif()
add_library(nf::cudnn INTERFACE IMPORTED)
set_target_properties(nf::cudnn PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${NF_CUDNN_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${NF_CUDNN_LIBRARY}")

# GNU MPFR and GMP (the oracle of record).
find_path(NF_MPFR_INCLUDE_DIR mpfr.h PATH_SUFFIXES include)
find_path(NF_GMP_INCLUDE_DIR gmp.h PATH_SUFFIXES include include/${CMAKE_LIBRARY_ARCHITECTURE})
find_library(NF_MPFR_LIBRARY NAMES mpfr libmpfr.so.6 PATH_SUFFIXES ${_nf_multiarch_lib})
find_library(NF_GMP_LIBRARY NAMES gmp libgmp.so.10 PATH_SUFFIXES ${_nf_multiarch_lib})
if(NOT NF_MPFR_INCLUDE_DIR OR NOT NF_GMP_INCLUDE_DIR OR NOT NF_MPFR_LIBRARY OR NOT NF_GMP_LIBRARY)
  message(FATAL_ERROR "MPFR/GMP not found: install libmpfr-dev (Debian) or pass "
                      "-DCMAKE_PREFIX_PATH=<prefix from scripts/prepare_offline_gpu_host.sh>/usr")
endif()
add_library(nf::mpfr INTERFACE IMPORTED)
set_target_properties(nf::mpfr PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${NF_MPFR_INCLUDE_DIR};${NF_GMP_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES "${NF_MPFR_LIBRARY};${NF_GMP_LIBRARY}")

# Criterion (tests only).
if(BUILD_TESTING OR NOT DEFINED BUILD_TESTING)
  find_path(NF_CRITERION_INCLUDE_DIR criterion/criterion.h PATH_SUFFIXES include)
  find_library(NF_CRITERION_LIBRARY NAMES criterion libcriterion.so.3 PATH_SUFFIXES ${_nf_multiarch_lib})
  if(NOT NF_CRITERION_INCLUDE_DIR OR NOT NF_CRITERION_LIBRARY)
    message(FATAL_ERROR "Criterion not found: install libcriterion-dev, or configure with -DBUILD_TESTING=OFF")
  endif()
  add_library(nf::criterion INTERFACE IMPORTED)
  set_target_properties(nf::criterion PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${NF_CRITERION_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${NF_CRITERION_LIBRARY}")
  # An unpacked prefix's libraries need each other at link time.
  get_filename_component(_nf_crit_dir "${NF_CRITERION_LIBRARY}" DIRECTORY)
  set(NF_TEST_LINK_OPTIONS "-Wl,-rpath-link,${_nf_crit_dir}" "-Wl,-rpath,${_nf_crit_dir}")
endif()
