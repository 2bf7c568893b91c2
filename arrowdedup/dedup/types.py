"""What the kernels share with everyone who calls them: the action codes, the plan a kernel
reads and the outputs it writes. Its own module so that the jitted kernels
(:mod:`.kernels_jit`, :mod:`.blocked`, :mod:`.lsh`) and the module that dispatches to them
(:mod:`.kernels`) import it without importing each other."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

KEPT = np.int8(0)
MERGED_NEAR = np.int8(1)
DROPPED_EXACT = np.int8(2)
FILTERED = np.int8(3)
ACTION_NAMES = ("kept", "merged_near", "dropped_exact", "filtered_low_salience")


class KernelPlan(NamedTuple):
    """Everything a kernel reads, as one struct (Numba passes a NamedTuple of arrays as a
    tuple, so no kernel takes a long positional argument list)."""

    order: np.ndarray  # int64 (n,)
    offsets: np.ndarray  # int64 (G + 1,)
    matrix: np.ndarray  # float32 (n, d)
    inv_norm: np.ndarray  # float32 (n,)
    usable: np.ndarray  # bool (n,)
    hash_class: np.ndarray  # int64 (n,)
    n_classes: int
    filtered: np.ndarray  # bool (n,)
    threshold: float  # the effective float32 bound (effective_threshold)
    fact_offsets: np.ndarray  # int64 (n + 1,)
    fact_values: np.ndarray  # uint64
    fact_modes: np.ndarray  # int8 (n,)
    guard: bool
    lone: np.ndarray  # bool (n,): refused by every other row of its group (facts.lone_rows)


class Outputs(NamedTuple):
    action: np.ndarray  # int8 (n,)
    rep: np.ndarray  # int64 (n,)
    sim: np.ndarray  # float32 (n,)
    refused: np.ndarray  # int64 (n,): first guard-refused representative row, or -1
    reason: np.ndarray  # int8 (n,): its fact kind (facts.KIND_NAMES), or 0
