# Tests of the transfer engine: the differential test of the wire
# formats and the named regression cases. Included from tests/CMakeLists.txt
# after the MPI test loop, whose variables it uses (MPIEXEC_*, PTSC_MPIEXEC_EXTRA,
# PTSC_TEST_TIMEOUT, PTSC_TEST_MPI_THREADS, PTSC_TEST_MPI_RANKS):
#   include(mpi/engine_tests.cmake)
#
#  mpi_diff_np2_<comm>           tests/mpi/mpi_diff.c run by diff_records.cmake
#                                under PTSC_STAGING=never, always with a 4 KiB
#                                chunk and always with the default chunk; the
#                                records of the three runs must be identical.
#                                With PTSC_DIFF_INTERLEAVE (ON by default) the
#                                schedule also holds operations left
#                                outstanding over a lane, world or MPI
#                                collective or a computation (MPI's progress
#                                rule; MPI_DIFF_INTERLEAVE=1).
#  mpi_regress_<case>_<fmt>_<comm>  tests/mpi/mpi_regress.c CASE, with fmt
#                                never (PTSC_STAGING=never), always4k
#                                (PTSC_STAGING=always, PTSC_STAGING_CHUNK=4k)
#                                and, for the cases with messages around
#                                4 MiB, always (the default 4 MiB chunk);
#                                id_wrap only with PTSC_COMM=shared.
#  mpi_regress_trunc_guard_never_<comm>_guardno  trunc_guard with
#                                PTSC_RECV_GUARD=no in the environment.

set(PTSC_DIFF_OPS 1500 CACHE STRING "Operations of the mpi_diff schedule")
set(PTSC_DIFF_RANKS 2 CACHE STRING "Ranks of the mpi_diff runs")
option(PTSC_DIFF_INTERLEAVE "mpi_diff: operations outstanding over collectives and computation" ON)
set(_ptsc_diff_interleave "")
if(PTSC_DIFF_INTERLEAVE)
  set(_ptsc_diff_interleave "MPI_DIFF_INTERLEAVE=1")
endif()

set(_ptsc_engine_env
  "PTSC_MAX_THREADS=${PTSC_TEST_MPI_THREADS};OMP_NUM_THREADS=${PTSC_TEST_MPI_THREADS};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_mpi_yield_when_idle=1")
# A sanitized program gets more time before conform's stall watchdog fires.
# (Until 542bb17 the ASan stage ran the random programs with the owner
# threads alone, PTSC_PROGRESS=caller: threads spinning on sched_yield
# stalled them for minutes; docs/design.md, "The stall of spinning threads".)
set(_ptsc_random_env "")
# MPICH (ch4:ucx, 2 ranks x 4 threads on 2 cores) stalled a program now and
# then for 8 to 60 s, the plain-MPI oracle too (docs/design.md, "The stall
# of spinning threads"); such a program completes with the right records, so conform's
# watchdog waits 90 s there before it calls a program hung, and each format's
# run gets twice the usual time.
set(_ptsc_conform_timeout ${PTSC_TEST_TIMEOUT})
if(PTSC_SANITIZE OR PTSC_MPI_VENDOR STREQUAL "MPICH")
  list(APPEND _ptsc_random_env "MPI_CONFORM_STALL=90")
  math(EXPR _ptsc_conform_timeout "2 * ${PTSC_TEST_TIMEOUT}")
endif()

foreach(prog mpi_diff mpi_regress mpi_conform)
  add_executable(${prog} ${CMAKE_CURRENT_LIST_DIR}/${prog}.c)
  target_link_libraries(${prog} PRIVATE ptsc::ptsc MPI::MPI_C OpenMP::OpenMP_C Threads::Threads ptsc_warnings)
  target_compile_definitions(${prog} PRIVATE _GNU_SOURCE)
endforeach()

