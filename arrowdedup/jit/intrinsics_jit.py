"""Memory access that Numba's language lacks, as LLVM intrinsics for jitted loops.

``prefetch_row``: a software prefetch of one matrix row, for loops that visit rows in a
scattered order. The greedy scan reads each candidate's embedding once, at a row chosen by the
group order, so on a large corpus that read is a DRAM miss the hardware prefetcher cannot
predict: profiled, it was most of the kernel's time while the dot products were a tenth. Asking
for the next candidate's row while the current one is compared hides that latency. A prefetch
is a hint: it never faults and never changes a result, only when the bytes arrive.

``load_u64`` / ``load_u32``: one unaligned load of 8 / 4 bytes of a contiguous uint8 array, in
native order (little-endian on every platform Numba supports, as XXH64 reads them). Assembled
from single bytes, XXH64's lanes cost two thirds of its time at 1M texts: LLVM does not fuse
those byte loads by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .byte_loads import load_u32, load_u64

_LINE_BYTES = 64  # one request per cache line of the row


def _unaligned_load(bits: int) -> Any:
    """An intrinsic ``load(data, i)``: the ``bits`` bits at byte ``i`` of ``data`` as uint64.

    Only C-contiguous 1-D uint8 arrays type (any other layout is a compile error, not a wrong
    read); the caller keeps ``i + bits // 8 <= len(data)``, as for any unchecked index."""

    @intrinsic
    def load(typingctx: Any, data: Any, i: Any) -> Any:
        if not (isinstance(data, types.Array) and data.ndim == 1 and data.layout == "C"
                and data.dtype == types.uint8 and isinstance(i, types.Integer)):
            return None
        sig = types.uint64(data, i)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            ary = context.make_array(signature.args[0])(context, builder, args[0])
            index = context.cast(builder, args[1], signature.args[1], types.intp)
            ptr = builder.bitcast(builder.gep(ary.data, [index]), ir.IntType(bits).as_pointer())
            value = builder.load(ptr, align=1)  # x86 and arm64 both allow unaligned loads
            return builder.zext(value, ir.IntType(64)) if bits < 64 else value

        return sig, codegen

    return load


def _register(python_fn: Callable[..., Any], load: Any) -> None:
    """Give the Python function (which the interpreted twins run) its jitted meaning."""

    @overload(python_fn, inline="always")
    def _jitted(data: Any, i: Any) -> Any:
        def impl(data: Any, i: Any) -> Any:  # annotated as the typing function (Numba compares)
            return load(data, i)

        return impl


_register(load_u64, _unaligned_load(64))
_register(load_u32, _unaligned_load(32))


@intrinsic
def _prefetch_row(typingctx: Any, matrix: Any, row: Any) -> Any:
    """``prefetch_row(matrix, r)``: start loading row ``r`` of a 2-D array into the cache."""
    if not isinstance(matrix, types.Array) or matrix.ndim != 2:
        return None
    if not isinstance(row, types.Integer):
        return None
    sig = types.void(matrix, row)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        i64 = ir.IntType(64)
        i32 = ir.IntType(32)
        i8p = ir.IntType(8).as_pointer()
        first = cgutils.get_item_pointer2(
            context, builder, data=ary.data,
            shape=cgutils.unpack_tuple(builder, ary.shape),
            strides=cgutils.unpack_tuple(builder, ary.strides),
            layout=aryty.layout,
            inds=[context.cast(builder, args[1], signature.args[1], types.intp),
                  ir.Constant(i64, 0)])
        # The row's extent in bytes: its length times the stride between its items (a
        # non-contiguous row only over-fetches, which is harmless).
        strides = cgutils.unpack_tuple(builder, ary.strides)
        nbytes = builder.mul(builder.extract_value(ary.shape, 1), strides[1])
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        base = builder.bitcast(first, i8p)
        # read (0), keep in all cache levels (3), data cache (1)
        with cgutils.for_range_slice(builder, ir.Constant(i64, 0), nbytes,
                                     ir.Constant(i64, _LINE_BYTES)) as (offset, _):
            builder.call(fn, [builder.gep(base, [offset]), ir.Constant(i32, 0),
                              ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


# What jitted callers see: the typing context is Numba's, not an argument of theirs.
prefetch_row = cast(Callable[[np.ndarray, int], None], _prefetch_row)
