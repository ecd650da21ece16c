! The Fortran interface to ptsc (include/ptsc.h): `use ptsc`.
!
! Every call is an integer function returning ptsc's status (PTSC_OK, or a
! negative PTSC_ERR_* code; ptsc_status_string and ptsc_last_error say
! more), as in C. Contexts and requests are the derived types ptsc_ctx and
! ptsc_request (bind(C), one C pointer each). MPI handles (datatypes,
! operations, communicators) are Fortran integers: mpif.h and `use mpi`
! handles as they are, an mpi_f08 handle's %MPI_VAL. Buffers are any type
! and rank (type(*), dimension(..)) and must be contiguous (PTSC_ERR_ARG
! otherwise); a buffer of a non-blocking call must stay in place until its
! completion (give it the ASYNCHRONOUS or TARGET attribute, as for MPI).
! The status codes come from include/ptsc/status.h (ptsc_status.inc is
! generated from it); tests/fortran/f_constants.F90 compares every
! constant with its C value.
!
! Not bound (C only): ptsc_init's argc/argv (ptsc_init here passes none),
! the *_info calls and probes, waitany / testall / testsome, the
! non-blocking collectives, ptsc_ctx_stats, ptsc_ctx_stream, ptsc_mem_class
! and ptsc_config_print.
module ptsc
  use, intrinsic :: iso_c_binding
  implicit none
  private

  include 'ptsc_status.inc'

  integer(c_int), parameter, public :: PTSC_ANY_RANK = -1
  integer(c_int), parameter, public :: PTSC_WORLD_TEAM = 0
  integer(c_int), parameter, public :: PTSC_SCOPE_DEFAULT = -1, PTSC_SCOPE_AUTO = 0, PTSC_SCOPE_NONE = 1, &
                                       PTSC_SCOPE_THREAD = 2, PTSC_SCOPE_GLOBAL = 3, PTSC_SCOPE_DEVICE = 4
  integer(c_int), parameter, public :: PTSC_MEM_DEVICE = 0, PTSC_MEM_MANAGED = 1, PTSC_MEM_PINNED = 2, &
                                       PTSC_MEM_HOST = 3
  ! MPI_UNDEFINED of the MPI ptsc was built with (configured).
  integer(c_int), parameter, public :: PTSC_UNDEFINED = PTSC_F_MPI_UNDEFINED

  !> A thread's context (ptsc_ctx_t *); null until attached.
  type, bind(C), public :: ptsc_ctx
    type(c_ptr) :: p = c_null_ptr
  end type ptsc_ctx
  !> A non-blocking operation (ptsc_request_t); null when none or done.
  type, bind(C), public :: ptsc_request
    type(c_ptr) :: p = c_null_ptr
  end type ptsc_request

  !> The body ptsc_omp_run calls on each thread: return PTSC_OK or an error.
  abstract interface
    function ptsc_thread_fn(ctx, arg) bind(C)
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: arg
      integer(c_int) :: ptsc_thread_fn
    end function ptsc_thread_fn
  end interface
  public :: ptsc_thread_fn

  public :: ptsc_init, ptsc_finalize, ptsc_initialized, ptsc_rank, ptsc_size, ptsc_tag_max, ptsc_status_string, &
            ptsc_status_name, ptsc_last_error, ptsc_version_string
  public :: ptsc_thread_attach, ptsc_omp_attach, ptsc_self, ptsc_thread_detach, ptsc_ctx_index, ptsc_ctx_comm, &
            ptsc_ctx_scope, ptsc_ctx_set_scope, ptsc_sync, ptsc_mem_forget
  public :: ptsc_send, ptsc_recv, ptsc_isend, ptsc_irecv, ptsc_sendrecv, ptsc_wait, ptsc_waitall, ptsc_test, &
            ptsc_cancel, ptsc_request_free
  public :: ptsc_barrier, ptsc_bcast, ptsc_reduce, ptsc_allreduce, ptsc_scan, ptsc_exscan, &
            ptsc_reduce_scatter_block, ptsc_allgather, ptsc_alltoall, ptsc_gather, ptsc_scatter, ptsc_gatherv, &
            ptsc_scatterv, ptsc_allgatherv, ptsc_alltoallv
  public :: ptsc_world_barrier, ptsc_world_bcast, ptsc_world_reduce, ptsc_world_allreduce, ptsc_world_allgather
  public :: ptsc_omp_run

  ! The C calls, by value where C takes values.
  interface
    function c_init(argc, argv) bind(C, name='ptsc_init')
      import :: c_ptr, c_int
      type(c_ptr), value :: argc, argv
      integer(c_int) :: c_init
    end function c_init
    function ptsc_finalize() bind(C, name='ptsc_finalize')
      import :: c_int
      integer(c_int) :: ptsc_finalize
    end function ptsc_finalize
    function c_initialized(flag) bind(C, name='ptsc_initialized')
      import :: c_int
      integer(c_int), intent(out) :: flag
      integer(c_int) :: c_initialized
    end function c_initialized
    function ptsc_rank(rank) bind(C, name='ptsc_rank')
      import :: c_int
      integer(c_int), intent(out) :: rank
      integer(c_int) :: ptsc_rank
    end function ptsc_rank
    function ptsc_size(nranks, nthreads) bind(C, name='ptsc_size')
      import :: c_int
      integer(c_int), intent(out) :: nranks, nthreads
      integer(c_int) :: ptsc_size
    end function ptsc_size
    function ptsc_tag_max(tag_max) bind(C, name='ptsc_tag_max')
      import :: c_int
      integer(c_int), intent(out) :: tag_max
      integer(c_int) :: ptsc_tag_max
    end function ptsc_tag_max
    function c_status_string(status) bind(C, name='ptsc_status_string')
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: c_status_string
    end function c_status_string
    function c_status_name(status) bind(C, name='ptsc_status_name')
      import :: c_int, c_ptr
      integer(c_int), value :: status
      type(c_ptr) :: c_status_name
    end function c_status_name
    function c_last_error() bind(C, name='ptsc_last_error')
      import :: c_ptr
      type(c_ptr) :: c_last_error
    end function c_last_error
    function c_set_error(status, detail) bind(C, name='ptsc_set_error')
      import :: c_int, c_char
      integer(c_int), value :: status
      character(kind=c_char), dimension(*), intent(in) :: detail
      integer(c_int) :: c_set_error
    end function c_set_error
    function c_version_string() bind(C, name='ptsc_version_string')
      import :: c_ptr
      type(c_ptr) :: c_version_string
    end function c_version_string
    function c_strlen(s) bind(C, name='strlen')
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function c_strlen
    function ptsc_thread_attach(index, ctx) bind(C, name='ptsc_thread_attach')
      import :: c_int, ptsc_ctx
      integer(c_int), value :: index
      type(ptsc_ctx), intent(out) :: ctx
      integer(c_int) :: ptsc_thread_attach
    end function ptsc_thread_attach
    function ptsc_omp_attach(ctx) bind(C, name='ptsc_omp_attach')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), intent(out) :: ctx
      integer(c_int) :: ptsc_omp_attach
    end function ptsc_omp_attach
    function ptsc_self(ctx) bind(C, name='ptsc_self')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), intent(out) :: ctx
      integer(c_int) :: ptsc_self
    end function ptsc_self
    function ptsc_thread_detach() bind(C, name='ptsc_thread_detach')
      import :: c_int
      integer(c_int) :: ptsc_thread_detach
    end function ptsc_thread_detach
    function ptsc_ctx_index(ctx, index) bind(C, name='ptsc_ctx_index')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      integer(c_int), intent(out) :: index
      integer(c_int) :: ptsc_ctx_index
    end function ptsc_ctx_index
    function ptsc_ctx_comm(ctx, comm) bind(C, name='ptsc_f_ctx_comm')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      integer(c_int), intent(out) :: comm ! MPI_Fint: a default integer
      integer(c_int) :: ptsc_ctx_comm
    end function ptsc_ctx_comm
    function ptsc_ctx_scope(ctx, scope) bind(C, name='ptsc_ctx_scope')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      integer(c_int), intent(out) :: scope
      integer(c_int) :: ptsc_ctx_scope
    end function ptsc_ctx_scope
    function ptsc_ctx_set_scope(ctx, scope, old) bind(C, name='ptsc_ctx_set_scope')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      integer(c_int), value :: scope
      integer(c_int), intent(out) :: old
      integer(c_int) :: ptsc_ctx_set_scope
    end function ptsc_ctx_set_scope
    function ptsc_sync(ctx, scope) bind(C, name='ptsc_sync')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      integer(c_int), value :: scope
      integer(c_int) :: ptsc_sync
    end function ptsc_sync
    function ptsc_mem_forget() bind(C, name='ptsc_mem_forget')
      import :: c_int
      integer(c_int) :: ptsc_mem_forget
    end function ptsc_mem_forget
    function ptsc_wait(req) bind(C, name='ptsc_wait')
      import :: c_int, ptsc_request
      type(ptsc_request), intent(inout) :: req
      integer(c_int) :: ptsc_wait
    end function ptsc_wait
    function c_waitall(n, reqs) bind(C, name='ptsc_waitall')
      import :: c_int, ptsc_request
      integer(c_int), value :: n
      type(ptsc_request), intent(inout) :: reqs(*)
      integer(c_int) :: c_waitall
    end function c_waitall
    function c_test(req, done) bind(C, name='ptsc_test')
      import :: c_int, ptsc_request
      type(ptsc_request), intent(inout) :: req
      integer(c_int), intent(out) :: done
      integer(c_int) :: c_test
    end function c_test
    function ptsc_cancel(req) bind(C, name='ptsc_cancel')
      import :: c_int, ptsc_request
      type(ptsc_request), intent(inout) :: req
      integer(c_int) :: ptsc_cancel
    end function ptsc_cancel
    function ptsc_request_free(req) bind(C, name='ptsc_request_free')
      import :: c_int, ptsc_request
      type(ptsc_request), intent(inout) :: req
      integer(c_int) :: ptsc_request_free
    end function ptsc_request_free
    function ptsc_barrier(ctx) bind(C, name='ptsc_barrier')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      integer(c_int) :: ptsc_barrier
    end function ptsc_barrier
    function ptsc_world_barrier(ctx, nthreads) bind(C, name='ptsc_world_barrier')
      import :: c_int, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      integer(c_int), value :: nthreads
      integer(c_int) :: ptsc_world_barrier
    end function ptsc_world_barrier
    ! Shims (fortran/ptsc_f.c): Fortran MPI handles, contiguous buffers.
    function f_sendrecv(ctx, sbuf, scount, stype, drank, dthread, stag, rbuf, rcount, rtype, srank, sthread, &
                        rtag) bind(C, name='ptsc_f_sendrecv')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: scount, stype, drank, dthread, stag, rcount, rtype, srank, sthread, rtag
      integer(c_int) :: f_sendrecv
    end function f_sendrecv
    function f_bcast(ctx, buf, count, type, root) bind(C, name='ptsc_f_bcast')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: buf
      integer(c_int), value :: count, type, root
      integer(c_int) :: f_bcast
    end function f_bcast
    function f_reduce(ctx, sbuf, rbuf, count, type, op, root) bind(C, name='ptsc_f_reduce')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: count, type, op, root
      integer(c_int) :: f_reduce
    end function f_reduce
    function f_world_bcast(ctx, nthreads, buf, count, type, root_rank, root_thread) &
      bind(C, name='ptsc_f_world_bcast')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: buf
      integer(c_int), value :: nthreads, count, type, root_rank, root_thread
      integer(c_int) :: f_world_bcast
    end function f_world_bcast
    function f_world_reduce(ctx, nthreads, sbuf, rbuf, count, type, op, root_rank, root_thread) &
      bind(C, name='ptsc_f_world_reduce')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: nthreads, count, type, op, root_rank, root_thread
      integer(c_int) :: f_world_reduce
    end function f_world_reduce
    function f_world_allreduce(ctx, nthreads, sbuf, rbuf, count, type, op) bind(C, name='ptsc_f_world_allreduce')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: nthreads, count, type, op
      integer(c_int) :: f_world_allreduce
    end function f_world_allreduce
    function f_world_allgather(ctx, nthreads, sbuf, count, type, rbuf) bind(C, name='ptsc_f_world_allgather')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: nthreads, count, type
      integer(c_int) :: f_world_allgather
    end function f_world_allgather
    function f_omp_run(nthreads, fn, arg) bind(C, name='ptsc_f_omp_run')
      import :: c_int, c_ptr, c_funptr
      integer(c_int), value :: nthreads
      type(c_funptr), value :: fn
      type(c_ptr), value :: arg
      integer(c_int) :: f_omp_run
    end function f_omp_run
    function f_gatherv(ctx, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root) bind(C, name='ptsc_f_gatherv')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: scount, stype, rtype, root
      integer(c_int), intent(in) :: rcounts(*), displs(*)
      integer(c_int) :: f_gatherv
    end function f_gatherv
    function f_scatterv(ctx, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root) bind(C, name='ptsc_f_scatterv')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), intent(in) :: scounts(*), displs(*)
      integer(c_int), value :: stype, rcount, rtype, root
      integer(c_int) :: f_scatterv
    end function f_scatterv
    function f_allgatherv(ctx, sbuf, scount, stype, rbuf, rcounts, displs, rtype) bind(C, name='ptsc_f_allgatherv')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: scount, stype, rtype
      integer(c_int), intent(in) :: rcounts(*), displs(*)
      integer(c_int) :: f_allgatherv
    end function f_allgatherv
    function f_alltoallv(ctx, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype) bind(C, name='ptsc_f_alltoallv')
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), intent(in) :: scounts(*), sdispls(*), rcounts(*), rdispls(*)
      integer(c_int), value :: stype, rtype
      integer(c_int) :: f_alltoallv
    end function f_alltoallv
  end interface

  ! C calls of the same shape (ptsc_f.c), declared once per shape.
  abstract interface
    function p2p_c(ctx, buf, count, type, rank, thread, tag) bind(C)
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: buf
      integer(c_int), value :: count, type, rank, thread, tag
      integer(c_int) :: p2p_c
    end function p2p_c
    function ip2p_c(ctx, buf, count, type, rank, thread, tag, req) bind(C)
      import :: c_int, c_ptr, ptsc_ctx, ptsc_request
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: buf
      integer(c_int), value :: count, type, rank, thread, tag
      type(ptsc_request), intent(out) :: req
      integer(c_int) :: ip2p_c
    end function ip2p_c
    function reduce_c(ctx, sbuf, rbuf, count, type, op) bind(C)
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: count, type, op
      integer(c_int) :: reduce_c
    end function reduce_c
    function gather_c(ctx, sbuf, scount, stype, rbuf, rcount, rtype) bind(C)
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: scount, stype, rcount, rtype
      integer(c_int) :: gather_c
    end function gather_c
    function rgather_c(ctx, sbuf, scount, stype, rbuf, rcount, rtype, root) bind(C)
      import :: c_int, c_ptr, ptsc_ctx
      type(ptsc_ctx), value :: ctx
      type(c_ptr), value :: sbuf, rbuf
      integer(c_int), value :: scount, stype, rcount, rtype, root
      integer(c_int) :: rgather_c
    end function rgather_c
  end interface
  procedure(p2p_c), bind(C, name='ptsc_f_send') :: f_send
  procedure(p2p_c), bind(C, name='ptsc_f_recv') :: f_recv
  procedure(ip2p_c), bind(C, name='ptsc_f_isend') :: f_isend
  procedure(ip2p_c), bind(C, name='ptsc_f_irecv') :: f_irecv
  procedure(reduce_c), bind(C, name='ptsc_f_allreduce') :: f_allreduce
  procedure(reduce_c), bind(C, name='ptsc_f_scan') :: f_scan
  procedure(reduce_c), bind(C, name='ptsc_f_exscan') :: f_exscan
  procedure(reduce_c), bind(C, name='ptsc_f_reduce_scatter_block') :: f_reduce_scatter_block
  procedure(gather_c), bind(C, name='ptsc_f_allgather') :: f_allgather
  procedure(gather_c), bind(C, name='ptsc_f_alltoall') :: f_alltoall
  procedure(rgather_c), bind(C, name='ptsc_f_gather') :: f_gather
  procedure(rgather_c), bind(C, name='ptsc_f_scatter') :: f_scatter

