! The module's constants equal the C ones (fortran/ptsc.F90 against
! include/ptsc.h, through ptsc_f_constant in fortran/ptsc_f.c), and the
! module's calls report errors as C does: a call before ptsc_init, a
! non-contiguous buffer, a null context. One process, no mpiexec.
! Prints "PASSED f_constants".
program f_constants
  use ptsc
  use, intrinsic :: iso_c_binding
  implicit none
  integer :: failed, rc
  type(ptsc_ctx) :: ctx
  integer :: a(4, 4)
  logical :: flag
  interface
    function constant(name, value) bind(C, name='ptsc_f_constant')
      import :: c_char, c_int
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), intent(out) :: value
      integer(c_int) :: constant
    end function constant
  end interface

  failed = 0
  call same('PTSC_OK', PTSC_OK)
  call same('PTSC_ERR_ARG', PTSC_ERR_ARG)
  call same('PTSC_ERR_NULL_BUFFER', PTSC_ERR_NULL_BUFFER)
  call same('PTSC_ERR_COUNT', PTSC_ERR_COUNT)
  call same('PTSC_ERR_RANK', PTSC_ERR_RANK)
  call same('PTSC_ERR_THREAD', PTSC_ERR_THREAD)
  call same('PTSC_ERR_TAG', PTSC_ERR_TAG)
  call same('PTSC_ERR_NOT_INITIALIZED', PTSC_ERR_NOT_INITIALIZED)
  call same('PTSC_ERR_FINALIZED', PTSC_ERR_FINALIZED)
  call same('PTSC_ERR_ALREADY_INITIALIZED', PTSC_ERR_ALREADY_INITIALIZED)
  call same('PTSC_ERR_THREAD_TAKEN', PTSC_ERR_THREAD_TAKEN)
  call same('PTSC_ERR_THREAD_LEVEL', PTSC_ERR_THREAD_LEVEL)
  call same('PTSC_ERR_NOT_ATTACHED', PTSC_ERR_NOT_ATTACHED)
  call same('PTSC_ERR_ALREADY_ATTACHED', PTSC_ERR_ALREADY_ATTACHED)
  call same('PTSC_ERR_WRONG_THREAD', PTSC_ERR_WRONG_THREAD)
  call same('PTSC_ERR_CONFIG', PTSC_ERR_CONFIG)
  call same('PTSC_ERR_MPI', PTSC_ERR_MPI)
  call same('PTSC_ERR_CUDA', PTSC_ERR_CUDA)
  call same('PTSC_ERR_NO_MEMORY', PTSC_ERR_NO_MEMORY)
  call same('PTSC_ERR_CAPTURING', PTSC_ERR_CAPTURING)
  call same('PTSC_ERR_RACE', PTSC_ERR_RACE)
  call same('PTSC_ERR_UNSUPPORTED', PTSC_ERR_UNSUPPORTED)
  call same('PTSC_ERR_NESTED', PTSC_ERR_NESTED)
  call same('PTSC_ERR_TRUNCATE', PTSC_ERR_TRUNCATE)
  call same('PTSC_ERR_NO_DEVICE', PTSC_ERR_NO_DEVICE)
  call same('PTSC_ERR_INTERNAL', PTSC_ERR_INTERNAL)
  call same('PTSC_ERR_PENDING', PTSC_ERR_PENDING)
  call same('PTSC_ERR_CANCELLED', PTSC_ERR_CANCELLED)
  call same('PTSC_ERR_MISMATCH', PTSC_ERR_MISMATCH)
  call same('PTSC_STATUS_COUNT', PTSC_STATUS_COUNT)
  call same('PTSC_ANY_RANK', PTSC_ANY_RANK)
  call same('PTSC_UNDEFINED', PTSC_UNDEFINED)
  call same('PTSC_WORLD_TEAM', PTSC_WORLD_TEAM)
  call same('PTSC_SCOPE_DEFAULT', PTSC_SCOPE_DEFAULT)
  call same('PTSC_SCOPE_AUTO', PTSC_SCOPE_AUTO)
  call same('PTSC_SCOPE_NONE', PTSC_SCOPE_NONE)
  call same('PTSC_SCOPE_THREAD', PTSC_SCOPE_THREAD)
  call same('PTSC_SCOPE_GLOBAL', PTSC_SCOPE_GLOBAL)
  call same('PTSC_SCOPE_DEVICE', PTSC_SCOPE_DEVICE)
  call same('PTSC_MEM_DEVICE', PTSC_MEM_DEVICE)
  call same('PTSC_MEM_MANAGED', PTSC_MEM_MANAGED)
  call same('PTSC_MEM_PINNED', PTSC_MEM_PINNED)
  call same('PTSC_MEM_HOST', PTSC_MEM_HOST)
  ! The lookup itself refuses what it does not know.
  rc = constant('PTSC_NO_SUCH_NAME'//c_null_char, a(1, 1))
  call check(rc == PTSC_ERR_ARG, 'an unknown name is not refused')

  ! Strings and errors through the module.
  call check(ptsc_status_name(PTSC_ERR_TAG) == 'PTSC_ERR_TAG', 'ptsc_status_name')
  call check(len(ptsc_status_string(PTSC_ERR_RANK)) > 0, 'ptsc_status_string is empty')
  call check(len(ptsc_version_string()) > 0, 'ptsc_version_string is empty')
  rc = ptsc_initialized(flag)
  call check(rc == PTSC_OK .and. .not. flag, 'ptsc_initialized before ptsc_init')
  a = 0
  rc = ptsc_send(ctx, a, 4, 0, 0, 0, 0)
  call check(rc == PTSC_ERR_NOT_INITIALIZED, 'ptsc_send before ptsc_init: '//ptsc_status_name(rc))
  call check(len(ptsc_last_error()) > 0, 'no detail for the last error')
  rc = ptsc_send(ctx, a(1, :), 4, 0, 0, 0, 0)
  call check(rc == PTSC_ERR_ARG, 'a non-contiguous buffer is not refused: '//ptsc_status_name(rc))
  call check(index(ptsc_last_error(), 'ptsc_send: buf is not contiguous') == 1, &
             'the refusal of a non-contiguous buffer has the detail: '//ptsc_last_error())
  rc = ptsc_barrier(ctx)
  call check(rc == PTSC_ERR_NOT_INITIALIZED, 'ptsc_barrier before ptsc_init: '//ptsc_status_name(rc))

  if (failed == 0) then
    write (*, '(a)') 'PASSED f_constants'
  else
    write (*, '(a,i0,a)') 'f_constants: ', failed, ' failed checks'
    stop 1
  end if

contains

  subroutine same(name, fvalue)
    character(*), intent(in) :: name
    integer(c_int), intent(in) :: fvalue
    integer(c_int) :: cvalue
    integer :: r
    cvalue = -999999
    r = constant(name//c_null_char, cvalue)
    if (r /= PTSC_OK) then
      call check(.false., name//' is not known to the C side')
    else if (cvalue /= fvalue) then
      write (*, '(a,a,a,i0,a,i0)') 'f_constants FAIL: ', name, ' is ', fvalue, ' in Fortran, ', cvalue
      failed = failed + 1
    end if
  end subroutine same

  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    if (.not. cond) then
      write (*, '(a,a)') 'f_constants FAIL: ', what
      failed = failed + 1
    end if
  end subroutine check

end program f_constants
