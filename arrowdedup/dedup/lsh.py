"""LSH mode (``Ingestion.Mode = Lsh``): candidate buckets instead of all pairs, for huge groups.

A group with at least ``Ingestion.LshMinSegments`` segments is scanned in the greedy order of
SPEC section 2, but a segment is compared only with the selected segments that share an LSH
bucket with it. Buckets come from one of two generators (``Ingestion.LshMethod``):

- ``MinHash``: datasketch ``MinHash`` over word shingles of the text (``LshShingleSize`` words,
  ``LshNumPerm`` permutations, seeded by ``LshSeed``) indexed by a datasketch ``MinHashLSH``
  whose threshold (``LshThreshold``) sits below the target so recall is not lost at the
  S-curve's midpoint; each band of its hash tables is a bucket.
- ``Hyperplane``: one random-hyperplane (SimHash) signature of ``LshSignatureBits`` sign bits per
  embedding (planes drawn from ``numpy.random.default_rng(LshSeed)``); ``LshBands`` bands, each
  of ``LshBandBits`` bits sampled from the signature (bit-sampling LSH on the Hamming cube).
  A bucket-mate whose signature differs in more bits than a pair *at* the threshold would with
  probability ~1e-9 (:func:`max_hamming`) is dropped before its cosine is computed: that test
  reads 32 bytes from a cache-resident array where the cosine reads a random 1.5 kB row, and
  it is what makes the scan fast (most bucket-mates are chance collisions).

Every candidate pair is verified with the exact cosine (the same float32 unit vectors and dot
product as the exact kernels), and the representative is the *first selected* segment (in
selection order) among the candidates that reach the threshold, so every LSH merge is a true
merge and LSH equals exact mode when the buckets hold all pairs. Nothing here depends on
``PYTHONHASHSEED``: keys are integers, datasketch hashes with SHA-1, and all orders are sorted.

Memory for a group of ``m`` rows and ``B`` bands: while the buckets are built, ``m × B``
uint64 keys, ``m × B`` int64 bucket numbers and at most ``m × B`` int64 members (Hyperplane,
64 bands: 1.5 KB a row at most); for the scan they give way to its layout (:class:`ScanLayout`,
int32: at most ``2 × m × B`` slots, 0.5 KB a row) and the selected unit vectors (at most one
copy of the group's embeddings). Throughout: ``m × LshSignatureBits / 8`` bytes of signatures
and a projection buffer of ``PROJECT_CHUNK × LshSignatureBits`` floats.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from statistics import NormalDist
from typing import Any, cast

import numpy as np
import pyarrow as pa
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..config import IngestionConfig, LshMethod
from ..facts.conflict_jit import conflict
from ..jit.runtime import numba
from .kernels_jit import filtered_or_exact
from .types import KEPT, MERGED_NEAR, KernelPlan, Outputs

PROJECT_CHUNK = 4096


@dataclasses.dataclass(frozen=True)
class Buckets:
    """Candidate buckets of one group, in group-local row indices (greedy order).

    ``row_bucket[i, b]`` is the bucket of row ``i`` in band ``b`` (-1: alone there);
    ``members[starts[k]:starts[k + 1]]`` are the rows of bucket ``k``, ascending.
    """

    row_bucket: np.ndarray  # int64 (m, bands)
    starts: np.ndarray  # int64 (n_buckets + 1,)
    members: np.ndarray  # int64
    # Hyperplane only: SimHash signatures (m, words) uint64 and the largest Hamming distance
    # a candidate may have; without them every bucket-mate is compared.
    signatures: np.ndarray | None = None
    max_hamming: int = -1

    @property
    def n_buckets(self) -> int:
        return int(self.starts.shape[0] - 1)


COUNTING_SORT_BITS = 20  # band keys this narrow are bucketed by a counting sort


def buckets_from_keys(keys: np.ndarray, valid: np.ndarray, bits: int = 64) -> Buckets:
    """Buckets from per-band integer keys (m, bands) below ``2**bits``: rows of one band with
    equal keys and ``valid`` set share a bucket; buckets of one row are dropped. Buckets are
    numbered band by band, in key order, members ascending (as :func:`buckets_from_keys_numpy`,
    its oracle)."""
    idx = np.flatnonzero(valid).astype(np.int64)
    # Band-major keys, so each band's pass reads them in order (free for band_keys' output).
    by_band = np.ascontiguousarray(np.asarray(keys, dtype=np.uint64).T)
    row_bucket, starts, members = _bucket_rows(by_band, idx, bits <= COUNTING_SORT_BITS, bits)
    return Buckets(row_bucket, starts, members)


@numba.njit(nogil=True, cache=True)
def _bucket_rows(by_band: np.ndarray, idx: np.ndarray, counting: bool, bits: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    bands, m = by_band.shape
    v = idx.shape[0]
    row_bucket = np.full((m, bands), -1, dtype=np.int64)
    sizes = np.empty(v // 2 * bands + 1, dtype=np.int32)  # at most v // 2 buckets a band
    n_buckets = 0
    order = np.empty(v, dtype=np.int64)
    k = np.empty(v, dtype=np.uint64)
    ks = np.empty(v, dtype=np.uint64)  # k in sorted order
    counts = np.zeros((1 << bits) + 1 if counting else 1, dtype=np.int64)
    for b in range(bands):
        if v < 2:
            break
        keys = by_band[b]
        for t in range(v):
            k[t] = keys[idx[t]]
        if counting:  # stable: rows of one key stay ascending
            counts[:] = 0
            for t in range(v):
                counts[np.int64(k[t]) + 1] += 1
            for c in range(1, counts.shape[0]):
                counts[c] += counts[c - 1]
            for t in range(v):
                slot = np.int64(k[t])
                order[counts[slot]] = idx[t]
                ks[counts[slot]] = k[t]
                counts[slot] += 1
        else:
            perm = np.argsort(k, kind="mergesort")  # stable, so ties stay ascending
            for t in range(v):
                order[t] = idx[perm[t]]
                ks[t] = k[perm[t]]
        t = 0
        while t < v:
            key = ks[t]
            e = t + 1
            while e < v and ks[e] == key:
                e += 1
            if e - t >= 2:
                for u in range(t, e):
                    row_bucket[order[u], b] = n_buckets
                sizes[n_buckets] = e - t
                n_buckets += 1
            t = e
    starts = np.zeros(n_buckets + 1, dtype=np.int64)
    for q in range(n_buckets):
        starts[q + 1] = starts[q] + sizes[q]
    members = np.empty(starts[n_buckets], dtype=np.int64)
    fill = starts[:-1].copy()
    for i in range(m):  # rows ascending, so each bucket's members are ascending
        for b in range(bands):
            q = row_bucket[i, b]
            if q >= 0:
                members[fill[q]] = i
                fill[q] += 1
    return row_bucket, starts, members


def buckets_from_keys_numpy(keys: np.ndarray, valid: np.ndarray) -> Buckets:
    """The NumPy twin of :func:`buckets_from_keys` (a stable argsort per band)."""
    m, bands = keys.shape
    row_bucket = np.full((m, bands), -1, dtype=np.int64)
    idx = np.flatnonzero(valid).astype(np.int64)
    starts_parts: list[np.ndarray] = []
    member_parts: list[np.ndarray] = []
    n_buckets = 0
    n_members = 0
    for b in range(bands):
        if idx.shape[0] < 2:
            break
        k = keys[idx, b]
        o = idx[np.argsort(k, kind="stable")]  # ties keep ascending row order
        ks = keys[o, b]
        brk = np.flatnonzero(ks[1:] != ks[:-1]) + 1
        run_start = np.concatenate([[0], brk])
        run_len = np.diff(np.concatenate([run_start, [o.shape[0]]]))
        big = run_len >= 2
        if not big.any():
            continue
        run_id = np.repeat(np.arange(run_start.shape[0]), run_len)
        keep = big[run_id]
        dense = np.cumsum(big) - 1  # bucket number of each kept run
        rows_in = o[keep]
        ids = dense[run_id[keep]] + n_buckets
        row_bucket[rows_in, b] = ids
        lens = run_len[big]
        starts_parts.append(n_members + np.cumsum(lens) - lens)
        member_parts.append(rows_in)
        n_buckets += int(lens.shape[0])
        n_members += int(rows_in.shape[0])
    starts = np.concatenate([*starts_parts, np.array([n_members])]).astype(np.int64)
    members = (np.concatenate(member_parts) if member_parts else np.empty(0)).astype(np.int64)
    return Buckets(row_bucket, starts, members)


def all_pairs_buckets(valid: np.ndarray) -> Buckets:
    """One bucket holding every valid row: LSH mode then equals exact mode."""
    m = valid.shape[0]
    members = np.flatnonzero(valid).astype(np.int64)
    row_bucket = np.where(valid, 0, -1).astype(np.int64).reshape(m, 1)
    return Buckets(row_bucket, np.array([0, members.shape[0]], dtype=np.int64), members)


MISS_PROBABILITY = 1e-9  # of dropping, by Hamming distance, a pair exactly at the threshold


def max_hamming(threshold: float, signature_bits: int) -> int:
    """The largest Hamming distance a bucket-mate may have to still be compared.

    Each sign bit of a random hyperplane differs for two vectors at angle θ with probability
    θ/π, so a pair at the threshold has a Binomial(signature_bits, arccos(t)/π) distance; the
    bound sits where that distribution's upper tail holds :data:`MISS_PROBABILITY` (normal
    approximation, plus one bit). More similar pairs are dropped less often still.
    """
    p = math.acos(min(1.0, max(-1.0, threshold))) / math.pi
    z = NormalDist().inv_cdf(1.0 - MISS_PROBABILITY)
    bound = signature_bits * p + z * math.sqrt(signature_bits * p * (1.0 - p)) + 1.0
    return min(signature_bits, math.ceil(bound))


def hyperplane_plan(dim: int, signature_bits: int, bands: int, bits: int, seed: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The seeded planes (dim, signature_bits) float32 and, per band, the signature bits it
    samples (bands, bits) int64 (distinct within a band)."""
    rng = np.random.default_rng(seed)
    planes = rng.standard_normal((dim, signature_bits)).astype(np.float32)
    positions = np.stack([rng.choice(signature_bits, size=bits, replace=False)
                          for _ in range(bands)]).astype(np.int64)
    return planes, positions


