! omp_halo: ranks x OpenMP threads exchanging halos through ptsc, in Fortran.
!
! Each thread t of each rank owns a strip of N values (its interior) with a
! halo cell at each end. It sends its edge values to thread t of the next
! and of the previous rank (a ring of ranks; thread t talks to thread t,
! over lane t) with ptsc_isend / ptsc_irecv, waits, and checks the halos
! against what those neighbours hold. Then every thread of every rank adds
! its interior into one checksum (ptsc_world_allreduce), checked against
! its closed form. The threads come from ptsc_omp_run, which attaches each.
!
!   mpiexec -n 2 ./omp_halo [threads, default 4]
!
! Prints "PASSED omp_halo" on rank 0; exits 1 on any failure.
module omp_halo_body
  use ptsc
  use, intrinsic :: iso_c_binding
  implicit none
  private
  public :: body, n, nranks, me, nthreads, dtype, sum_op, failures

  integer, parameter :: n = 1000
  ! Set by the main program before the threads start; read-only after.
  integer :: nranks, me, nthreads, dtype, sum_op
  integer :: failures = 0

contains

  ! The value thread `thread` of rank `rank` holds at interior point i.
  pure double precision function v(rank, thread, i)
    integer, intent(in) :: rank, thread, i
    v = dble(rank) * 1.0d6 + dble(thread) * 1.0d3 + dble(i)
  end function v

  subroutine fail(t, what)
    integer, intent(in) :: t
    character(*), intent(in) :: what
    !$omp critical (omp_halo_out)
    write (*, '(a,i0,a,i0,a,a)') 'omp_halo FAIL [rank ', me, ' thread ', t, ']: ', what
    failures = failures + 1
    !$omp end critical (omp_halo_out)
  end subroutine fail

  ! Run by every thread (ptsc_omp_run): one halo exchange, one checksum.
  integer(c_int) function body(ctx, arg) bind(C)
    type(ptsc_ctx), value :: ctx
    type(c_ptr), value :: arg
    double precision, target, asynchronous :: u(0:n + 1)
    double precision, target :: local(1), total(1)
    double precision :: expect
    type(ptsc_request) :: reqs(4)
    integer :: t, i, next, prev, rc

    body = ptsc_ctx_index(ctx, t)
    if (body /= PTSC_OK) return
    next = mod(me + 1, nranks)
    prev = mod(me - 1 + nranks, nranks)
    u = -1
    do i = 1, n
      u(i) = v(me, t, i)
    end do
    ! The left halo is the previous rank's right edge (tag 1), the right
    ! halo the next rank's left edge (tag 2).
    rc = ptsc_irecv(ctx, u(0:0), 1, dtype, prev, t, 1, reqs(1))
    if (rc == PTSC_OK) rc = ptsc_irecv(ctx, u(n + 1:n + 1), 1, dtype, next, t, 2, reqs(2))
    if (rc == PTSC_OK) rc = ptsc_isend(ctx, u(n:n), 1, dtype, next, t, 1, reqs(3))
    if (rc == PTSC_OK) rc = ptsc_isend(ctx, u(1:1), 1, dtype, prev, t, 2, reqs(4))
    if (rc == PTSC_OK) rc = ptsc_waitall(reqs)
    if (rc /= PTSC_OK) then
      call fail(t, 'halo exchange: '//ptsc_status_name(rc)//': '//ptsc_last_error())
      body = rc
      return
    end if
    if (u(0) /= v(prev, t, n)) call fail(t, 'left halo wrong')
    if (u(n + 1) /= v(next, t, 1)) call fail(t, 'right halo wrong')

    ! One checksum over every thread of every rank (the team of this region).
    local(1) = sum(u(1:n))
    rc = ptsc_world_allreduce(ctx, PTSC_WORLD_TEAM, local, total, 1, dtype, sum_op)
    if (rc /= PTSC_OK) then
      call fail(t, 'world allreduce: '//ptsc_status_name(rc)//': '//ptsc_last_error())
      body = rc
      return
    end if
    expect = dble(n) * nthreads * 1.0d6 * (nranks * (nranks - 1) / 2) &
             + dble(n) * nranks * 1.0d3 * (nthreads * (nthreads - 1) / 2) &
             + dble(nranks) * nthreads * (n * (n + 1) / 2)
    if (total(1) /= expect) call fail(t, 'checksum wrong')
    body = PTSC_OK
    if (c_associated(arg)) body = PTSC_ERR_ARG ! no argument is passed
  end function body

end module omp_halo_body

program omp_halo
  use mpi
  use ptsc
  use omp_halo_body
  implicit none
  integer :: rc, ierr, all_failed, nt, len
  character(16) :: arg
  logical :: down

  rc = ptsc_init()
  if (rc /= PTSC_OK) then
    write (*, '(a,a)') 'omp_halo FAIL: ptsc_init: ', ptsc_last_error()
    stop 1
  end if
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  nthreads = 4
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg, len)
    read (arg, *) nthreads
  end if
  rc = ptsc_size(nranks, nt)
  nthreads = min(nthreads, nt)
  dtype = MPI_DOUBLE_PRECISION
  sum_op = MPI_SUM

  rc = ptsc_omp_run(nthreads, body)
  if (rc /= PTSC_OK) then
    write (*, '(a,i0,a,a)') 'omp_halo FAIL [rank ', me, ']: ', ptsc_last_error()
    failures = failures + 1
  end if
  call MPI_Allreduce(failures, all_failed, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (me == 0) then
    if (all_failed == 0) then
      write (*, '(a,i0,a,i0,a)') 'PASSED omp_halo (', nranks, ' ranks x ', nthreads, ' threads)'
    else
      write (*, '(a,i0,a)') 'omp_halo: ', all_failed, ' failures'
    end if
  end if
  rc = ptsc_finalize()
  call MPI_Finalized(down, ierr)
  if (.not. down) call MPI_Finalize(ierr)
  if (all_failed /= 0) stop 1
end program omp_halo
