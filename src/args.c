/*
 * Argument checks and datatype helpers: what a (buffer, count, datatype)
 * argument may be, and how a datatype lies in memory. Point-to-point calls,
 * collectives, world collectives and the engine all ask; this file asks
 * only MPI (and ptsc__g for a lane to probe a type with), so it sits below
 * every one of them.
 */
#include "ptsc_internal.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

/*
 * The size of the predefined datatypes programs send most, without a call
 * into MPI on every message; 0 for any other type (derived types are asked:
 * their handles may be freed and reused for another type). The MPI standard
 * binds each of these to its C type (MPI_BYTE is one byte), and every one is
 * contiguous with lower bound 0, so ptsc__type_is_contiguous may say yes at
 * once too. The unit tests compare each size with MPI_Type_size_x.
 */
static MPI_Count predefined_size(MPI_Datatype t)
{
    if (t == MPI_BYTE || t == MPI_CHAR || t == MPI_UNSIGNED_CHAR || t == MPI_SIGNED_CHAR || t == MPI_INT8_T ||
        t == MPI_UINT8_T)
        return 1;
    if (t == MPI_DOUBLE)
        return (MPI_Count)sizeof(double);
    if (t == MPI_FLOAT)
        return (MPI_Count)sizeof(float);
    if (t == MPI_INT)
        return (MPI_Count)sizeof(int);
    if (t == MPI_UNSIGNED)
        return (MPI_Count)sizeof(unsigned);
    if (t == MPI_LONG)
        return (MPI_Count)sizeof(long);
    if (t == MPI_UNSIGNED_LONG)
        return (MPI_Count)sizeof(unsigned long);
    if (t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT)
        return (MPI_Count)sizeof(long long);
    if (t == MPI_UNSIGNED_LONG_LONG)
        return (MPI_Count)sizeof(unsigned long long);
    if (t == MPI_SHORT)
        return (MPI_Count)sizeof(short);
    if (t == MPI_INT32_T || t == MPI_UINT32_T)
        return 4;
    if (t == MPI_INT64_T || t == MPI_UINT64_T)
        return 8;
    return 0;
}

/* The largest byte count (and span) a buffer may have: an object larger than
 * PTRDIFF_MAX bytes cannot exist in C, so a count beyond it is an error in
 * the call, never a message to try. */
#define PTSC__MAX_BYTES ((uint64_t)PTRDIFF_MAX)

/* A datatype's size, or an error: not committed (PTSC_ERR_ARG), or a size
 * MPI_Count cannot hold (PTSC_ERR_COUNT: Open MPI answers MPI_UNDEFINED,
 * MPICH a negative size). */
static int type_size(MPI_Datatype type, const char *call, const char *sp, const char *gap, MPI_Count *size)
{
    *size = predefined_size(type);
    if (*size > 0)
        return PTSC_OK;
    if (MPI_Type_size_x(type, size) != MPI_SUCCESS)
        return ptsc__err(PTSC_ERR_ARG, "%s: %s%sdatatype is not a committed MPI datatype", call, sp, gap);
    if (*size == MPI_UNDEFINED || *size < 0)
        return ptsc__err(PTSC_ERR_COUNT,
                         "%s: %s%sdatatype is larger than an MPI_Count can hold (more than 2^63-1 bytes per "
                         "element)",
                         call, sp, gap);
    /* MPI has no query for "committed", but MPI_Pack of no element refuses a
     * type that is not (MPI_ERR_TYPE through a lane's MPI_ERRORS_RETURN, in
     * Open MPI and MPICH alike); a receive with such a type could otherwise
     * wait for ever before MPI looks at its type. */
    char none[1];
    int pos = 0;
    if (ptsc__g.lanes && MPI_Pack(none, 0, type, none, 0, &pos, ptsc__g.lanes[0]) != MPI_SUCCESS)
        return ptsc__err(PTSC_ERR_ARG, "%s: %s%sdatatype is not committed (call MPI_Type_commit first)", call,
                         sp, gap);
    return PTSC_OK;
}

/* What `count` elements of a derived `type` cover from the first byte to
 * the last: (count - 1) * |extent| + true extent, or 0 when it exceeds
 * PTSC__MAX_BYTES. */
static uint64_t type_span(MPI_Datatype type, int count)
{
    MPI_Count lb, extent, tlb, textent;
    if (MPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(type, &tlb, &textent) != MPI_SUCCESS || extent == MPI_UNDEFINED ||
        textent == MPI_UNDEFINED || textent < 0 || extent == INT64_MIN)
        return 0;
    uint64_t mag = (uint64_t)(extent < 0 ? -extent : extent), step = (uint64_t)count - 1;
    if (mag && step > PTSC__MAX_BYTES / mag)
        return 0;
    uint64_t reach = step * mag;
    return reach > PTSC__MAX_BYTES - (uint64_t)textent ? 0 : reach + (uint64_t)textent;
}

/* NULL (MPI_BOTTOM) with a datatype whose data lies at absolute addresses:
 * its true lower bound is an address, at or above the lowest one Linux maps
 * (vm.mmap_min_addr, 64 KiB by default). A type built from displacements
 * relative to a buffer starts far lower. */
static int bottom_absolute(MPI_Datatype type)
{
    MPI_Count tlb, textent;
    return predefined_size(type) == 0 && MPI_Type_get_true_extent_x(type, &tlb, &textent) == MPI_SUCCESS &&
           tlb >= 65536;
}

