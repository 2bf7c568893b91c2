"""LSH mode (``Ingestion.Mode = Lsh``): candidate buckets instead of all pairs, for huge groups.

A group with at least ``Ingestion.LshMinSegments`` segments is scanned in the greedy order of
SPEC section 2, but a segment is compared only with the selected segments that share an LSH
bucket with it. Buckets come from one of two generators (``Ingestion.LshMethod``):

- ``MinHash``: datasketch ``MinHash`` over word shingles of the text (``LshShingleSize`` words,
  ``LshNumPerm`` permutations, seeded by ``LshSeed``) indexed by a datasketch ``MinHashLSH``
  whose threshold (``LshThreshold``) sits below the target so recall is not lost at the
  S-curve's midpoint; each band of its hash tables is a bucket.
- ``Hyperplane``: random-hyperplane (SimHash) signatures of the embeddings, ``LshBands`` bands of
  ``LshBandBits`` sign bits, planes drawn from ``numpy.random.default_rng(LshSeed)``.

Every candidate pair is verified with the exact cosine (the same float32 unit vectors and dot
product as the exact kernels), and the representative is the *first selected* segment (in
selection order) among the candidates that reach the threshold, so every LSH merge is a true
merge and LSH equals exact mode when the buckets hold all pairs. Nothing here depends on
``PYTHONHASHSEED``: keys are integers, datasketch hashes with SHA-1, and all orders are sorted.

Memory for a group of ``m`` rows: the selected unit vectors (≤ one copy of its embeddings),
``m × bands`` uint64 keys and ``2 × m × bands`` int64 bucket slots (Hyperplane: 64 bands are
1.5 KB per row), and a projection buffer of ``PROJECT_CHUNK × bands × bits`` floats.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np
import pyarrow as pa

from .config import IngestionConfig, LshMethod
from .kernels import KEPT, MERGED_NEAR, filtered_or_exact

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

    @property
    def n_buckets(self) -> int:
        return int(self.starts.shape[0] - 1)


def buckets_from_keys(keys: np.ndarray, valid: np.ndarray) -> Buckets:
    """Buckets from per-band integer keys (m, bands): rows of one band with equal keys and
    ``valid`` set share a bucket; buckets of one row are dropped."""
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


def hyperplane_keys(unit: np.ndarray, bands: int, bits: int, seed: int) -> np.ndarray:
    """SimHash band keys (m, bands) uint64 of unit vectors, planes seeded by ``seed``."""
    m = unit.shape[0]
    return _hyperplane_keys(unit, np.arange(m, dtype=np.int64), np.ones(m, np.float32),
                            bands, bits, seed)


def _hyperplane_keys(matrix: np.ndarray, rows: np.ndarray, inv_norm: np.ndarray, bands: int,
                     bits: int, seed: int) -> np.ndarray:
    """Band keys of ``matrix[rows]`` scaled to unit length, one chunk of rows at a time (no
    copy of the group's vectors)."""
    m, d = rows.shape[0], matrix.shape[1]
    rng = np.random.default_rng(seed)
    planes = rng.standard_normal((d, bands * bits)).astype(np.float32)
    nbytes = (bits + 7) // 8
    keys = np.zeros((m, bands), dtype=np.uint64)
    for c0 in range(0, m, PROJECT_CHUNK):
        r = rows[c0 : c0 + PROJECT_CHUNK]
        unit = matrix[r] * inv_norm[r][:, None]
        # Fixed chunk shapes, so the BLAS product (and a sign right at 0) is reproducible.
        sign = (unit @ planes) > 0
        packed = np.packbits(sign.reshape(-1, bands, bits), axis=2, bitorder="little")
        wide = np.zeros((packed.shape[0], bands, 8), dtype=np.uint8)
        wide[:, :, :nbytes] = packed
        keys[c0 : c0 + PROJECT_CHUNK] = wide.view("<u8")[:, :, 0]
    return keys


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
    keys = _hyperplane_keys(matrix, rows, inv_norm, cfg.lsh_bands, cfg.lsh_band_bits,
                            cfg.lsh_seed)
    return buckets_from_keys(keys, valid)


@numba.njit(nogil=True, cache=True, fastmath=True)
def _scan_lsh(
    rows: np.ndarray,
    row_bucket: np.ndarray,
    starts: np.ndarray,
    members: np.ndarray,
    matrix: np.ndarray,
    inv_norm: np.ndarray,
    usable: np.ndarray,
    hash_class: np.ndarray,
    filtered: np.ndarray,
    threshold: float,
    sel_of_class: np.ndarray,
    action: np.ndarray,
    rep: np.ndarray,
    sim: np.ndarray,
) -> None:
    m = rows.shape[0]
    d = matrix.shape[1]
    bands = row_bucket.shape[1]
    thr = np.float32(threshold)
    buffer = np.empty((m, d), dtype=np.float32)
    slot = np.full(m, -1, dtype=np.int64)
    stamp = np.full(m, -1, dtype=np.int64)
    # members[starts[k]: starts[k] + nsel_b[k]] are reused to hold the selected rows of bucket
    # k in selection order: those slots belong to rows already scanned.
    nsel_b = np.zeros(starts.shape[0], dtype=np.int64)
    cand = np.empty(d, dtype=np.float32)
    nsel = 0
    for i in range(m):
        r = rows[i]
        if filtered_or_exact(r, filtered, hash_class, sel_of_class, action, rep):
            continue
        c = hash_class[r]
        if usable[r]:
            scale = inv_norm[r]
            for k in range(d):
                cand[k] = matrix[r, k] * scale
            best = -1
            best_sim = np.float32(0.0)
            for b in range(bands):
                bk = row_bucket[i, b]
                if bk < 0:
                    continue
                s0 = starts[bk]
                for t in range(nsel_b[bk]):
                    j = members[s0 + t]
                    if best >= 0 and j >= best:
                        break
                    if stamp[j] == i:
                        continue
                    stamp[j] = i
                    acc = np.float32(0.0)
                    sj = slot[j]
                    for k in range(d):
                        acc += buffer[sj, k] * cand[k]
                    if acc >= thr:
                        best = j
                        best_sim = acc
                        break
            if best >= 0:
                action[r] = MERGED_NEAR
                rep[r] = rows[best]
                sim[r] = best_sim
                continue
            for k in range(d):
                buffer[nsel, k] = cand[k]
            slot[i] = nsel
            nsel += 1
            for b in range(bands):
                bk = row_bucket[i, b]
                if bk >= 0:
                    members[starts[bk] + nsel_b[bk]] = i
                    nsel_b[bk] += 1
        action[r] = KEPT
        sel_of_class[c] = r


def greedy_lsh_group(
    rows: np.ndarray,
    matrix: np.ndarray,
    inv_norm: np.ndarray,
    usable: np.ndarray,
    hash_class: np.ndarray,
    filtered: np.ndarray,
    threshold: float,
    sel_of_class: np.ndarray,
    action: np.ndarray,
    rep: np.ndarray,
    sim: np.ndarray,
    buckets: Buckets,
) -> None:
    """Greedy scan of one group comparing only bucket-mates (arguments as
    :func:`arrowdedup.kernels_blocked.greedy_blocked_group`)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    _scan_lsh(rows, buckets.row_bucket, buckets.starts, buckets.members.copy(), matrix, inv_norm,
              usable, hash_class, filtered, threshold, sel_of_class, action, rep, sim)
