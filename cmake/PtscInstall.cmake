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
configure_file(${PROJECT_SOURCE_DIR}/cmake/ptsc.pc.in ${PROJECT_BINARY_DIR}/ptsc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ptsc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
