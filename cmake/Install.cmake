# Install the library, its one header, an exported CMake package
# (find_package(normfuse) -> normfuse::normfuse) and a pkg-config file.
include(CMakePackageConfigHelpers)
install(TARGETS normfuse EXPORT normfuseTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS normfuse_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT normfuseTargets NAMESPACE normfuse::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/normfuse)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/normfuseConfig.cmake.in
  ${PROJECT_BINARY_DIR}/normfuseConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/normfuse)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/normfuseConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/normfuseConfig.cmake ${PROJECT_BINARY_DIR}/normfuseConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/normfuse)
# The .pc file finds its prefix from its own location, so an install with
# `cmake --install build --prefix P` (a prefix chosen after configure) works.
file(RELATIVE_PATH NF_PC_PREFIX_FROM_PCDIR "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" NF_PC_PREFIX_FROM_PCDIR "${NF_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/normfuse.pc.in ${PROJECT_BINARY_DIR}/normfuse.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/normfuse.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
