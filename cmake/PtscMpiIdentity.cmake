# Which MPI a set of include directories holds, read from its mpi.h.
#
#   ptsc_mpi_identify(<prefix> <include dir>...)
#
# sets <prefix>_VENDOR ("Open MPI", "MPICH" or "" when mpi.h is not found or
# unknown), <prefix>_VERSION (e.g. 4.1.4) and <prefix>_HEADER (the mpi.h
# read). MPICH derivatives (Intel MPI, MVAPICH) define MPICH_VERSION and
# count as MPICH: they share its ABI and its handle types. Reading the
# header needs no compiler and no run, so the same function works when ptsc
# is built and, from the installed package, when a program finds ptsc with
# find_package(ptsc); Open MPI and MPICH headers cannot be mixed, since
# their handles differ (pointers in Open MPI, integers in MPICH).
#
# Installed beside ptscConfig.cmake, which includes it.
function(ptsc_mpi_identify prefix)
  set(header "")
  foreach(dir IN LISTS ARGN)
    if(dir AND EXISTS "${dir}/mpi.h")
      set(header "${dir}/mpi.h")
      break()
    endif()
  endforeach()
  set(vendor "")
  set(version "")
  if(header)
    file(STRINGS "${header}" defines REGEX
      "^#[ \t]*define[ \t]+(OPEN_MPI|OMPI_MAJOR_VERSION|OMPI_MINOR_VERSION|OMPI_RELEASE_VERSION|MPICH_VERSION)[ \t]")
    foreach(line IN LISTS defines)
      if(line MATCHES "define[ \t]+OPEN_MPI[ \t]+1")
        set(vendor "Open MPI")
      elseif(line MATCHES "define[ \t]+OMPI_(MAJOR|MINOR|RELEASE)_VERSION[ \t]+([0-9]+)")
        set(_ompi_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
      elseif(line MATCHES "define[ \t]+MPICH_VERSION[ \t]+\"([^\"]*)\"")
        if(NOT vendor)
          set(vendor "MPICH")
          set(version "${CMAKE_MATCH_1}")
        endif()
      endif()
    endforeach()
    if(vendor STREQUAL "Open MPI" AND DEFINED _ompi_MAJOR)
      set(version "${_ompi_MAJOR}.${_ompi_MINOR}.${_ompi_RELEASE}")
    endif()
  endif()
  set(${prefix}_VENDOR "${vendor}" PARENT_SCOPE)
  set(${prefix}_VERSION "${version}" PARENT_SCOPE)
  set(${prefix}_HEADER "${header}" PARENT_SCOPE)
endfunction()
