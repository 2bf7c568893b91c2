"""Reading many runs of a file's bytes in one jitted call, without the GIL.

A job reads each bucket's embeddings as one ``pread`` per run of consecutive rows: about
1,250 runs of one document each per bucket at 1M segments. Issued from Python, every
``os.preadv`` gives the GIL back and waits to take it again, and while the other bucket
workers and the writer hold it that wait is up to a switch interval (5 ms) per call: the
reads of a 1M job took 1.1-1.4 s of wall time per worker thread for 0.4 s of CPU. Here the
whole loop runs in one call that releases the GIL once.

``pread`` is libc's, handed to LLVM under a name of ours (:data:`SYMBOL`) before any jitted
code that calls it is compiled or loaded from Numba's cache (the cached machine code refers
to the name, which is resolved in every process at load time).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any, cast

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..jit.runtime import numba

SYMBOL = "arrowdedup_pread"
llvm.add_symbol(SYMBOL, ctypes.cast(ctypes.CDLL(None).pread, ctypes.c_void_p).value)


@intrinsic
def _pread_intrinsic(typingctx: Any, fd: Any, out: Any, start: Any, count: Any, offset: Any) -> Any:
    """``pread(fd, &out[start], count, offset)`` on a C-contiguous uint8 array: the bytes
    read, 0 at the end of the file, -1 on an error (errno is not read: the caller redoes a
    failed run from Python, which raises the error)."""
    if not (isinstance(out, types.Array) and out.ndim == 1 and out.layout == "C"
            and out.dtype == types.uint8):
        return None
    if not all(isinstance(a, types.Integer) for a in (fd, start, count, offset)):
        return None
    sig = types.int64(fd, out, start, count, offset)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i64, i8p = ir.IntType(64), ir.IntType(8).as_pointer()
        ary = context.make_array(signature.args[1])(context, builder, args[1])
        fnty = ir.FunctionType(i64, [ir.IntType(32), i8p, i64, i64])
        fn = cgutils.get_or_insert_function(builder.module, fnty, SYMBOL)
        start = context.cast(builder, args[2], signature.args[2], types.int64)
        count = context.cast(builder, args[3], signature.args[3], types.int64)
        offset = context.cast(builder, args[4], signature.args[4], types.int64)
        fd = context.cast(builder, args[0], signature.args[0], types.int32)
        return builder.call(fn, [fd, builder.gep(ary.data, [start]), count, offset])

    return sig, codegen


# What jitted callers see: the typing context is Numba's, not an argument of theirs.
_pread = cast(Callable[[int, np.ndarray, int, int, int], int], _pread_intrinsic)


@numba.njit(nogil=True, cache=True)
def pread_runs(fd: int, out: np.ndarray, dst: np.ndarray, offsets: np.ndarray,
               lengths: np.ndarray) -> int:
    """Read run ``i`` (``lengths[i]`` bytes at file offset ``offsets[i]``) into
    ``out[dst[i]:dst[i] + lengths[i]]``, run after run; the first run not read whole (an
    error or the end of the file), or the number of runs when every one was. The caller
    keeps each run inside ``out``."""
    for i in range(offsets.shape[0]):
        done = 0
        while done < lengths[i]:
            got = _pread(fd, out, dst[i] + done, lengths[i] - done, offsets[i] + done)
            if got <= 0:
                return i
            done += got
    return offsets.shape[0]