contains

  ! The address of a buffer argument; .false. when it is not contiguous.
  function addr(buf, p) result(ok)
    type(*), dimension(..), target, intent(in) :: buf
    type(c_ptr), intent(out) :: p
    logical :: ok
    ok = is_contiguous(buf)
    p = c_null_ptr
    if (ok) p = c_loc(buf)
  end function addr

  ! Refuses a buffer the module cannot pass (not contiguous): PTSC_ERR_ARG,
  ! with ptsc_last_error() naming the call and the argument.
  integer(c_int) function refuse(what) result(rc)
    character(*), intent(in) :: what
    rc = c_set_error(PTSC_ERR_ARG, what//' is not contiguous (pass a contiguous array, or copy the section '// &
                     'into one)'//c_null_char)
  end function refuse

  ! A C string as a Fortran string ('' for NULL).
  function fstring(s) result(f)
    type(c_ptr), intent(in) :: s
    character(:), allocatable :: f
    character(kind=c_char), pointer :: c(:)
    integer :: i, n
    if (.not. c_associated(s)) then
      f = ''
      return
    end if
    n = int(c_strlen(s))
    call c_f_pointer(s, c, [n])
    allocate (character(n) :: f)
    do i = 1, n
      f(i:i) = c(i)
    end do
  end function fstring

  !> ptsc_init without arguments (MPI gets none): MPI_THREAD_MULTIPLE if
  !> the program has not initialised MPI, else a check of its level.
  integer(c_int) function ptsc_init()
    ptsc_init = c_init(c_null_ptr, c_null_ptr)
  end function ptsc_init

  integer(c_int) function ptsc_initialized(flag)
    logical, intent(out) :: flag
    integer(c_int) :: f
    f = 0
    ptsc_initialized = c_initialized(f)
    flag = f /= 0
  end function ptsc_initialized

  function ptsc_status_string(status) result(s)
    integer(c_int), intent(in) :: status
    character(:), allocatable :: s
    s = fstring(c_status_string(status))
  end function ptsc_status_string

  function ptsc_status_name(status) result(s)
    integer(c_int), intent(in) :: status
    character(:), allocatable :: s
    s = fstring(c_status_name(status))
  end function ptsc_status_name

  !> The calling thread's detail of its last error.
  function ptsc_last_error() result(s)
    character(:), allocatable :: s
    s = fstring(c_last_error())
  end function ptsc_last_error

  function ptsc_version_string() result(s)
    character(:), allocatable :: s
    s = fstring(c_version_string())
  end function ptsc_version_string

  integer(c_int) function ptsc_waitall(reqs)
    type(ptsc_request), intent(inout) :: reqs(:)
    ptsc_waitall = c_waitall(int(size(reqs), c_int), reqs)
  end function ptsc_waitall

  integer(c_int) function ptsc_test(req, done)
    type(ptsc_request), intent(inout) :: req
    logical, intent(out) :: done
    integer(c_int) :: d
    d = 0
    ptsc_test = c_test(req, d)
    done = d /= 0
  end function ptsc_test

#define BUF_ARG(b, p, what) if (.not. addr(b, p)) then; rc = refuse(what); return; end if

  !> Point-to-point: (rank, thread) addressing over the lanes.
  integer(c_int) function ptsc_send(ctx, buf, count, type, rank, thread, tag) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: buf
    integer, intent(in) :: count, type, rank, thread, tag
    type(c_ptr) :: p
    BUF_ARG(buf, p, 'ptsc_send: buf')
    rc = f_send(ctx, p, count, type, rank, thread, tag)
  end function ptsc_send

  integer(c_int) function ptsc_recv(ctx, buf, count, type, rank, thread, tag) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(inout) :: buf
    integer, intent(in) :: count, type, rank, thread, tag
    type(c_ptr) :: p
    BUF_ARG(buf, p, 'ptsc_recv: buf')
    rc = f_recv(ctx, p, count, type, rank, thread, tag)
  end function ptsc_recv

  integer(c_int) function ptsc_isend(ctx, buf, count, type, rank, thread, tag, req) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, asynchronous, intent(in) :: buf
    integer, intent(in) :: count, type, rank, thread, tag
    type(ptsc_request), intent(out) :: req
    type(c_ptr) :: p
    req%p = c_null_ptr
    BUF_ARG(buf, p, 'ptsc_isend: buf')
    rc = f_isend(ctx, p, count, type, rank, thread, tag, req)
  end function ptsc_isend

  integer(c_int) function ptsc_irecv(ctx, buf, count, type, rank, thread, tag, req) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, asynchronous, intent(inout) :: buf
    integer, intent(in) :: count, type, rank, thread, tag
    type(ptsc_request), intent(out) :: req
    type(c_ptr) :: p
    req%p = c_null_ptr
    BUF_ARG(buf, p, 'ptsc_irecv: buf')
    rc = f_irecv(ctx, p, count, type, rank, thread, tag, req)
  end function ptsc_irecv

  integer(c_int) function ptsc_sendrecv(ctx, sbuf, scount, stype, dest_rank, dest_thread, stag, rbuf, rcount, &
                                        rtype, src_rank, src_thread, rtag) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: scount, stype, dest_rank, dest_thread, stag, rcount, rtype, src_rank, src_thread, rtag
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_sendrecv: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_sendrecv: rbuf')
    rc = f_sendrecv(ctx, sp, scount, stype, dest_rank, dest_thread, stag, rp, rcount, rtype, src_rank, &
                    src_thread, rtag)
  end function ptsc_sendrecv

  !> Collectives over the calling thread's lane (thread t of every rank).
  integer(c_int) function ptsc_bcast(ctx, buf, count, type, root) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(inout) :: buf
    integer, intent(in) :: count, type, root
    type(c_ptr) :: p
    BUF_ARG(buf, p, 'ptsc_bcast: buf')
    rc = f_bcast(ctx, p, count, type, root)
  end function ptsc_bcast

  integer(c_int) function ptsc_reduce(ctx, sbuf, rbuf, count, type, op, root) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: count, type, op, root
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_reduce: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_reduce: rbuf')
    rc = f_reduce(ctx, sp, rp, count, type, op, root)
  end function ptsc_reduce

  integer(c_int) function ptsc_allreduce(ctx, sbuf, rbuf, count, type, op) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: count, type, op
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_allreduce: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_allreduce: rbuf')
    rc = f_allreduce(ctx, sp, rp, count, type, op)
  end function ptsc_allreduce

  integer(c_int) function ptsc_scan(ctx, sbuf, rbuf, count, type, op) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: count, type, op
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_scan: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_scan: rbuf')
    rc = f_scan(ctx, sp, rp, count, type, op)
  end function ptsc_scan

  integer(c_int) function ptsc_exscan(ctx, sbuf, rbuf, count, type, op) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: count, type, op
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_exscan: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_exscan: rbuf')
    rc = f_exscan(ctx, sp, rp, count, type, op)
  end function ptsc_exscan

  integer(c_int) function ptsc_reduce_scatter_block(ctx, sbuf, rbuf, count, type, op) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: count, type, op
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_reduce_scatter_block: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_reduce_scatter_block: rbuf')
    rc = f_reduce_scatter_block(ctx, sp, rp, count, type, op)
  end function ptsc_reduce_scatter_block

  integer(c_int) function ptsc_allgather(ctx, sbuf, scount, stype, rbuf, rcount, rtype) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: scount, stype, rcount, rtype
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_allgather: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_allgather: rbuf')
    rc = f_allgather(ctx, sp, scount, stype, rp, rcount, rtype)
  end function ptsc_allgather

  integer(c_int) function ptsc_alltoall(ctx, sbuf, scount, stype, rbuf, rcount, rtype) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: scount, stype, rcount, rtype
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_alltoall: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_alltoall: rbuf')
    rc = f_alltoall(ctx, sp, scount, stype, rp, rcount, rtype)
  end function ptsc_alltoall

  integer(c_int) function ptsc_gather(ctx, sbuf, scount, stype, rbuf, rcount, rtype, root) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: scount, stype, rcount, rtype, root
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_gather: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_gather: rbuf')
    rc = f_gather(ctx, sp, scount, stype, rp, rcount, rtype, root)
  end function ptsc_gather

  integer(c_int) function ptsc_scatter(ctx, sbuf, scount, stype, rbuf, rcount, rtype, root) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: scount, stype, rcount, rtype, root
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_scatter: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_scatter: rbuf')
    rc = f_scatter(ctx, sp, scount, stype, rp, rcount, rtype, root)
  end function ptsc_scatter

  !> The v forms: counts and displacements in elements of the type, one per
  !> rank (arrays of at least the number of ranks), as in C.
  integer(c_int) function ptsc_gatherv(ctx, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: scount, stype, rtype, root
    integer(c_int), intent(in) :: rcounts(*), displs(*)
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_gatherv: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_gatherv: rbuf')
    rc = f_gatherv(ctx, sp, scount, stype, rp, rcounts, displs, rtype, root)
  end function ptsc_gatherv

  integer(c_int) function ptsc_scatterv(ctx, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: stype, rcount, rtype, root
    integer(c_int), intent(in) :: scounts(*), displs(*)
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_scatterv: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_scatterv: rbuf')
    rc = f_scatterv(ctx, sp, scounts, displs, stype, rp, rcount, rtype, root)
  end function ptsc_scatterv

  integer(c_int) function ptsc_allgatherv(ctx, sbuf, scount, stype, rbuf, rcounts, displs, rtype) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: scount, stype, rtype
    integer(c_int), intent(in) :: rcounts(*), displs(*)
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_allgatherv: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_allgatherv: rbuf')
    rc = f_allgatherv(ctx, sp, scount, stype, rp, rcounts, displs, rtype)
  end function ptsc_allgatherv

  integer(c_int) function ptsc_alltoallv(ctx, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype) &
    result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    integer, intent(in) :: stype, rtype
    integer(c_int), intent(in) :: scounts(*), sdispls(*), rcounts(*), rdispls(*)
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_alltoallv: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_alltoallv: rbuf')
    rc = f_alltoallv(ctx, sp, scounts, sdispls, stype, rp, rcounts, rdispls, rtype)
  end function ptsc_alltoallv

  !> Collectives over every thread of every rank (nthreads: the threads per
  !> rank taking part, PTSC_WORLD_TEAM inside an OpenMP region).
  integer(c_int) function ptsc_world_bcast(ctx, nthreads, buf, count, type, root_rank, root_thread) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    integer, intent(in) :: nthreads, count, type, root_rank, root_thread
    type(*), dimension(..), target, intent(inout) :: buf
    type(c_ptr) :: p
    BUF_ARG(buf, p, 'ptsc_world_bcast: buf')
    rc = f_world_bcast(ctx, nthreads, p, count, type, root_rank, root_thread)
  end function ptsc_world_bcast

  integer(c_int) function ptsc_world_reduce(ctx, nthreads, sbuf, rbuf, count, type, op, root_rank, root_thread) &
    result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    integer, intent(in) :: nthreads, count, type, op, root_rank, root_thread
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_world_reduce: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_world_reduce: rbuf')
    rc = f_world_reduce(ctx, nthreads, sp, rp, count, type, op, root_rank, root_thread)
  end function ptsc_world_reduce

  integer(c_int) function ptsc_world_allreduce(ctx, nthreads, sbuf, rbuf, count, type, op) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    integer, intent(in) :: nthreads, count, type, op
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_world_allreduce: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_world_allreduce: rbuf')
    rc = f_world_allreduce(ctx, nthreads, sp, rp, count, type, op)
  end function ptsc_world_allreduce

  integer(c_int) function ptsc_world_allgather(ctx, nthreads, sbuf, count, type, rbuf) result(rc)
    type(ptsc_ctx), intent(in) :: ctx
    integer, intent(in) :: nthreads, count, type
    type(*), dimension(..), target, intent(in) :: sbuf
    type(*), dimension(..), target, intent(inout) :: rbuf
    type(c_ptr) :: sp, rp
    BUF_ARG(sbuf, sp, 'ptsc_world_allgather: sbuf')
    BUF_ARG(rbuf, rp, 'ptsc_world_allgather: rbuf')
    rc = f_world_allgather(ctx, nthreads, sp, count, type, rp)
  end function ptsc_world_allgather

  !> Run fn(ctx, arg) on nthreads OpenMP threads (<= 0: ptsc's default),
  !> each attached as its thread number, and detach them after.
  integer(c_int) function ptsc_omp_run(nthreads, fn, arg) result(rc)
    integer, intent(in) :: nthreads
    procedure(ptsc_thread_fn) :: fn
    type(c_ptr), intent(in), optional :: arg
    type(c_ptr) :: a
    a = c_null_ptr
    if (present(arg)) a = arg
    rc = f_omp_run(nthreads, c_funloc(fn), a)
  end function ptsc_omp_run

end module ptsc
