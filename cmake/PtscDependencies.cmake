# MPI, OpenMP, threads and (optionally) CUDA. Sets PTSC_HAVE_CUDA and
# PTSC_HAVE_NVCC (kernels for tests and examples).
find_package(MPI REQUIRED COMPONENTS C)
find_package(OpenMP REQUIRED COMPONENTS C)
find_package(Threads REQUIRED)

# Which MPI this is (Open MPI or MPICH), from its mpi.h. The installed
# package records it, with the wrapper and launcher, so that a program
# using ptsc is built with the same MPI (cmake/PtscInstall.cmake).
include(PtscMpiIdentity)
ptsc_mpi_identify(PTSC_MPI ${MPI_C_HEADER_DIR} ${MPI_C_INCLUDE_DIRS} ${CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES})
if(NOT PTSC_MPI_VENDOR)
  message(WARNING "ptsc: could not tell which MPI mpi.h belongs to (${MPI_C_HEADER_DIR}); "
    "the installed package will not check that programs use the same MPI")
endif()

set(PTSC_HAVE_CUDA OFF)
set(PTSC_HAVE_NVCC OFF)
if(NOT PTSC_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda AND NOT DEFINED ENV{CUDAToolkit_ROOT})
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(PTSC_HAVE_CUDA ON)
    if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS ${CUDAToolkit_BIN_DIR}/nvcc)
      set(CMAKE_CUDA_COMPILER ${CUDAToolkit_BIN_DIR}/nvcc)
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 90)
      endif()
      enable_language(CUDA)
      set(PTSC_HAVE_NVCC ON)
    endif()
  elseif(PTSC_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PTSC_WITH_CUDA=ON but the CUDA toolkit was not found (set CUDAToolkit_ROOT)")
  endif()
endif()
message(STATUS "ptsc: CUDA layer ${PTSC_HAVE_CUDA}, nvcc for tests/examples ${PTSC_HAVE_NVCC}, "
  "MPI ${MPI_C_VERSION}: ${PTSC_MPI_VENDOR} ${PTSC_MPI_VERSION} (${MPI_C_COMPILER}, ${MPIEXEC_EXECUTABLE})")

# Warnings shared by every ptsc target.
add_library(ptsc_warnings INTERFACE)
target_compile_options(ptsc_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter>)
if(PTSC_WERROR)
  target_compile_options(ptsc_warnings INTERFACE $<$<COMPILE_LANGUAGE:C>:-Werror>)
endif()

# How ptsc's own tests, examples and benchmarks launch MPI jobs. Open MPI
# refuses more ranks than cores without --oversubscribe (CI machines have
# fewer cores than ranks) and other launchers do not know the flag, so ask
# the launcher (FindMPI does not always set the library version string).
# mpiexec as root needs Open MPI's two consent variables.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _ptsc_mpiexec_version
  ERROR_QUIET TIMEOUT 20)
set(PTSC_MPIEXEC_OVERSUBSCRIBE "")
if(_ptsc_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(PTSC_MPIEXEC_OVERSUBSCRIBE --oversubscribe)
endif()
set(PTSC_MPIEXEC_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