# The differential test: one ctest entry per PTSC_COMM mode, each running the
# three formats. Lists travel to the script with | between items. With
# PTSC_TIMEOUT=40 ptsc names a request stuck for 40 s (what it waits for)
# before the program's own watchdog (60 s, 80 s sanitized) ends the run.
string(REPLACE ";" "|" _ptsc_diff_extra "${PTSC_MPIEXEC_EXTRA}")
string(REPLACE ";" "|" _ptsc_diff_pre "${MPIEXEC_PREFLAGS}")
string(REPLACE ";" "|" _ptsc_diff_post "${MPIEXEC_POSTFLAGS}")
# ptsc_diff_test(<name> <formats, | between> <labels> <locks>): one entry
# that runs diff_records.cmake over the formats (its own work directory).
function(ptsc_diff_test name formats labels locks comm)
  string(REPLACE "|" ";" _fl "${formats}")
  list(LENGTH _fl _n)
  math(EXPR _timeout "${_n} * ${PTSC_TEST_TIMEOUT} + 30")
  add_test(NAME ${name}
    COMMAND ${CMAKE_COMMAND} -DMPIEXEC=${MPIEXEC_EXECUTABLE} -DNPFLAG=${MPIEXEC_NUMPROC_FLAG}
            -DNP=${PTSC_DIFF_RANKS} "-DEXTRA=${_ptsc_diff_extra}" "-DPREFLAGS=${_ptsc_diff_pre}"
            "-DPOSTFLAGS=${_ptsc_diff_post}" -DPROGRAM=$<TARGET_FILE:mpi_diff> -DARGS=${PTSC_DIFF_OPS}
            "-DFORMATS=${formats}" -DWORK=${CMAKE_CURRENT_BINARY_DIR}/${name} -DTIMEOUT=${PTSC_TEST_TIMEOUT}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../diff_records.cmake)
  set_tests_properties(${name} PROPERTIES
    LABELS "${labels}"
    TIMEOUT ${_timeout}
    PROCESSORS ${PTSC_DIFF_RANKS}
    RESOURCE_LOCK "${locks}"
    SKIP_REGULAR_EXPRESSION "mpi_diff: SKIPPED"
    PASS_REGULAR_EXPRESSION "mpi_diff records identical across formats"
    FAIL_REGULAR_EXPRESSION "FAIL"
    ENVIRONMENT "PTSC_COMM=${comm};${_ptsc_engine_env};${_ptsc_diff_interleave};${_ptsc_random_env};PTSC_TIMEOUT=40")
endfunction()

foreach(comm dup shared)
  ptsc_diff_test(mpi_diff_np${PTSC_DIFF_RANKS}_${comm} "never|always4k|always" mpi mpiexec ${comm})
endforeach()

# The named regression cases.
set(_ptsc_regress_cases recv_larger truncate_then_next isend_many detach_pending exit_pending big_type probe
  any_rank derived probe_handover dup_request trunc_noncontig trunc_guard id_wrap probe_slots)
# id_wrap picks its own PTSC_MAX_THREADS so that the id space of framed
# messages is small; that takes PTSC_COMM=shared (one lane).
set(_ptsc_regress_shared_only id_wrap)
# Cases whose sizes straddle the default 4 MiB chunk also run with it.
set(_ptsc_regress_default_chunk recv_larger truncate_then_next isend_many probe any_rank)
# any_rank needs several other ranks: the largest count the MPI tests use.
set(_ptsc_regress_np_max 2)
foreach(np IN LISTS PTSC_TEST_MPI_RANKS)
  if(np GREATER _ptsc_regress_np_max)
    set(_ptsc_regress_np_max ${np})
  endif()
endforeach()

