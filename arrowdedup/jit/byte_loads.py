"""Little-endian loads of 8 or 4 bytes of a uint8 array, as Python functions.

This is what the interpreted twins (:mod:`arrowdedup.jit.interpreted`) run, one byte at a time;
jitted code calling these names gets the single unaligned loads that
:mod:`arrowdedup.jit.intrinsics_jit` registers for them.
"""

from __future__ import annotations

import numpy as np


def _assemble(data: np.ndarray, i: int, width: int) -> np.uint64:
    v = np.uint64(0)
    for k in range(width):
        v |= np.uint64(data[i + k]) << np.uint64(8 * k)
    return v


def load_u64(data: np.ndarray, i: int) -> np.uint64:
    """The 8 bytes at ``data[i:i + 8]`` as one little-endian uint64."""
    return _assemble(data, i, 8)


def load_u32(data: np.ndarray, i: int) -> np.uint64:
    """The 4 bytes at ``data[i:i + 4]`` as one little-endian uint64."""
    return _assemble(data, i, 4)
