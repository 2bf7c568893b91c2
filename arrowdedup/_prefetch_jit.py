"""A software prefetch of one matrix row, for jitted loops that visit rows in a scattered order.

The greedy scan reads each candidate's embedding once, at a row chosen by the group order, so on
a large corpus that read is a DRAM miss the hardware prefetcher cannot predict: profiled, it was
most of the kernel's time while the dot products were a tenth. Asking for the next candidate's
row while the current one is compared hides that latency. A prefetch is a hint: it never faults
and never changes a result, only when the bytes arrive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

_LINE_BYTES = 64  # one request per cache line of the row


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