def hyperplane_signatures(matrix: np.ndarray, rows: np.ndarray, inv_norm: np.ndarray,
                          planes: np.ndarray) -> np.ndarray:
    """SimHash signatures (m, bits / 64) uint64 of ``matrix[rows]`` scaled to unit length,
    one chunk of rows at a time (no copy of the group's vectors)."""
    m = rows.shape[0]
    words = planes.shape[1] // 64
    sig = np.empty((m, words), dtype=np.uint64)
    for c0 in range(0, m, PROJECT_CHUNK):
        r = rows[c0 : c0 + PROJECT_CHUNK]
        unit = matrix[r] * inv_norm[r][:, None]
        # Fixed chunk shapes, so the BLAS product (and a sign right at 0) is reproducible.
        sign = (unit @ planes) > 0
        packed = np.packbits(sign, axis=1, bitorder="little")
        sig[c0 : c0 + r.shape[0]] = packed.view("<u8")
    return sig


def band_keys(sig: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Per row and band (m, bands), the sampled signature bits packed into an integer key (a
    view of band-major storage, which is how :func:`buckets_from_keys` reads it)."""
    return _band_keys(sig, positions).T


@numba.njit(nogil=True, cache=True)
def _band_keys(sig: np.ndarray, positions: np.ndarray) -> np.ndarray:
    m = sig.shape[0]
    bands, bits = positions.shape
    keys = np.zeros((bands, m), dtype=np.uint64)
    for i in range(m):
        for b in range(bands):
            key = np.uint64(0)
            for t in range(bits):
                p = positions[b, t]
                bit = (sig[i, p >> 6] >> np.uint64(p & 63)) & np.uint64(1)
                key |= bit << np.uint64(t)
            keys[b, i] = key
    return keys


def hyperplane_keys(unit: np.ndarray, bands: int, bits: int, seed: int,
                    signature_bits: int = 256) -> np.ndarray:
    """SimHash band keys (m, bands) uint64 of unit vectors."""
    m = unit.shape[0]
    planes, positions = hyperplane_plan(unit.shape[1], signature_bits, bands, bits, seed)
    sig = hyperplane_signatures(unit, np.arange(m, dtype=np.int64), np.ones(m, np.float32),
                                planes)
    return band_keys(sig, positions)


def shingles(text: str, size: int) -> list[bytes]:
    """Word shingles of ``size`` words (lowercased); a shorter text is one shingle."""
    words = text.lower().split()
    if len(words) <= size:
        return [" ".join(words).encode("utf-8")]
    return [" ".join(words[i : i + size]).encode("utf-8") for i in range(len(words) - size + 1)]


def minhash_buckets(texts: list[str], valid: np.ndarray, cfg: IngestionConfig) -> Buckets:
    """Buckets of a datasketch MinHashLSH index over word shingles of ``texts``."""
    from datasketch import MinHash, MinHashLSH

    idx = np.flatnonzero(valid)
    sets = [shingles(texts[i], cfg.lsh_shingle_size) for i in idx]
    hashes = MinHash.bulk(sets, num_perm=cfg.lsh_num_perm, seed=cfg.lsh_seed)
    index = MinHashLSH(threshold=cfg.lsh_threshold, num_perm=cfg.lsh_num_perm)
    with index.insertion_session() as session:
        for i, mh in zip(idx.tolist(), hashes, strict=True):
            session.insert(i, mh, check_duplication=False)
    m = valid.shape[0]
    bands = len(index.hashtables)
    row_bucket = np.full((m, bands), -1, dtype=np.int64)
    starts = [0]
    members: list[int] = []
    n_buckets = 0
    for b, table in enumerate(index.hashtables):
        # Sorted band keys and sorted members: no dependence on set or dict order.
        for key in sorted(table.keys()):
            rows = sorted(table.get(key))
            if len(rows) < 2:
                continue
            row_bucket[rows, b] = n_buckets
            members.extend(rows)
            starts.append(len(members))
            n_buckets += 1
    return Buckets(row_bucket, np.asarray(starts, dtype=np.int64),
                   np.asarray(members, dtype=np.int64))


def candidate_buckets(
    rows: np.ndarray,
    matrix: np.ndarray,
    inv_norm: np.ndarray,
    usable: np.ndarray,
    texts: pa.Array | pa.ChunkedArray | None,
    cfg: IngestionConfig,
) -> Buckets:
    """The configured generator's buckets for one group (``rows`` in greedy order)."""
    valid = usable[rows]
    if cfg.lsh_method is LshMethod.MINHASH:
        if texts is None:
            raise ValueError("MinHash LSH needs the text column")
        group_texts = texts.take(pa.array(rows, type=pa.int64())).to_pylist()
        return minhash_buckets([t or "" for t in group_texts], valid, cfg)
    planes, positions = hyperplane_plan(matrix.shape[1], cfg.lsh_signature_bits, cfg.lsh_bands,
                                        cfg.lsh_band_bits, cfg.lsh_seed)
    sig = hyperplane_signatures(matrix, rows, inv_norm, planes)
    buckets = buckets_from_keys(band_keys(sig, positions), valid, cfg.lsh_band_bits)
    return dataclasses.replace(buckets, signatures=sig, max_hamming=max_hamming(
        cfg.similarity_threshold, cfg.lsh_signature_bits))


@intrinsic
def _popcount_intrinsic(typingctx: Any, x: Any) -> tuple[Any, Any]:
    """Set bits of a uint64, in Numba code: LLVM's ctpop, one instruction where the CPU has
    POPCNT."""
    signature = types.int64(types.uint64)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return signature, codegen


# What jitted callers see: the typing context is Numba's, not an argument of theirs.
popcount = cast(Callable[[int], int], _popcount_intrinsic)


@dataclasses.dataclass(frozen=True)
class ScanLayout:
    """The scan's working form of :class:`Buckets`: bucket ``k`` becomes a count at
    ``box[starts[k] + k]`` followed by room for its members, and ``pos[i, b]`` is the count's
    index for row ``i``'s bucket in band ``b`` (-1: none), so each (row, band) costs one
    random memory access, not two. int32 while the box fits (half the memory of int64)."""

    pos: np.ndarray  # (m, bands)
    box: np.ndarray
    signatures: np.ndarray  # (m, words) uint64; one zero word when there is no Hamming test
    max_hamming: int  # -1: no Hamming test

    @classmethod
    def of(cls, buckets: Buckets) -> ScanLayout:
        m, bands = buckets.row_bucket.shape
        n_buckets = buckets.n_buckets
        size = int(buckets.starts[n_buckets]) + n_buckets
        dtype = np.int32 if max(size, m) < 2**31 - 1 else np.int64
        pos = np.full((m, bands), -1, dtype=dtype)
        _fill_positions(buckets.row_bucket, buckets.starts, pos)
        # Without signatures max_hamming is -1 (no Hamming test); the scan still wants an array.
        sig = buckets.signatures if buckets.signatures is not None else \
            np.zeros((m, 1), dtype=np.uint64)
        return cls(pos, np.zeros(size, dtype=dtype), sig, buckets.max_hamming)


@numba.njit(nogil=True, cache=True)
def _fill_positions(row_bucket: np.ndarray, starts: np.ndarray, pos: np.ndarray) -> None:
    m, bands = row_bucket.shape
    for i in range(m):
        for b in range(bands):
            q = row_bucket[i, b]
            if q >= 0:
                pos[i, b] = starts[q] + q


@numba.njit(nogil=True, cache=True, fastmath=True)
def _scan_lsh(
    rows: np.ndarray,
    pos: np.ndarray,
    box: np.ndarray,
    sig: np.ndarray,
    max_ham: int,
    p: KernelPlan,
    sel_of_class: np.ndarray,
    out: Outputs,
) -> None:
    matrix = p.matrix
    m = rows.shape[0]
    d = matrix.shape[1]
    words = sig.shape[1]
    check = max_ham >= 0
    bands = pos.shape[1]
    thr = np.float32(p.threshold)
    buffer = np.empty((m, d), dtype=np.float32)
    slot = np.full(m, -1, dtype=np.int64)
    stamp = np.full(m, -1, dtype=np.int64)
    # box[h + 1 : h + 1 + box[h]] holds the selected rows of the bucket at h, in selection order.
    cand = np.empty(d, dtype=np.float32)
    nsel = 0
    for i in range(m):
        r = rows[i]
        if filtered_or_exact(r, p, sel_of_class, out):
            continue
        c = p.hash_class[r]
        if p.usable[r]:
            scale = p.inv_norm[r]
            for k in range(d):
                cand[k] = matrix[r, k] * scale
            best = -1
            best_sim = np.float32(0.0)
            # The first (in selection order) bucket-mate that passed the cosine test but not
            # the fact guard: bands are visited one after another, so keep the smallest.
            refused = -1
            refused_why = 0
            lone = p.lone[r]
            for b in range(bands):
                h = pos[i, b]
                if h < 0:
                    continue
                for t in range(box[h]):
                    j = box[h + 1 + t]
                    if (best >= 0 and j >= best) or (lone and refused >= 0 and j >= refused):
                        # A lone row merges nowhere (facts.lone_rows), so only a smaller
                        # first refusal could still change its record.
                        break
                    if stamp[j] == i:
                        continue
                    stamp[j] = i
                    if check:
                        ham = 0
                        for w in range(words):
                            ham += popcount(sig[i, w] ^ sig[j, w])
                        if ham > max_ham:
                            continue
                    acc = np.float32(0.0)
                    sj = slot[j]
                    for k in range(d):
                        acc += buffer[sj, k] * cand[k]
                    if acc >= thr:
                        why = conflict(p.fact_offsets, p.fact_values, p.fact_modes, r,
                                       rows[j]) if p.guard else 0
                        if why != 0:
                            if refused < 0 or j < refused:
                                refused = j
                                refused_why = why
                            continue
                        best = j
                        best_sim = acc
                        break
            if refused >= 0 and (best < 0 or refused < best):
                out.refused[r] = rows[refused]
                out.reason[r] = refused_why
            if best >= 0:
                out.action[r] = MERGED_NEAR
                out.rep[r] = rows[best]
                out.sim[r] = best_sim
                continue
            for k in range(d):
                buffer[nsel, k] = cand[k]
            slot[i] = nsel
            nsel += 1
            for b in range(bands):
                h = pos[i, b]
                if h >= 0:
                    box[h] += 1
                    box[h + box[h]] = i
        out.action[r] = KEPT
        sel_of_class[c] = r


def greedy_lsh_group(
    rows: np.ndarray,
    p: KernelPlan,
    sel_of_class: np.ndarray,
    out: Outputs,
    buckets: Buckets | ScanLayout,
) -> None:
    """Greedy scan of one group comparing only bucket-mates (arguments as
    :func:`arrowdedup.dedup.blocked.greedy_blocked_group`)."""
    layout = buckets if isinstance(buckets, ScanLayout) else ScanLayout.of(buckets)
    _scan_lsh(np.ascontiguousarray(rows, dtype=np.int64), layout.pos, layout.box,
              layout.signatures, layout.max_hamming, p, sel_of_class, out)
