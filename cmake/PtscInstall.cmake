# Install headers, the library, ptsc-info, a CMake package exporting
# ptsc::ptsc for find_package(ptsc), and a pkg-config file.
include(CMakePackageConfigHelpers)
install(TARGETS ptsc ptsc-mpi ptsc-info EXPORT ptscTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/ptsc.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(PROGRAMS ${PROJECT_BINARY_DIR}/src/install/ptsc-run DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/ptsc/status.h ${PROJECT_SOURCE_DIR}/include/ptsc/mpi.h
              ${PROJECT_BINARY_DIR}/include/ptsc/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ptsc)
install(EXPORT ptscTargets NAMESPACE ptsc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptsc)
# The MPI ptsc is built with, recorded in both packages (docs/install.md,
# "Which MPI"): its kind and version (cmake/PtscMpiIdentity.cmake), its C
# wrapper and its launcher. Debian's generic names (/usr/bin/mpicc,
# /usr/bin/mpiexec) are links through /etc/alternatives that follow whichever
# MPI is the default at the time; record the MPI's own name behind them
# (mpicc.openmpi, mpiexec.mpich), not the generic one and not the wrapper
# binary the name links to (Open MPI's opal_wrapper reads its own name).
function(ptsc_resolve_alternative var path)
  set(p "${path}")
  foreach(hop RANGE 8)
    if(NOT IS_SYMLINK "${p}")
      break()
    endif()
    file(READ_SYMLINK "${p}" target)
    if(NOT IS_ABSOLUTE "${target}")
      get_filename_component(dir "${p}" DIRECTORY)
      set(target "${dir}/${target}")
    endif()
    if(NOT (p MATCHES "^/etc/alternatives/" OR target MATCHES "^/etc/alternatives/"))
      break()
    endif()
    set(p "${target}")
  endforeach()
  set(${var} "${p}" PARENT_SCOPE)
endfunction()
ptsc_resolve_alternative(PTSC_MPI_CC "${MPI_C_COMPILER}")
ptsc_resolve_alternative(PTSC_MPIEXEC "${MPIEXEC_EXECUTABLE}")
set(PTSC_MPI_FC "")
if(PTSC_FORTRAN)
  ptsc_resolve_alternative(PTSC_MPI_FC "${MPI_Fortran_COMPILER}")
endif()

# pkg-config: require the MPI's own module when pkg-config knows one whose
# mpi.h is the one ptsc was compiled with (Debian: ompi-c, mpich); otherwise
# carry the MPI's flags in ptsc.pc itself. Either way `pkg-config --libs
# ptsc` names exactly one MPI. Conflicts names the other MPI's modules (the
# reference pkg-config refuses a query that brings both; pkgconf 1.8 does not
# check it), and the mpi_* variables let a build script compare.
set(_ptsc_pc_ompi ompi ompi-c ompi-cxx ompi-fort)
set(_ptsc_pc_mpich mpich)
if(PTSC_MPI_VENDOR STREQUAL "Open MPI")
  set(_ptsc_pc_other ${_ptsc_pc_mpich})
  set(_ptsc_pc_candidates ompi-c)
elseif(PTSC_MPI_VENDOR STREQUAL "MPICH")
  set(_ptsc_pc_other ${_ptsc_pc_ompi})
  set(_ptsc_pc_candidates mpich)
else()
  set(_ptsc_pc_other "")
  set(_ptsc_pc_candidates "")
endif()
set(PTSC_PC_REQUIRES "")
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND AND PTSC_MPI_HEADER)
  get_filename_component(_ptsc_hdr "${PTSC_MPI_HEADER}" REALPATH)
  foreach(mod IN LISTS _ptsc_pc_candidates)
    execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --cflags-only-I ${mod}
      RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0)
      separate_arguments(_out UNIX_COMMAND "${_out}")
      foreach(flag IN LISTS _out)
        string(REGEX REPLACE "^-I" "" dir "${flag}")
        get_filename_component(dir "${dir}" REALPATH)
        if(EXISTS "${dir}/mpi.h" AND "${dir}/mpi.h" STREQUAL _ptsc_hdr)
          set(PTSC_PC_REQUIRES ${mod})
        endif()
      endforeach()
    endif()
    if(PTSC_PC_REQUIRES)
      break()
    endif()
  endforeach()
endif()
set(PTSC_PC_MPI_CFLAGS "")
set(PTSC_PC_MPI_LIBS "")
if(NOT PTSC_PC_REQUIRES)
  foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
    string(APPEND PTSC_PC_MPI_CFLAGS " -I${dir}")
  endforeach()
  foreach(lib IN LISTS MPI_C_LIBRARIES)
    string(APPEND PTSC_PC_MPI_LIBS " ${lib}")
  endforeach()
endif()
# The Fortran module, where built: `pkg-config --variable=fflags ptsc` and
# `--variable=flibs` (with the MPI's own Fortran flags, from mpif90).
set(PTSC_PC_FORTRAN_VARS "")
if(PTSC_FORTRAN)
  string(CONCAT PTSC_PC_FORTRAN_VARS "# Fortran (use ptsc): compile with fflags, link with flibs and the MPI's Fortran libraries.\n"
    "mpifort=${PTSC_MPI_FC}\n"
    "fflags=-I\${includedir}/ptsc/fortran\n"
    "flibs=-L\${libdir} -lptsc_fortran -lptsc\n")
endif()
string(REPLACE ";" ", " PTSC_PC_CONFLICTS "${_ptsc_pc_other}")
set(PTSC_PC_REQUIRES_LINE "")
if(PTSC_PC_REQUIRES)
  set(PTSC_PC_REQUIRES_LINE "Requires: ${PTSC_PC_REQUIRES}")
endif()
set(PTSC_PC_CONFLICTS_LINE "")
if(PTSC_PC_CONFLICTS)
  set(PTSC_PC_CONFLICTS_LINE "Conflicts: ${PTSC_PC_CONFLICTS}")
endif()
message(STATUS "ptsc: packages record ${PTSC_MPI_VENDOR} ${PTSC_MPI_VERSION} (${PTSC_MPI_CC}, ${PTSC_MPIEXEC}); "
  "ptsc.pc requires '${PTSC_PC_REQUIRES}'")

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ptscConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ptscConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptsc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ptscConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ptscConfig.cmake ${PROJECT_BINARY_DIR}/ptscConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/PtscMpiIdentity.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ptsc)
# Relocatable: the prefix is found from the .pc file's own place, so an
# install with `cmake --install --prefix` elsewhere still resolves.
file(RELATIVE_PATH PTSC_PC_UP ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" PTSC_PC_UP "${PTSC_PC_UP}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/ptsc.pc.in ${PROJECT_BINARY_DIR}/ptsc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ptsc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
