! The Fortran consumer of an installed ptsc (`use ptsc`, ptsc::fortran or
! pkg-config's fflags/flibs): ptsc_init, a ring of ptsc_sendrecv between
! thread 0 of every rank, a lane allreduce, ptsc_finalize. Run under
! mpiexec -n 2; rank 0 prints "consumer_f: ... ring ok".
program consumer_f
  use mpi
  use ptsc
  implicit none
  type(ptsc_ctx) :: ctx
  integer :: rc, rank, nranks, nthreads, from, prev, one(1), total(1), ierr
  logical :: down
  rc = ptsc_init()
  if (rc /= PTSC_OK) call fail('ptsc_init', rc)
  rc = ptsc_rank(rank)
  if (rc == PTSC_OK) rc = ptsc_size(nranks, nthreads)
  if (rc == PTSC_OK) rc = ptsc_thread_attach(0, ctx)
  if (rc /= PTSC_OK) call fail('attach', rc)
  prev = mod(rank + nranks - 1, nranks)
  from = -1
  rc = ptsc_sendrecv(ctx, rank, 1, MPI_INTEGER, mod(rank + 1, nranks), 0, 7, from, 1, MPI_INTEGER, prev, 0, 7)
  if (rc /= PTSC_OK) call fail('ptsc_sendrecv', rc)
  one = 1
  rc = ptsc_allreduce(ctx, one, total, 1, MPI_INTEGER, MPI_SUM)
  if (rc /= PTSC_OK) call fail('ptsc_allreduce', rc)
  if (from /= prev .or. total(1) /= nranks) then
    write (*, '(a,i0,a,i0)') 'consumer_f: FAIL: received ', from, ', allreduce ', total(1)
    stop 1
  end if
  if (rank == 0) write (*, '(a,a,a,i0,a)') 'consumer_f: ptsc ', ptsc_version_string(), ', ', nranks, &
    ' ranks, ring ok'
  rc = ptsc_thread_detach()
  rc = ptsc_finalize()
  ! ptsc_finalize finalizes MPI where ptsc_init initialised it.
  call MPI_Finalized(down, ierr)
  if (.not. down) call MPI_Finalize(ierr)
contains
  subroutine fail(what, code)
    character(*), intent(in) :: what
    integer, intent(in) :: code
    write (*, '(a,a,a,a,a,a)') 'consumer_f: FAIL: ', what, ': ', ptsc_status_name(code), ': ', ptsc_last_error()
    stop 1
  end subroutine fail
end program consumer_f