foreach(case IN LISTS _ptsc_regress_cases)
  set(np 2)
  if(case STREQUAL "any_rank")
    set(np ${_ptsc_regress_np_max})
  endif()
  set(fmts never always4k)
  if(case IN_LIST _ptsc_regress_default_chunk)
    list(APPEND fmts always)
  endif()
  foreach(fmt IN LISTS fmts)
    if(fmt STREQUAL "never")
      set(fmt_env "PTSC_STAGING=never")
    elseif(fmt STREQUAL "always4k")
      set(fmt_env "PTSC_STAGING=always;PTSC_STAGING_CHUNK=4k")
    else()
      set(fmt_env "PTSC_STAGING=always;PTSC_STAGING_CHUNK=4MiB")
    endif()
    set(comms dup shared)
    if(case IN_LIST _ptsc_regress_shared_only)
      set(comms shared)
    endif()
    foreach(comm IN LISTS comms)
      set(name mpi_regress_${case}_${fmt}_${comm})
      add_test(NAME ${name}
        COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${PTSC_MPIEXEC_EXTRA} ${MPIEXEC_PREFLAGS}
                $<TARGET_FILE:mpi_regress> ${MPIEXEC_POSTFLAGS} ${case})
      set_tests_properties(${name} PROPERTIES
        LABELS mpi
        TIMEOUT ${PTSC_TEST_TIMEOUT}
        PROCESSORS ${np}
        RESOURCE_LOCK mpiexec
        PASS_REGULAR_EXPRESSION "PASSED mpi_regress ${case}"
        FAIL_REGULAR_EXPRESSION "FAIL"
        ENVIRONMENT "PTSC_COMM=${comm};${fmt_env};${_ptsc_engine_env}")
    endforeach()
  endforeach()
endforeach()

# PTSC_RECV_GUARD=no once let MPI truncate (Open MPI wrote past the receive
# buffer, MPICH aborted); the value no longer exists and the receive stays
# guarded.
foreach(comm dup shared)
  set(name mpi_regress_trunc_guard_never_${comm}_guardno)
  add_test(NAME ${name}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 ${PTSC_MPIEXEC_EXTRA} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:mpi_regress> ${MPIEXEC_POSTFLAGS} trunc_guard)
  set_tests_properties(${name} PROPERTIES
    LABELS mpi
    TIMEOUT ${PTSC_TEST_TIMEOUT}
    PROCESSORS 2
    RESOURCE_LOCK mpiexec
    PASS_REGULAR_EXPRESSION "PASSED mpi_regress trunc_guard"
    FAIL_REGULAR_EXPRESSION "FAIL"
    ENVIRONMENT "PTSC_COMM=${comm};PTSC_STAGING=never;PTSC_RECV_GUARD=no;${_ptsc_engine_env}")
endforeach()

# The same differential with device buffers (label gpu; skipped without a
# device): the device runs must give the records of the host run, on the
# path ptsc picks by size (auto), on the direct path wherever MPI is
# CUDA-aware (direct; staged otherwise) and on the staging format in 4 KiB
# pieces. The first format is a device run, so that a machine without a
# device skips at once.
if(PTSC_HAVE_CUDA)
  target_link_libraries(mpi_diff PRIVATE CUDA::cudart)
  target_compile_definitions(mpi_diff PRIVATE MPI_DIFF_CUDA=1)
  foreach(comm dup shared)
    ptsc_diff_test(gpu_diff_np${PTSC_DIFF_RANKS}_${comm} "dev-auto|never|dev-direct|dev-always4k" "gpu;mpi"
                   "gpu;mpiexec" ${comm})
  endforeach()
endif()

# The conformance test (tests/mpi/mpi_conform.c): random multithreaded
# programs, each run as plain MPI (the oracle) and through ptsc under
# PTSC_STAGING=never and PTSC_STAGING=always with 4 KiB pieces, per
# PTSC_COMM mode; diff_records.cmake compares the records with the oracle's.
# Programs per run: at 2 ranks PTSC_CONFORM_PROGRAMS, at the largest rank
# count of the MPI tests PTSC_CONFORM_PROGRAMS_WIDE (slower: every thread
# of 4 ranks on 2 cores; 0 leaves those entries out). MPICH runs programs
# of several threads about ten times slower here (a 4-rank run of 10
# programs takes 40 s), so it gets fewer and no 4-rank entries. Switches of the program (MPI_CONFORM_WRAP,
# MPI_CONFORM_PROBED, MPI_CONFORM_TRUNC_NC, MPI_CONFORM_DUPREQ,
# MPI_CONFORM_PROBE_PRE) stay at their default, on.
if(PTSC_MPI_VENDOR STREQUAL "MPICH")
  set(_ptsc_conform_n 60)
  set(_ptsc_conform_wide_n 0)
