# Installs the build into a scratch prefix, then builds a consumer that makes
# MPI calls through find_package(ptsc) and through pkg-config, and runs each
# under mpiexec with 2 ranks. Checks that both packages record the MPI ptsc
# was built with and that find_package(ptsc) refuses a project that brings
# the other MPI.
#   cmake -DBUILD=<build dir> -DSRC=<tests/install> -DWORK=<scratch> -DCC=<C compiler>
#         -DMPIEXEC=<launcher> -DNPFLAG=<-n> [-DEXTRA=<flags, | separated>]
#         -DVENDOR=<Open MPI|MPICH> [-DOTHER_MPICC=<the other MPI's mpicc>]
#         [-DSAN_FLAGS=<sanitizer flags, | separated>] [-DFC=<the MPI's Fortran wrapper>]
#         -P check_install.cmake
# With FC (ptsc built with its Fortran module), a Fortran consumer
# (consumer_f.f90, `use ptsc`) is built and run the same two ways.
# The launcher's environment (OMPI_ALLOW_RUN_AS_ROOT...) comes from ctest.
file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
string(REPLACE "|" ";" EXTRA "${EXTRA}")
string(REPLACE "|" ";" SAN_FLAGS "${SAN_FLAGS}")
string(REPLACE ";" " " san_flags_string "${SAN_FLAGS}")
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 180)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
# Runs a consumer on 2 ranks; its output must match `expect` (the C
# consumer's rank 0 reports the MPI calls it made).
set(expect_c "consumer: ptsc [0-9]+\\.[0-9]+\\.[0-9]+, PTSC_ERR_TAG, 2 ranks, allreduce 2, ring ok")
set(expect_f "consumer_f: ptsc [0-9]+\\.[0-9]+\\.[0-9]+, 2 ranks, ring ok")
function(run_consumer what exe expect)
  run("${what}" ${MPIEXEC} ${NPFLAG} 2 ${EXTRA} ${exe})
  if(NOT last_out MATCHES "${expect}")
    message(FATAL_ERROR "${what}: unexpected output: ${last_out}")
  endif()
  message(STATUS "${what}: ${last_out}")
endfunction()

run("install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})

# find_package(ptsc): the consumer names no MPI and gets ptsc's.
run("configure consumer" ${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/consumer -DCMAKE_PREFIX_PATH=${prefix}
  "-DCMAKE_C_FLAGS=${san_flags_string}" "-DCMAKE_EXE_LINKER_FLAGS=${san_flags_string}")
if(NOT last_out MATCHES "consumer: ptsc built with ${VENDOR} ")
  message(FATAL_ERROR "the CMake package does not record ${VENDOR}:\n${last_out}")
endif()
run("build consumer" ${CMAKE_COMMAND} --build ${WORK}/consumer)
run_consumer("run consumer (find_package)" ${WORK}/consumer/consumer "${expect_c}")
if(FC)
  if(NOT EXISTS ${WORK}/consumer/consumer_f)
    message(FATAL_ERROR "ptsc was built with Fortran, but find_package(ptsc) gave no ptsc::fortran")
  endif()
  run_consumer("run Fortran consumer (find_package)" ${WORK}/consumer/consumer_f "${expect_f}")
endif()

# find_package(ptsc) in a project that selected the other MPI: refused, and
# the message says which MPI ptsc needs.
if(OTHER_MPICC AND EXISTS "${OTHER_MPICC}")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC} -B ${WORK}/consumer-other -DCMAKE_PREFIX_PATH=${prefix}
    -DMPI_C_COMPILER=${OTHER_MPICC} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 180)
  string(REGEX REPLACE "[ \t\n]+" " " flat "${err}") # CMake wraps the message
  if(rc EQUAL 0 OR NOT flat MATCHES "was built with ${VENDOR} .* A program linked with both MPIs crashes")
    message(FATAL_ERROR "find_package(ptsc) with MPI_C_COMPILER=${OTHER_MPICC} was not refused (${rc}):\n${out}\n${err}")
  endif()
  string(REGEX MATCH "ptsc in .* crashes\\." reason "${flat}")
  message(STATUS "find_package(ptsc) with ${OTHER_MPICC}: refused: ${reason}")
else()
  message(STATUS "no other MPI here (OTHER_MPICC='${OTHER_MPICC}'): the refusal is not checked")
endif()

find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  file(GLOB pcdir ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
  set(ENV{PKG_CONFIG_PATH} "${pcdir}")
  run("pkg-config --variable=mpi_vendor" ${PKG_CONFIG} --variable=mpi_vendor ptsc)
  string(STRIP "${last_out}" pc_vendor)
  if(NOT pc_vendor STREQUAL VENDOR)
    message(FATAL_ERROR "ptsc.pc records MPI '${pc_vendor}', ptsc was built with '${VENDOR}'")
  endif()
  run("pkg-config" ${PKG_CONFIG} --cflags --libs ptsc)
  string(STRIP "${last_out}" flags)
  message(STATUS "pkg-config --cflags --libs ptsc: ${flags}")
  # Exactly one MPI: an MPICH build must not bring Open MPI's libmpi, nor the
  # reverse.
  if((VENDOR STREQUAL "MPICH" AND flags MATCHES "openmpi|-lmpi( |$)")
     OR (VENDOR STREQUAL "Open MPI" AND flags MATCHES "mpich"))
    message(FATAL_ERROR "pkg-config flags of a ${VENDOR} build name another MPI: ${flags}")
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(GLOB libdir LIST_DIRECTORIES true ${prefix}/lib*)
  run("compile with pkg-config flags" ${CC} ${SAN_FLAGS} ${SRC}/consumer.c ${flags} -Wl,-rpath,${libdir}
    -o ${WORK}/pc-consumer)
  run_consumer("run consumer (pkg-config)" ${WORK}/pc-consumer "${expect_c}")
  if(FC)
    run("pkg-config --variable=fflags" ${PKG_CONFIG} --variable=fflags ptsc)
    string(STRIP "${last_out}" fflags)
    run("pkg-config --variable=flibs" ${PKG_CONFIG} --variable=flibs ptsc)
    string(STRIP "${last_out}" flibs)
    message(STATUS "pkg-config fflags / flibs: ${fflags} / ${flibs}")
    separate_arguments(fflags UNIX_COMMAND "${fflags}")
    separate_arguments(flibs UNIX_COMMAND "${flibs}")
    run("compile the Fortran consumer with pkg-config flags" ${FC} ${fflags} ${SRC}/consumer_f.f90 ${flibs}
      -Wl,-rpath,${libdir} -o ${WORK}/pc-consumer_f)
    run_consumer("run Fortran consumer (pkg-config)" ${WORK}/pc-consumer_f "${expect_f}")
  endif()
endif()
