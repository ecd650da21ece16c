! A plain Fortran MPI program (no ptsc call) for libptsc-mpi's Fortran
! entry points (src/interpose_fortran.c): tests/mpi/mpi_interpose.c's
! checks in Fortran. Built once per binding flavour: F_MPIFH (include
! 'mpif.h'), F_USE_MPI (use mpi), F_F08 (use mpi_f08).
!
! Point-to-point (blocking, non-blocking, Sendrecv, Sendrecv_replace,
! matched receive), persistent requests started twice, every completion
! call, blocking and non-blocking collectives (the v forms too),
! MPI_IN_PLACE; each result
! checked against its closed form. With PTSC_STAGING=always also a 1 MiB
! message into a receive of 4 integers (MPI_ERR_TRUNCATE, nothing written
! past them: staged runs only, since Open MPI itself overflows there). MPI_INTERPOSE_EXPECT=yes requires the
! interposer to be active and to have seen exactly the buffer arguments the
! program passed (counted as it calls; MPI_IN_PLACE and a root-only buffer
! elsewhere are no buffers), and with PTSC_STAGING=always to have staged
! at least half of them; =no requires it to be absent. The interposer is
! found with dlsym, so the program needs no ptsc at link time.
!
! Prints "PASSED f_interpose" on rank 0 when every rank passed.
program f_interpose
#if defined(F_F08)
  use mpi_f08
#elif defined(F_USE_MPI)
  use mpi
#endif
  use, intrinsic :: iso_c_binding
  implicit none
#if defined(F_MPIFH)
  include 'mpif.h'
#endif
#if defined(F_F08)
#define REQ type(MPI_Request)
#define STS type(MPI_Status)
#define STS_DIM
#else
#define REQ integer
#define STS integer
#define STS_DIM (MPI_STATUS_SIZE)
#endif
  integer, parameter :: n = 64
  integer :: rank, size, ierr, next, prev, failed, all_failed, k, i, got, idx, outcount, provided
  integer(c_long) :: expect_bufs
  integer :: sb(n)
  ! Written by MPI after the call that names them (non-blocking, persistent):
  ! volatile, so the compiler reads them again after the completion call.
  integer, volatile :: rb(n), big(2 * n), rep(n), rbs(n, 4)
  integer :: indices(4)
  double precision :: x(n)
  double precision, volatile :: y(n)
  logical :: flag
  REQ :: rq(4), preq(2)
  STS :: st STS_DIM
#if defined(F_F08)
  type(MPI_Status) :: sts(4)
  type(MPI_Message) :: msg
#else
  integer :: sts(MPI_STATUS_SIZE, 4)
  integer :: msg
#endif
  integer, allocatable :: gat(:), a2a_s(:), cnts(:), dsps(:)
  ! The truncation case: a message far longer than its receive.
  integer, parameter :: nlong = 262144
  integer, allocatable :: tlong(:)
  integer :: tshort(8), tcls, terr
  character(16) :: tstaging
#if defined(F_F08)
  type(MPI_Comm) :: tcomm
#else
  integer :: tcomm
