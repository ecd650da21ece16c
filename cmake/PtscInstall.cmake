# Install headers, the library, ptsc-info, a CMake package exporting
# ptsc::ptsc for find_package(ptsc), and a pkg-config file.
include(CMakePackageConfigHelpers)
install(TARGETS ptsc ptsc-info EXPORT ptscTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/ptsc.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/ptsc/status.h ${PROJECT_BINARY_DIR}/include/ptsc/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ptsc)
install(EXPORT ptscTargets NAMESPACE ptsc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptsc)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ptscConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ptscConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptsc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ptscConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ptscConfig.cmake ${PROJECT_BINARY_DIR}/ptscConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptsc)
# Relocatable: the prefix is found from the .pc file's own place, so an
# install with `cmake --install --prefix` elsewhere still resolves.
file(RELATIVE_PATH PTSC_PC_UP ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" PTSC_PC_UP "${PTSC_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ptsc.pc.in ${PROJECT_BINARY_DIR}/ptsc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ptsc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
