! Device buffers from a Fortran MPI program through libptsc-mpi's Fortran
! entry points (src/interpose_fortran.c), run under ptsc-run with
! PTSC_STAGING=always: cudaMalloc'd memory (bind(C), c_f_pointer) filled
! from the host, sent with MPI_Send / MPI_Recv, MPI_Isend / MPI_Irecv +
! MPI_Waitall and reduced with MPI_Allreduce; every received element is
! copied back to the host and checked, and the interposer must have seen
! and staged every device buffer the program passed (an MPI that is not
! CUDA-aware would otherwise read device memory on the host). Exits 77
! (SKIP) before MPI with the reason when there is no CUDA device.
! Prints "PASSED f_gpu_interpose" on rank 0.
program f_gpu_interpose
  use mpi
  use, intrinsic :: iso_c_binding
  implicit none
  integer, parameter :: n = 4096
  integer(c_int), parameter :: h2d = 1, d2h = 2 ! cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost
  real(c_double), pointer, contiguous :: ds(:), dr(:), dsum(:)
  real(c_double), allocatable, target :: h(:)
  type(c_ptr) :: ps, pr, psum
  integer(c_int) :: ndev, e
  integer :: rank, size, ierr, k, peer, failed, all_failed, reqs(2), provided
  integer(c_long) :: expect_bufs, seen, synced, bad, staged
  type(c_funptr) :: fp
  interface
    function cudaGetDeviceCount(n) bind(C, name='cudaGetDeviceCount')
      import :: c_int
      integer(c_int), intent(out) :: n
      integer(c_int) :: cudaGetDeviceCount
    end function cudaGetDeviceCount
    function cudaMalloc(p, bytes) bind(C, name='cudaMalloc')
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), intent(out) :: p
      integer(c_size_t), value :: bytes
      integer(c_int) :: cudaMalloc
    end function cudaMalloc
    function cudaFree(p) bind(C, name='cudaFree')
      import :: c_ptr, c_int
      type(c_ptr), value :: p
      integer(c_int) :: cudaFree
    end function cudaFree
    function cudaMemcpy(dst, src, bytes, kind) bind(C, name='cudaMemcpy')
      import :: c_ptr, c_size_t, c_int
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: bytes
      integer(c_int), value :: kind
      integer(c_int) :: cudaMemcpy
    end function cudaMemcpy
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
  procedure(query_t), pointer :: query

  ! Before MPI: skip where there is no device.
  ndev = 0
  e = cudaGetDeviceCount(ndev)
  if (e /= 0 .or. ndev == 0) then
    write (*, '(a,i0,a,i0,a)') 'SKIP f_gpu_interpose: no CUDA device (cudaGetDeviceCount: error ', e, ', ', &
      ndev, ' devices)'
    stop 77
  end if

  failed = 0
  expect_bufs = 0
  call MPI_Init_thread(MPI_THREAD_SINGLE, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  if (size /= 2) call stop_with('run it on 2 ranks')
  peer = 1 - rank
  call dev_alloc(ps, ds)
  call dev_alloc(pr, dr)
  call dev_alloc(psum, dsum)
  allocate (h(n))

  ! Blocking: rank 0 sends, rank 1 receives.
  h = [(dble(rank) * 1.0d5 + k, k = 1, n)]
  call to_dev(ps, h)
  h = -1
  call to_dev(pr, h)
  expect_bufs = expect_bufs + 1
  if (rank == 0) then
    call MPI_Send(ds, n, MPI_DOUBLE_PRECISION, 1, 1, MPI_COMM_WORLD, ierr)
  else
    call MPI_Recv(dr, n, MPI_DOUBLE_PRECISION, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call from_dev(pr, h)
    call check(all(h == [(1.0d0 * k, k = 1, n)]), 'MPI_Send/MPI_Recv of device memory')
  end if

  ! Non-blocking both ways, completed by Waitall.
  h = -1
  call to_dev(pr, h)
  expect_bufs = expect_bufs + 2
  call MPI_Irecv(dr, n, MPI_DOUBLE_PRECISION, peer, 2, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(ds, n, MPI_DOUBLE_PRECISION, peer, 2, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call from_dev(pr, h)
  call check(all(h == [(dble(peer) * 1.0d5 + k, k = 1, n)]), 'MPI_Isend/MPI_Irecv of device memory')

  ! A reduction of device buffers.
  expect_bufs = expect_bufs + 2
  call MPI_Allreduce(ds, dsum, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call from_dev(psum, h)
  call check(all(h == [(1.0d5 + 2.0d0 * k, k = 1, n)]), 'MPI_Allreduce of device memory')

  ! The interposer saw and staged every device buffer.
  fp = dlsym(c_null_ptr, 'ptsc_mpi_interposer'//c_null_char)
  if (.not. c_associated(fp)) then
    call check(.false., 'libptsc-mpi is not loaded (run under ptsc-run)')
  else
    call c_f_procpointer(fp, query)
    e = query(seen, synced, bad, staged)
    if (seen /= expect_bufs .or. staged /= expect_bufs .or. bad /= 0) then
      write (*, '(a,i0,a,4(i0,a))') 'f_gpu_interpose [rank ', rank, '] FAIL: interposer saw ', seen, &
        ', staged ', staged, ', failed ', bad, ' of ', expect_bufs, ' device buffers'
      failed = failed + 1
    end if
  end if

  e = cudaFree(ps)
  e = cudaFree(pr)
  e = cudaFree(psum)
  call MPI_Allreduce(failed, all_failed, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (all_failed == 0) then
      write (*, '(a,i0,a)') 'PASSED f_gpu_interpose (', expect_bufs, ' device buffers staged per rank)'
    else
      write (*, '(a,i0,a)') 'f_gpu_interpose: ', all_failed, ' failed checks'
    end if
  end if
  call MPI_Finalize(ierr)
  if (all_failed /= 0) stop 1

contains

  subroutine dev_alloc(p, a)
    type(c_ptr), intent(out) :: p
    real(c_double), pointer, contiguous, intent(out) :: a(:)
    if (cudaMalloc(p, int(n, c_size_t) * 8_c_size_t) /= 0) call stop_with('cudaMalloc failed')
    call c_f_pointer(p, a, [n])
  end subroutine dev_alloc

  subroutine to_dev(p, x)
    type(c_ptr), intent(in) :: p
    real(c_double), target, intent(in) :: x(:)
    if (cudaMemcpy(p, c_loc(x), int(n, c_size_t) * 8_c_size_t, h2d) /= 0) call stop_with('cudaMemcpy to device')
  end subroutine to_dev

  subroutine from_dev(p, x)
    type(c_ptr), intent(in) :: p
    real(c_double), target, intent(inout) :: x(:)
    if (cudaMemcpy(c_loc(x), p, int(n, c_size_t) * 8_c_size_t, d2h) /= 0) call stop_with('cudaMemcpy to host')
  end subroutine from_dev

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write (*, '(a,i0,a,a)') 'f_gpu_interpose [rank ', rank, '] FAIL: ', what
      failed = failed + 1
    end if
  end subroutine check

  subroutine stop_with(what)
    character(*), intent(in) :: what
    write (*, '(a,a)') 'f_gpu_interpose FAIL: ', what
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end subroutine stop_with

end program f_gpu_interpose
