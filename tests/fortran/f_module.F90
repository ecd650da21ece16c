! The module's calls at work (`use ptsc` with `use mpi`): 2 ranks x 2
! OpenMP threads under ptsc_omp_run, each thread on its lane: sendrecv and
! isend/irecv + test/wait/waitall with its peer thread, the blocking lane
! collectives (barrier, bcast, reduce, allreduce, scan, exscan,
! reduce_scatter_block, allgather, alltoall, gather, scatter and the v
! forms) and the world ones (barrier, bcast, reduce, allreduce,
! allgather), every result checked against its closed form. Prints
! "PASSED f_module" on rank 0.
module f_module_body
  use ptsc
  use, intrinsic :: iso_c_binding
  implicit none
  integer, parameter :: n = 8, nthr = 2
  integer :: me, nranks, tint, tdbl, op_sum, op_max
  integer :: failures = 0
contains
  subroutine check(cond, t, what)
    logical, intent(in) :: cond
    integer, intent(in) :: t
    character(*), intent(in) :: what
    if (.not. cond) then
      !$omp critical (f_module_out)
      write (*, '(a,i0,a,i0,a,a)') 'f_module FAIL [rank ', me, ' thread ', t, ']: ', what
      failures = failures + 1
      !$omp end critical (f_module_out)
    end if
  end subroutine check

  subroutine ok(rc, t, what)
    integer(c_int), intent(in) :: rc
    integer, intent(in) :: t
    character(*), intent(in) :: what
    if (rc /= PTSC_OK) call check(.false., t, what//': '//ptsc_status_name(rc)//': '//ptsc_last_error())
  end subroutine ok

  integer(c_int) function body(ctx, arg) bind(C)
    type(ptsc_ctx), value :: ctx
    type(c_ptr), value :: arg
    integer, target :: a(n), b(n), g(n * 4), cnt(4), dsp(4), cnt2(4), dsp2(4)
    double precision, target :: x(1), y(1)
    type(ptsc_request) :: reqs(2)
    logical :: done
    integer :: t, k, r, next, prev, idx, scope, old, comm, nr, nt
    body = PTSC_OK
    call ok(ptsc_ctx_index(ctx, t), -1, 'ptsc_ctx_index')
    call ok(ptsc_self(ctx), t, 'ptsc_self')
    call ok(ptsc_ctx_comm(ctx, comm), t, 'ptsc_ctx_comm')
    call ok(ptsc_ctx_scope(ctx, scope), t, 'ptsc_ctx_scope')
    call ok(ptsc_ctx_set_scope(ctx, PTSC_SCOPE_NONE, old), t, 'ptsc_ctx_set_scope')
    call check(old == scope, t, 'ptsc_ctx_set_scope: old scope')
    call ok(ptsc_ctx_set_scope(ctx, old, scope), t, 'ptsc_ctx_set_scope back')
    call ok(ptsc_sync(ctx, PTSC_SCOPE_DEFAULT), t, 'ptsc_sync')
    call ok(ptsc_size(nr, nt), t, 'ptsc_size')
    next = mod(me + 1, nranks)
    prev = mod(me - 1 + nranks, nranks)

    ! Point-to-point with the peer thread of the neighbour ranks.
    a = [(me * 100 + t * 10 + k, k = 1, n)]
    b = 0
    call ok(ptsc_sendrecv(ctx, a, n, tint, next, t, 1, b, n, tint, prev, t, 1), t, 'ptsc_sendrecv')
    call check(all(b == [(prev * 100 + t * 10 + k, k = 1, n)]), t, 'ptsc_sendrecv data')
    b = 0
    call ok(ptsc_irecv(ctx, b, n, tint, prev, t, 2, reqs(1)), t, 'ptsc_irecv')
    call ok(ptsc_isend(ctx, a, n, tint, next, t, 2, reqs(2)), t, 'ptsc_isend')
    done = .false.
    do while (.not. done)
      call ok(ptsc_test(reqs(1), done), t, 'ptsc_test')
    end do
    call ok(ptsc_wait(reqs(2)), t, 'ptsc_wait')
    call check(all(b == [(prev * 100 + t * 10 + k, k = 1, n)]), t, 'ptsc_isend/irecv data')
    b = 0
    call ok(ptsc_irecv(ctx, b, n, tint, prev, t, 3, reqs(1)), t, 'ptsc_irecv')
    call ok(ptsc_isend(ctx, a, n, tint, next, t, 3, reqs(2)), t, 'ptsc_isend')
    call ok(ptsc_waitall(reqs), t, 'ptsc_waitall')
    call check(all(b == [(prev * 100 + t * 10 + k, k = 1, n)]), t, 'ptsc_waitall data')
    call ok(ptsc_send(ctx, a, n, tint, next, t, 4), t, 'ptsc_send')
    call ok(ptsc_recv(ctx, b, n, tint, prev, t, 4), t, 'ptsc_recv')
    call check(b(n) == prev * 100 + t * 10 + n, t, 'ptsc_send/recv data')

    ! Lane collectives (thread t of every rank).
    call ok(ptsc_barrier(ctx), t, 'ptsc_barrier')
    b = a
    call ok(ptsc_bcast(ctx, b, n, tint, 1), t, 'ptsc_bcast')
    call check(all(b == [(100 + t * 10 + k, k = 1, n)]), t, 'ptsc_bcast data')
    b = 0
    call ok(ptsc_reduce(ctx, a, b, n, tint, op_sum, 0), t, 'ptsc_reduce')
    if (me == 0) call check(all(b == [(100 * sum([(r, r = 0, nranks - 1)]) + nranks * (t * 10 + k), k = 1, n)]), t, &
                            'ptsc_reduce data')
    b = 0
    call ok(ptsc_allreduce(ctx, a, b, n, tint, op_max), t, 'ptsc_allreduce')
    call check(all(b == [((nranks - 1) * 100 + t * 10 + k, k = 1, n)]), t, 'ptsc_allreduce data')
    b = 0
    call ok(ptsc_scan(ctx, a, b, n, tint, op_sum), t, 'ptsc_scan')
    call check(b(1) == 100 * (me * (me + 1) / 2) + (me + 1) * (t * 10 + 1), t, 'ptsc_scan data')
    b = -1
    call ok(ptsc_exscan(ctx, a, b, n, tint, op_sum), t, 'ptsc_exscan')
    if (me > 0) call check(b(1) == 100 * (me * (me - 1) / 2) + me * (t * 10 + 1), t, 'ptsc_exscan data')
    g = 0
    call ok(ptsc_allgather(ctx, a, n, tint, g, n, tint), t, 'ptsc_allgather')
    call check(all([(g(r * n + 1) == r * 100 + t * 10 + 1, r = 0, nranks - 1)]), t, 'ptsc_allgather data')
    g(1:n * nranks) = [((me * 100 + r * 10 + k, k = 1, n), r = 0, nranks - 1)]
    b = 0
    call ok(ptsc_reduce_scatter_block(ctx, g, b, n, tint, op_sum), t, 'ptsc_reduce_scatter_block')
    call check(b(1) == 100 * sum([(r, r = 0, nranks - 1)]) + nranks * (me * 10 + 1), t, &
               'ptsc_reduce_scatter_block data')
    ! Alltoall of n / nranks elements per rank: block r of rank s is s*100+r.
    k = n / nranks
    do r = 0, nranks - 1
      a(r * k + 1:r * k + k) = me * 100 + r
    end do
    b = 0
    call ok(ptsc_alltoall(ctx, a, k, tint, b, k, tint), t, 'ptsc_alltoall')
    call check(all([(b(r * k + 1) == r * 100 + me, r = 0, nranks - 1)]), t, 'ptsc_alltoall data')
    g = 0
    call ok(ptsc_gather(ctx, a, k, tint, g, k, tint, 0), t, 'ptsc_gather')
    if (me == 0) call check(g(k * (nranks - 1) + 1) == (nranks - 1) * 100, t, 'ptsc_gather data')
    b = 0
    call ok(ptsc_scatter(ctx, a, k, tint, b, k, tint, 0), t, 'ptsc_scatter')
    call check(b(1) == me, t, 'ptsc_scatter data')
    ! v forms: rank r contributes r + 1 elements, packed in rank order.
    cnt(1:nranks) = [(r + 1, r = 0, nranks - 1)]
    dsp(1:nranks) = [(r * (r + 1) / 2, r = 0, nranks - 1)]
    a = me
    g = -1
    call ok(ptsc_allgatherv(ctx, a, me + 1, tint, g, cnt, dsp, tint), t, 'ptsc_allgatherv')
    call check(all([(g(dsp(r + 1) + cnt(r + 1)) == r, r = 0, nranks - 1)]), t, 'ptsc_allgatherv data')
    g = -1
    call ok(ptsc_gatherv(ctx, a, me + 1, tint, g, cnt, dsp, tint, 0), t, 'ptsc_gatherv')
    if (me == 0) call check(g(dsp(nranks) + 1) == nranks - 1, t, 'ptsc_gatherv data')
    g(1:sum(cnt(1:nranks))) = [((r, k = 1, r + 1), r = 0, nranks - 1)]
    b = -1
    call ok(ptsc_scatterv(ctx, g, cnt, dsp, tint, b, me + 1, tint, 0), t, 'ptsc_scatterv')
    call check(all(b(1:me + 1) == me) .and. b(me + 2) == -1, t, 'ptsc_scatterv data')
    ! Alltoallv: one element to each rank, at displacement r.
    cnt2(1:nranks) = 1
    dsp2(1:nranks) = [(r, r = 0, nranks - 1)]
    a(1:nranks) = [(me * 10 + r, r = 0, nranks - 1)]
    b = -1
    call ok(ptsc_alltoallv(ctx, a, cnt2, dsp2, tint, b, cnt2, dsp2, tint), t, 'ptsc_alltoallv')
    call check(all(b(1:nranks) == [(r * 10 + me, r = 0, nranks - 1)]), t, 'ptsc_alltoallv data')

    ! World collectives over every thread of every rank.
    call ok(ptsc_world_barrier(ctx, PTSC_WORLD_TEAM), t, 'ptsc_world_barrier')
    x(1) = dble(me * 10 + t)
    y = 0
    call ok(ptsc_world_allreduce(ctx, PTSC_WORLD_TEAM, x, y, 1, tdbl, op_sum), t, 'ptsc_world_allreduce')
    call check(y(1) == dble(10 * nthr * sum([(r, r = 0, nranks - 1)]) + nranks * sum([(k, k = 0, nthr - 1)])), t, &
               'ptsc_world_allreduce data')
    y = 0
    call ok(ptsc_world_reduce(ctx, PTSC_WORLD_TEAM, x, y, 1, tdbl, op_max, 0, 0), t, 'ptsc_world_reduce')
    if (me == 0 .and. t == 0) call check(y(1) == dble((nranks - 1) * 10 + nthr - 1), t, 'ptsc_world_reduce data')
    idx = me * 10 + t
    if (me == 1 .and. t == 1) idx = 4242
    call ok(ptsc_world_bcast(ctx, PTSC_WORLD_TEAM, idx, 1, tint, 1, 1), t, 'ptsc_world_bcast')
    call check(idx == 4242, t, 'ptsc_world_bcast data')
    g = -1
    idx = me * 10 + t
    call ok(ptsc_world_allgather(ctx, PTSC_WORLD_TEAM, idx, 1, tint, g), t, 'ptsc_world_allgather')
    call check(all([(g(r + 1) == (r / nthr) * 10 + mod(r, nthr), r = 0, nranks * nthr - 1)]), t, &
               'ptsc_world_allgather data')
    if (c_associated(arg)) body = PTSC_ERR_ARG
  end function body
end module f_module_body

program f_module
  use mpi
  use ptsc
  use f_module_body
  implicit none
  integer :: rc, ierr, all_failed
  logical :: flag, down
  rc = ptsc_init()
  if (rc /= PTSC_OK) then
    write (*, '(a,a)') 'f_module FAIL: ptsc_init: ', ptsc_last_error()
    stop 1
  end if
  rc = ptsc_initialized(flag)
  if (.not. flag) failures = failures + 1
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  tint = MPI_INTEGER
  tdbl = MPI_DOUBLE_PRECISION
  op_sum = MPI_SUM
  op_max = MPI_MAX
  rc = ptsc_omp_run(nthr, body)
  if (rc /= PTSC_OK) then
    write (*, '(a,i0,a,a)') 'f_module FAIL [rank ', me, '] ptsc_omp_run: ', ptsc_last_error()
    failures = failures + 1
  end if
  call MPI_Allreduce(failures, all_failed, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (me == 0) then
    if (all_failed == 0) then
      write (*, '(a)') 'PASSED f_module'
    else
      write (*, '(a,i0,a)') 'f_module: ', all_failed, ' failed checks'
    end if
  end if
  rc = ptsc_finalize()
  call MPI_Finalized(down, ierr)
  if (.not. down) call MPI_Finalize(ierr)
  if (all_failed /= 0) stop 1
end program f_module