else()
  set(_ptsc_conform_n 500)
  set(_ptsc_conform_wide_n 40)
endif()
set(PTSC_CONFORM_PROGRAMS ${_ptsc_conform_n} CACHE STRING "Programs of each mpi_conform run at 2 ranks")
set(PTSC_CONFORM_PROGRAMS_WIDE ${_ptsc_conform_wide_n} CACHE STRING
    "Programs of each mpi_conform run at the largest rank count of the MPI tests")
set(_ptsc_conform_np_wide 2)
foreach(np IN LISTS PTSC_TEST_MPI_RANKS)
  if(np GREATER _ptsc_conform_np_wide AND np LESS_EQUAL 4)
    set(_ptsc_conform_np_wide ${np})
  endif()
endforeach()
# Under a sanitizer the plain-MPI oracle is left out: the sanitizer's part
# is ptsc's memory and threads, and the oracle comparison runs in the
# unsanitized builds. The oracle alone (Open MPI's own waits, which yield)
# stalled once in 7 ASan loops of 2026-12-07 with one of its threads held in
# the kernel's mmap for over 45 s (docs/design.md, "The stall of spinning
# threads").
set(_ptsc_conform_formats "oracle|never|always4k")
if(PTSC_SANITIZE)
  set(_ptsc_conform_formats "never|always4k")
endif()
set(_ptsc_conform_runs "2|${PTSC_CONFORM_PROGRAMS}|1")
if(_ptsc_conform_np_wide GREATER 2 AND PTSC_CONFORM_PROGRAMS_WIDE GREATER 0)
  list(APPEND _ptsc_conform_runs "${_ptsc_conform_np_wide}|${PTSC_CONFORM_PROGRAMS_WIDE}|100001")
endif()
foreach(run IN LISTS _ptsc_conform_runs)
  string(REPLACE "|" ";" run "${run}")
  list(GET run 0 np)
  list(GET run 1 nprogs)
  list(GET run 2 seed0)
  foreach(comm dup shared)
    set(name mpi_conform_np${np}_${comm})
    add_test(NAME ${name}
      COMMAND ${CMAKE_COMMAND} -DMPIEXEC=${MPIEXEC_EXECUTABLE} -DNPFLAG=${MPIEXEC_NUMPROC_FLAG} -DNP=${np}
              "-DEXTRA=${_ptsc_diff_extra}" "-DPREFLAGS=${_ptsc_diff_pre}" "-DPOSTFLAGS=${_ptsc_diff_post}"
              -DPROGRAM=$<TARGET_FILE:mpi_conform> "-DARGS=${nprogs}|${seed0}" "-DFORMATS=${_ptsc_conform_formats}"
              -DNAME=mpi_conform -DREPLAY=MPI_CONFORM_SEED -DWORK=${CMAKE_CURRENT_BINARY_DIR}/${name}
              -DTIMEOUT=${_ptsc_conform_timeout} -P ${CMAKE_CURRENT_LIST_DIR}/../diff_records.cmake)
    math(EXPR _timeout "3 * ${_ptsc_conform_timeout} + 30")
    set_tests_properties(${name} PROPERTIES
      LABELS mpi
      TIMEOUT ${_timeout}
      PROCESSORS ${np}
      RESOURCE_LOCK mpiexec
      PASS_REGULAR_EXPRESSION "mpi_conform records identical across formats"
      FAIL_REGULAR_EXPRESSION "FAIL"
      ENVIRONMENT "PTSC_COMM=${comm};${_ptsc_engine_env};${_ptsc_random_env}")
  endforeach()
endforeach()