#endif
  ! MPICH 4.0's mpi_f08 returns the indices of Waitany, Testany, Waitsome
  ! and Testsome from 0 (pmodels/mpich#6270, fixed in 4.1): CMake sets
  ! F_INDEX_FIX=1 there, and the indices are checked shifted.
#if defined(F_INDEX_FIX)
  integer, parameter :: index_fix = F_INDEX_FIX
#else
  integer, parameter :: index_fix = 0
#endif
  integer, allocatable, volatile :: a2a_r(:)

  interface
    function dlsym(handle, name) bind(C, name='dlsym')
      import :: c_ptr, c_funptr, c_char
      type(c_ptr), value :: handle
      character(kind=c_char), intent(in) :: name(*)
      type(c_funptr) :: dlsym
    end function dlsym
    function query_t(calls, synced, failed, staged) bind(C)
      import :: c_long, c_int
      integer(c_long), intent(out) :: calls, synced, failed, staged
      integer(c_int) :: query_t
    end function query_t
  end interface

  failed = 0
  expect_bufs = 0
  call MPI_Init_thread(MPI_THREAD_SINGLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  if (size < 2) then
    if (rank == 0) write (*, '(a)') 'f_interpose: FAIL: run it on 2 or more ranks'
    call MPI_Finalize(ierr)
    stop 1
  end if
  next = mod(rank + 1, size)
  prev = mod(rank - 1 + size, size)
  do k = 1, n
    sb(k) = val(rank, next, k)
  end do

  ! Send / Recv around the ring (even ranks send first).
  rb = 0
  expect_bufs = expect_bufs + 2
  if (mod(rank, 2) == 0) then
    call MPI_Send(sb, n, MPI_INTEGER, next, 1, MPI_COMM_WORLD, ierr)
    call ok(ierr, 'Send')
    call MPI_Recv(rb, n, MPI_INTEGER, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call ok(ierr, 'Recv')
  else
    call MPI_Recv(rb, n, MPI_INTEGER, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call ok(ierr, 'Recv')
    call MPI_Send(sb, n, MPI_INTEGER, next, 1, MPI_COMM_WORLD, ierr)
    call ok(ierr, 'Send')
  end if
  call check_ring(rb, 'Send/Recv')

  ! Isend / Irecv with a receive larger than the message, Wait with a status.
  big = 0
  expect_bufs = expect_bufs + 2
  call MPI_Irecv(big, 2 * n, MPI_INTEGER, prev, 2, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Isend(sb, n, MPI_INTEGER, next, 2, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Wait(rq(1), st, ierr)
  call ok(ierr, 'Wait')
  call MPI_Wait(rq(2), MPI_STATUS_IGNORE, ierr)
  got = -1
  call MPI_Get_count(st, MPI_INTEGER, got, ierr)
  call check(got == n .and. big(n) == val(prev, rank, n) .and. big(n + 1) == 0, 'Isend/Irecv count')

  ! Irecv / Issend, Waitall.
  rb = 0
  expect_bufs = expect_bufs + 2
  call MPI_Irecv(rb, n, MPI_INTEGER, prev, 3, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Issend(sb, n, MPI_INTEGER, next, 3, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Waitall(2, rq, sts, ierr)
  call ok(ierr, 'Waitall')
  call check_ring(rb, 'Issend/Waitall')

  ! Sendrecv and Sendrecv_replace.
  rb = 0
  expect_bufs = expect_bufs + 2
  call MPI_Sendrecv(sb, n, MPI_INTEGER, next, 4, rb, n, MPI_INTEGER, prev, 4, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
  call ok(ierr, 'Sendrecv')
  call check_ring(rb, 'Sendrecv')
  rep = sb
  expect_bufs = expect_bufs + 1
  call MPI_Sendrecv_replace(rep, n, MPI_INTEGER, next, 5, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call check_ring(rep, 'Sendrecv_replace')

  ! Matched probe and receive, blocking and non-blocking.
  rb = 0
  expect_bufs = expect_bufs + 2
  call MPI_Isend(sb, n, MPI_INTEGER, next, 6, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Mprobe(prev, 6, MPI_COMM_WORLD, msg, st, ierr)
  call MPI_Mrecv(rb, n, MPI_INTEGER, msg, MPI_STATUS_IGNORE, ierr)
  call ok(ierr, 'Mrecv')
  call MPI_Wait(rq(2), MPI_STATUS_IGNORE, ierr)
  call check_ring(rb, 'Mrecv')
  rb = 0
  expect_bufs = expect_bufs + 2
  call MPI_Isend(sb, n, MPI_INTEGER, next, 7, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Mprobe(prev, 7, MPI_COMM_WORLD, msg, st, ierr)
  call MPI_Imrecv(rb, n, MPI_INTEGER, msg, rq(1), ierr)
  call MPI_Waitall(2, rq, sts, ierr)
  call check_ring(rb, 'Imrecv')

  ! Four receives completed by Waitany, Waitsome, Testany and Testall. The
  ! messages of receives 2 and 4 are sent only after every rank's Waitany
  ! and Waitsome returned (a barrier), so those two are still running there: a wrapper that took
  ! a wrong index for a completed one would settle a running receive
  ! early (and its data would never come back).
  rbs = 0
  do i = 1, 4
    expect_bufs = expect_bufs + 1
    call MPI_Irecv(rbs(:, i), n, MPI_INTEGER, prev, 10 + i, MPI_COMM_WORLD, rq(i), ierr)
  end do
  do i = 1, 3, 2
    expect_bufs = expect_bufs + 1
    call MPI_Send(sb, n, MPI_INTEGER, next, 10 + i, MPI_COMM_WORLD, ierr)
  end do
  call MPI_Waitany(4, rq, idx, st, ierr)
  idx = idx + index_fix
  call check(idx == 1 .or. idx == 3, 'Waitany index')
  call MPI_Waitsome(4, rq, outcount, indices, sts, ierr)
  call check(outcount == 1 .and. indices(1) + index_fix == 4 - idx, 'Waitsome indices')
  ! Messages 2 and 4 leave only when every rank is past its Waitsome.
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  do i = 2, 4, 2
    expect_bufs = expect_bufs + 1
    call MPI_Send(sb, n, MPI_INTEGER, next, 10 + i, MPI_COMM_WORLD, ierr)
  end do
  flag = .false.
  do while (.not. flag)
    call MPI_Testany(4, rq, idx, flag, st, ierr)
  end do
  idx = idx + index_fix
  call check(idx == 2 .or. idx == 4, 'Testany index')
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(4, rq, flag, sts, ierr)
  end do
  do i = 1, 4
    call check_ring(rbs(:, i), 'completion calls')
  end do
  rb = 0
  call MPI_Irecv(rb, n, MPI_INTEGER, prev, 20, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Send(sb, n, MPI_INTEGER, next, 20, MPI_COMM_WORLD, ierr)
  expect_bufs = expect_bufs + 2
  flag = .false.
  do while (.not. flag)
    call MPI_Test(rq(1), flag, MPI_STATUS_IGNORE, ierr)
  end do
  call check_ring(rb, 'Test')
  indices = 0
  rbs = 0
  call MPI_Irecv(rbs(:, 1), n, MPI_INTEGER, prev, 21, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Send(sb, n, MPI_INTEGER, next, 21, MPI_COMM_WORLD, ierr)
  expect_bufs = expect_bufs + 2
  outcount = 0
  do while (outcount == 0)
    call MPI_Testsome(1, rq, outcount, indices, sts, ierr)
  end do
  call check_ring(rbs(:, 1), 'Testsome')

  ! Persistent requests, started twice with new data; a freed send.
  expect_bufs = expect_bufs + 2
  call MPI_Recv_init(rb, n, MPI_INTEGER, prev, 30, MPI_COMM_WORLD, preq(1), ierr)
  call MPI_Send_init(rep, n, MPI_INTEGER, next, 30, MPI_COMM_WORLD, preq(2), ierr)
  do i = 1, 2
    rb = 0
    rep = sb + i
    if (i == 1) then
      call MPI_Start(preq(1), ierr)
      call MPI_Start(preq(2), ierr)
    else
      call MPI_Startall(2, preq, ierr)
    end if
    call MPI_Waitall(2, preq, sts, ierr)
    call check(all(rb == [(val(prev, rank, k) + i, k = 1, n)]), 'persistent')
  end do
  call MPI_Request_free(preq(1), ierr)
  call MPI_Request_free(preq(2), ierr)
  expect_bufs = expect_bufs + 2
  rb = 0
  call MPI_Irecv(rb, n, MPI_INTEGER, prev, 31, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Isend(sb, n, MPI_INTEGER, next, 31, MPI_COMM_WORLD, rq(2), ierr)
  call MPI_Request_free(rq(2), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call check_ring(rb, 'freed Isend')

  ! Collectives.
  x = [(dble(rank * 100 + k), k = 1, n)]
  y = 0
  expect_bufs = expect_bufs + 2
  call MPI_Allreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call ok(ierr, 'Allreduce')
  call check(all(y == [(dble(100 * size * (size - 1) / 2 + size * k), k = 1, n)]), 'Allreduce')
  y = x
  expect_bufs = expect_bufs + 1 ! MPI_IN_PLACE is not a buffer
  call MPI_Allreduce(MPI_IN_PLACE, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(all(y == [(dble(100 * size * (size - 1) / 2 + size * k), k = 1, n)]), 'Allreduce in place')
  y = 0
  expect_bufs = expect_bufs + 2
  call MPI_Iallreduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call check(all(y == [(dble(100 * (size - 1) + k), k = 1, n)]), 'Iallreduce')
  rb = 0
  if (rank == 0) rb = sb
  expect_bufs = expect_bufs + 1
  call MPI_Bcast(rb, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(all(rb == [(val(0, 1, k), k = 1, n)]), 'Bcast')
  rb = 0
  if (rank == 1) rb = sb
  expect_bufs = expect_bufs + 1
  call MPI_Ibcast(rb, n, MPI_INTEGER, 1, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  call check(all(rb == [(val(1, mod(2, size), k), k = 1, n)]), 'Ibcast')
  y = 0
  expect_bufs = expect_bufs + merge(2, 1, rank == 0)
  call MPI_Reduce(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(all(y == [(dble(100 * size * (size - 1) / 2 + size * k), k = 1, n)]), 'Reduce')
  y = 0
  expect_bufs = expect_bufs + 2
  call MPI_Scan(x, y, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(all(y == [(dble(100 * rank * (rank + 1) / 2 + (rank + 1) * k), k = 1, n)]), 'Scan')
  allocate (gat(n * size), a2a_s(n * size), a2a_r(n * size), cnts(size), dsps(size))
  gat = 0
  expect_bufs = expect_bufs + 2
  call MPI_Allgather(sb, n, MPI_INTEGER, gat, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 0, size - 1
    call check(gat(i * n + 1) == val(i, mod(i + 1, size), 1) .and. gat(i * n + n) == val(i, mod(i + 1, size), n), &
               'Allgather')
  end do
  gat = 0
  expect_bufs = expect_bufs + merge(2, 1, rank == 0)
  call MPI_Gather(sb, n, MPI_INTEGER, gat, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(gat(n * size) == val(size - 1, 0, n), 'Gather')
  do i = 0, size - 1
    a2a_s(i * n + 1:i * n + n) = [(val(rank, i, k), k = 1, n)]
  end do
  a2a_r = 0
  expect_bufs = expect_bufs + 2
  call MPI_Alltoall(a2a_s, n, MPI_INTEGER, a2a_r, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 0, size - 1
    call check(all(a2a_r(i * n + 1:i * n + n) == [(val(i, rank, k), k = 1, n)]), 'Alltoall')
  end do
  rb = 0
  expect_bufs = expect_bufs + merge(2, 1, rank == 0)
  call MPI_Scatter(a2a_s, n, MPI_INTEGER, rb, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(all(rb == [(val(0, rank, k), k = 1, n)]), 'Scatter')
  a2a_r = 0
  expect_bufs = expect_bufs + 2
  call MPI_Ialltoall(a2a_s, n, MPI_INTEGER, a2a_r, n, MPI_INTEGER, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  do i = 0, size - 1
    call check(all(a2a_r(i * n + 1:i * n + n) == [(val(i, rank, k), k = 1, n)]), 'Ialltoall')
  end do
  rb = 0
  expect_bufs = expect_bufs + 2
  call MPI_Reduce_scatter_block(a2a_s, rb, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(all(rb == [(sum([(val(i, rank, k), i = 0, size - 1)]), k = 1, n)]), 'Reduce_scatter_block')

  ! The v forms and Reduce_scatter: n elements per rank, blocks at i * n.
  cnts = n
  dsps = [(i * n, i = 0, size - 1)]
  gat = 0
  expect_bufs = expect_bufs + 2
  call MPI_Allgatherv(sb, n, MPI_INTEGER, gat, cnts, dsps, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 0, size - 1
    call check(gat(i * n + n) == val(i, mod(i + 1, size), n), 'Allgatherv')
  end do
  gat = 0
  expect_bufs = expect_bufs + 2
  call MPI_Iallgatherv(sb, n, MPI_INTEGER, gat, cnts, dsps, MPI_INTEGER, MPI_COMM_WORLD, rq(1), ierr)
  call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
  do i = 0, size - 1
    call check(gat(i * n + 1) == val(i, mod(i + 1, size), 1), 'Iallgatherv')
  end do
  gat = 0
  expect_bufs = expect_bufs + merge(2, 1, rank == 0)
  call MPI_Gatherv(sb, n, MPI_INTEGER, gat, cnts, dsps, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) call check(gat(n * size) == val(size - 1, 0, n), 'Gatherv')
  rb = 0
  expect_bufs = expect_bufs + merge(2, 1, rank == 0)
  call MPI_Scatterv(a2a_s, cnts, dsps, MPI_INTEGER, rb, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call check(all(rb == [(val(0, rank, k), k = 1, n)]), 'Scatterv')
  a2a_r = 0
  expect_bufs = expect_bufs + 2
  call MPI_Alltoallv(a2a_s, cnts, dsps, MPI_INTEGER, a2a_r, cnts, dsps, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 0, size - 1
    call check(all(a2a_r(i * n + 1:i * n + n) == [(val(i, rank, k), k = 1, n)]), 'Alltoallv')
  end do
  rb = 0
  expect_bufs = expect_bufs + 2
  call MPI_Reduce_scatter(a2a_s, rb, cnts, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(all(rb == [(sum([(val(i, rank, k), i = 0, size - 1)]), k = 1, n)]), 'Reduce_scatter')

  ! A message far longer than its receive (1 MiB into 4 integers) on a
  ! communicator whose errors return: MPI_ERR_TRUNCATE, nothing written
  ! past the 4 elements, and the next message arrives intact. Staged only:
  ! Open MPI 4.1 itself writes a longer contiguous message past a
  ! contiguous receive buffer (in plain MPI this corrupts the program), and
  ! a staged receive's host copy must not take that overflow.
  tstaging = ''
  call get_environment_variable('PTSC_STAGING', tstaging)
  if (tstaging == 'always') then
    call MPI_Comm_dup(MPI_COMM_WORLD, tcomm, ierr)
    call MPI_Comm_set_errhandler(tcomm, MPI_ERRORS_RETURN, ierr)
    allocate (tlong(nlong))
    tlong = 7
    tshort = -1
    expect_bufs = expect_bufs + 2
    call MPI_Isend(tlong, nlong, MPI_INTEGER, next, 20, tcomm, rq(1), ierr)
    call MPI_Recv(tshort, 4, MPI_INTEGER, prev, 20, tcomm, MPI_STATUS_IGNORE, terr)
    tcls = MPI_SUCCESS
    if (terr /= MPI_SUCCESS) call MPI_Error_class(terr, tcls, ierr)
    call check(tcls == MPI_ERR_TRUNCATE, 'truncated Recv: MPI_ERR_TRUNCATE')
    call check(all(tshort(5:8) == -1), 'truncated Recv: nothing past its 4 elements')
    call MPI_Wait(rq(1), MPI_STATUS_IGNORE, ierr)
    call ok(ierr, 'Isend of the long message')
    tshort = -1
    expect_bufs = expect_bufs + 2
    call MPI_Sendrecv(sb, 4, MPI_INTEGER, next, 21, tshort, 4, MPI_INTEGER, prev, 21, tcomm, &
                      MPI_STATUS_IGNORE, ierr)
    call ok(ierr, 'Sendrecv after the truncation')
    call check(all(tshort(1:4) == [(val(prev, rank, k), k = 1, 4)]) .and. all(tshort(5:8) == -1), &
               'Sendrecv after the truncation')
    deallocate (tlong)
    call MPI_Comm_free(tcomm, ierr)
  end if

  call verdict()

contains

  integer function val(from, to, k)
    integer, intent(in) :: from, to, k
    val = from * 1000000 + to * 1000 + k
  end function val

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write (*, '(a,i0,a,a)') 'f_interpose [rank ', rank, '] FAIL: ', what
      failed = failed + 1
    end if
  end subroutine check

  subroutine ok(code, what)
    integer, intent(in) :: code
    character(*), intent(in) :: what
    call check(code == MPI_SUCCESS, what//' returned an error')
  end subroutine ok

  subroutine check_ring(buf, what)
    integer, intent(in) :: buf(:)
    character(*), intent(in) :: what
    integer :: j
    do j = 1, n
      if (buf(j) /= val(prev, rank, j)) then
        call check(.false., what)
        return
      end if
    end do
  end subroutine check_ring

  ! The interposer as MPI_INTERPOSE_EXPECT says, then the verdict.
  subroutine verdict()
    character(16) :: want, staging
    type(c_funptr) :: fp
    procedure(query_t), pointer :: query
    integer(c_long) :: seen, synced, bad, staged
    integer :: active
    want = ''
    staging = ''
    call get_environment_variable('MPI_INTERPOSE_EXPECT', want)
    call get_environment_variable('PTSC_STAGING', staging)
    fp = dlsym(c_null_ptr, 'ptsc_mpi_interposer'//c_null_char) ! RTLD_DEFAULT is NULL in glibc
    if (want == 'yes') then
      call check(c_associated(fp), 'libptsc-mpi is not loaded')
      if (c_associated(fp)) then
        call c_f_procpointer(fp, query)
        active = query(seen, synced, bad, staged)
        call check(active == 1, 'libptsc-mpi loaded but not active')
        if (seen /= expect_bufs) then
          write (*, '(a,i0,a,i0,a,i0)') 'f_interpose [rank ', rank, '] FAIL: libptsc-mpi saw ', seen, &
            ' buffer arguments, the program passed ', expect_bufs
          failed = failed + 1
        end if
        call check(synced == 0 .and. bad == 0, 'host buffers synced or failed')
        if (staging == 'always') then
          call check(staged >= expect_bufs / 2, 'too few buffers staged')
        else
          call check(staged == 0, 'buffers staged with staging off')
        end if
        if (rank == 0) write (*, '(a,i0,a,i0,a,i0,a)') 'f_interpose: interposer active, ', seen, ' of ', &
          expect_bufs, ' buffer arguments seen, ', staged, ' staged'
      end if
    else if (want == 'no') then
      call check(.not. c_associated(fp), 'libptsc-mpi is loaded but should not be')
    else
      call check(.false., 'set MPI_INTERPOSE_EXPECT to yes or no')
    end if
    ! After the query: not counted.
    call MPI_Allreduce(failed, all_failed, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (rank == 0) then
      if (all_failed == 0) then
        write (*, '(a)') 'PASSED f_interpose'
      else
        write (*, '(a,i0,a)') 'f_interpose: ', all_failed, ' failed checks'
      end if
    end if
    call MPI_Finalize(ierr)
    if (all_failed /= 0) stop 1
  end subroutine verdict

end program f_interpose