static int check_buf(const void *buf, int count, MPI_Datatype type, const char *call, const char *side,
                     int bottom_ok, size_t *bytes)
{
    /* "send buffer", "receive count": calls with two buffers say which one. */
    const char *sp = side ? side : "", *gap = side ? " " : "";
    if (count < 0)
        return ptsc__err(PTSC_ERR_COUNT, "%s: %s%scount %d is negative", call, sp, gap, count);
    if (type == MPI_DATATYPE_NULL)
        return ptsc__err(PTSC_ERR_ARG, "%s: %s%sdatatype is MPI_DATATYPE_NULL", call, sp, gap);
    /* Every caller that accepts MPI_IN_PLACE handles it before this check. */
    if (buf == MPI_IN_PLACE)
        return ptsc__err(PTSC_ERR_ARG, "%s: MPI_IN_PLACE is not valid as the %s%sbuffer here", call, sp, gap);
    MPI_Count size;
    int rc = type_size(type, call, sp, gap, &size);
    if (rc != PTSC_OK)
        return rc;
    if (!buf && count > 0 && !(bottom_ok && bottom_absolute(type)))
        return ptsc__err(PTSC_ERR_NULL_BUFFER, "%s: %s%sbuffer is NULL with count %d%s", call, sp, gap, count,
                         bottom_ok ? " (MPI_BOTTOM needs a datatype of absolute addresses)" : "");
    /* count <= INT_MAX, so a size up to PTSC__MAX_BYTES / INT_MAX (a
     * constant) cannot overflow: no division on the common path. */
    if (count > 0 && (uint64_t)size > PTSC__MAX_BYTES / INT_MAX &&
        (uint64_t)size > PTSC__MAX_BYTES / (uint64_t)count)
        return ptsc__err(
            PTSC_ERR_COUNT,
            "%s: %s%scount %d of %lld-byte elements exceeds the address space (PTRDIFF_MAX bytes)", call, sp,
            gap, count, (long long)size);
    if (count > 0 && predefined_size(type) == 0 && type_span(type, count) == 0 && size > 0)
        return ptsc__err(PTSC_ERR_COUNT,
                         "%s: %s%s%d elements of this datatype span more than the address space", call, sp,
                         gap, count);
    *bytes = (size_t)count * (size_t)size;
    return PTSC_OK;
}

int ptsc__check_buf_bottom(const void *buf, int count, MPI_Datatype type, const char *call, const char *side,
                           size_t *bytes)
{
    return check_buf(buf, count, type, call, side, 1, bytes);
}

int ptsc__check_buf_side(const void *buf, int count, MPI_Datatype type, const char *call, const char *side,
                         size_t *bytes)
{
    return check_buf(buf, count, type, call, side, 0, bytes);
}

int ptsc__check_buf(const void *buf, int count, MPI_Datatype type, const char *call, size_t *bytes)
{
    return check_buf(buf, count, type, call, NULL, 0, bytes);
}

int ptsc__type_is_contiguous(MPI_Datatype type)
{
    MPI_Count size, lb, extent, tlb, textent;
    if (predefined_size(type) > 0)
        return 1;
    if (MPI_Type_size_x(type, &size) != MPI_SUCCESS ||
        MPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(type, &tlb, &textent) != MPI_SUCCESS)
        return 0;
    return lb == 0 && tlb == 0 && extent == size && textent == size;
}

/* Collectives stage whole buffers as bytes: they need a datatype without holes. */
int ptsc__check_contiguous(MPI_Datatype type, const char *call)
{
    if (ptsc__type_is_contiguous(type))
        return PTSC_OK;
    return ptsc__err(
        PTSC_ERR_UNSUPPORTED,
        "%s: non-contiguous datatypes are not supported while staging is on (pack the data first)", call);
}

int ptsc__layout_of(MPI_Datatype t, int count, ptsc__layout_t *L, const char *call)
{
    MPI_Count lb, true_lb, true_extent;
    memset(L, 0, sizeof *L);
    if (MPI_Type_size_x(t, &L->size) != MPI_SUCCESS ||
        MPI_Type_get_extent_x(t, &lb, &L->extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(t, &true_lb, &true_extent) != MPI_SUCCESS || L->size == MPI_UNDEFINED ||
        L->extent == MPI_UNDEFINED || true_extent == MPI_UNDEFINED || L->size < 0)
        return ptsc__err(PTSC_ERR_ARG, "%s: datatype is not a committed MPI datatype", call);
    L->dense = L->size == true_extent && L->extent == L->size;
    if (count == 0 || L->size == 0)
        return PTSC_OK;
    /* (count - 1) * extent, each part bounded so the sum stays far from overflow. */
    const MPI_Count lim = PTRDIFF_MAX / 4;
    MPI_Count step = (MPI_Count)count - 1, mag = L->extent < 0 ? -L->extent : L->extent;
    if (mag > lim || (mag && step > lim / mag) || true_extent > lim || true_lb > lim || true_lb < -lim)
        return ptsc__err(PTSC_ERR_UNSUPPORTED,
                         "%s: %d elements of this datatype span more than the address space", call, count);
    MPI_Count reach = step * L->extent;
    L->lo = true_lb + (reach < 0 ? reach : 0);
    L->span = true_extent + (reach < 0 ? -reach : reach);
    return PTSC_OK;
}
