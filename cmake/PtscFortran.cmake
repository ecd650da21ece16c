# Fortran: the module `use ptsc` (fortran/) and the Fortran tests, where a
# Fortran compiler and the Fortran bindings of the same MPI as the C side
# are found. PTSC_WITH_FORTRAN: AUTO (off in sanitizer builds, whose
# runtime the Fortran programs would need too), ON (an error when missing),
# OFF. Sets PTSC_FORTRAN.
set(PTSC_FORTRAN OFF)
set(_ptsc_f_want ${PTSC_WITH_FORTRAN})
if(_ptsc_f_want STREQUAL "AUTO" AND PTSC_SANITIZE)
  message(STATUS "ptsc: Fortran off in a sanitizer build (PTSC_WITH_FORTRAN=ON builds it)")
  set(_ptsc_f_want OFF)
endif()
if(NOT _ptsc_f_want STREQUAL "OFF")
  include(CheckLanguage)
  check_language(Fortran)
  set(_ptsc_f_why "")
  if(CMAKE_Fortran_COMPILER)
    enable_language(Fortran)
    find_package(MPI COMPONENTS Fortran)
    if(NOT MPI_Fortran_FOUND)
      set(_ptsc_f_why "MPI's Fortran bindings not found (set MPI_Fortran_COMPILER)")
    else()
      # Both sides of one MPI: MPICH's C with Open MPI's Fortran (the
      # default mpif90 beside mpicc.mpich) would link two MPIs.
      string(TOLOWER "${MPI_Fortran_LIBRARIES};${MPI_Fortran_INCLUDE_DIRS}" _ptsc_f_libs)
      if(PTSC_MPI_VENDOR STREQUAL "MPICH" AND NOT _ptsc_f_libs MATCHES "mpich")
        set(_ptsc_f_why "MPI_Fortran (${MPI_Fortran_COMPILER}) is not MPICH's; set MPI_Fortran_COMPILER=mpif90.mpich")
      elseif(PTSC_MPI_VENDOR STREQUAL "Open MPI" AND _ptsc_f_libs MATCHES "mpich")
        set(_ptsc_f_why "MPI_Fortran (${MPI_Fortran_COMPILER}) is MPICH's, the C side Open MPI")
      endif()
    endif()
  else()
    set(_ptsc_f_why "no Fortran compiler (set CMAKE_Fortran_COMPILER)")
  endif()
  if(_ptsc_f_why STREQUAL "")
    set(PTSC_FORTRAN ON)
    find_package(OpenMP COMPONENTS Fortran) # examples/omp_halo.f90
    message(STATUS "ptsc: Fortran with ${CMAKE_Fortran_COMPILER} (${CMAKE_Fortran_COMPILER_ID} "
      "${CMAKE_Fortran_COMPILER_VERSION}), ${MPI_Fortran_COMPILER}")
  elseif(_ptsc_f_want STREQUAL "ON")
    message(FATAL_ERROR "ptsc: PTSC_WITH_FORTRAN=ON: ${_ptsc_f_why}")
  else()
    message(STATUS "ptsc: Fortran off: ${_ptsc_f_why}")
  endif()
endif()
