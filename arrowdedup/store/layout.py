"""Names and constants of the on-disk layout shared by the writer, the reader and ``verify``.

Layout of a store directory (format 2)::

    STORE/
      current -> versions/<run_id>     symlink, replaced by an atomic rename (the pointer)
      versions/<run_id>/
        manifest.json                   written last inside the version
        documents.parquet
        segments/part-00003.parquet     kept segments, every column but the embedding
        embeddings/part-00003.arrow     the kept embeddings as given (uncompressed Arrow IPC,
                                        memory-mapped by readers) and their float32
                                        inverse norms (column ``inv_norm``)
        decisions/part-00003.parquet    one row per input segment
        bm25/                           indexes the job path registered (BM25)
      cache/                            embedding cache (kept across versions)
      retrieval_log/                    one Parquet file per search (kept across versions)
      .lock                             the writer's flock (and pid) while a run writes

Format 3 adds, per layer, ``fingerprints/part-*.parquet`` (each document's input
fingerprint, :mod:`.fingerprint`) and the BM25 term frequencies, and lets a version be a base
plus an ordered list of deltas (``deltas/<run_id>/``, each with the same files for its new and
changed documents plus ``tombstones.parquet``, the doc_ids it removes from the layers before
it, and ``changes.parquet``). A version directory holds hard links to the base and earlier
deltas of its parent, so every version is whole by itself and pruning one never touches
another (see :mod:`.delta` and :mod:`.versions`).

Each vector is stored once: retrieval scores the stored embeddings times their inverse norms,
which is the cosine at the speed of unit vectors. Format 1 stores (which also kept a
``vectors.npy`` of unit vectors) are still read.

A version directory is immutable once ``current`` points at it; a later run (or a future
update, delete or rollback) writes a new version beside it and moves the pointer, so readers
see one version whole, and a killed run leaves the old one. Because dedup is per document and
a document lives in one bucket, an update re-decides the buckets it touches only: its version
can hard-link the untouched bucket files of the previous one (immutable, checksummed in both
manifests) and write new ones (or delta files and tombstones) for the rest; rollback is moving
``current`` back. Every such operation returns :class:`arrowdedup.pipeline.run.JobResult`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

# 4: block checksums and the manifest's own checksum, the embedder's runtime, the compile and
# buckets stage timings, the external links extraction did not follow (all optional to a
# reader, so format 3 reads as before).
FORMAT_VERSION = 4
READABLE_FORMATS = (1, 2, 3, 4)
# The first format whose versions can take deltas: it records each document's input
# fingerprint and the BM25 term frequencies (see :mod:`.delta`).
UPDATABLE_FORMAT = 3
DEFAULT_BUCKETS = 16
KEEP_VERSIONS = 5
CURRENT = "current"
VERSIONS = "versions"
SEGMENTS = "segments"
DECISIONS = "decisions"
EMBEDDINGS = "embeddings"
DOCUMENTS = "documents.parquet"
MANIFEST = "manifest.json"
INV_NORM = "inv_norm"
PART_DIRS = (SEGMENTS, DECISIONS, EMBEDDINGS)
FINGERPRINTS = "fingerprints"
DELTAS = "deltas"
TOMBSTONES = "tombstones.parquet"
CHANGES = "changes.parquet"
# A compacted base carries the change history of the layers it folded (seq, version,
# doc_id, change); the manifest's ``history_layers`` counts the seqs it holds.
HISTORY = "history.parquet"
RETRIEVAL_LOG = "retrieval_log"  # beside the versions: one Parquet file per search
PART_GLOB = "part-*.parquet"  # the bucket files of a part directory


def part_name(bucket: int) -> str:
    return f"part-{bucket:05d}"


def part_file(directory: str, bucket: int) -> str:
    """The path of bucket ``bucket``'s Parquet file in ``directory`` of a version."""
    return f"{directory}/{part_name(bucket)}.parquet"


def bucket_of(doc_ids: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """The bucket of each row: XXH64 of the doc id modulo the bucket count."""
    chunks = doc_ids.chunks if isinstance(doc_ids, pa.ChunkedArray) else [doc_ids]
    parts = [_doc_hashes(chunk) for chunk in chunks]
    hashes = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return (hashes % np.uint64(buckets)).astype(np.int64)


def _doc_hashes(ids: pa.Array) -> np.ndarray:
    """XXH64 of each id. A document's id repeats on each of its rows: when the ids repeat
    (under a quarter distinct, found by Arrow's hash table) each distinct id is hashed once,
    which a job's start then does without loading jitted code (0.3 s of a 1M-row job's serial
    start was Numba's, for 20,000 distinct ids)."""
    import pyarrow.compute as pc

    from ..arrays.hashing import xxh64

    if ids.null_count or len(ids) == 0:
        return xxh64(ids)
    encoded = pc.dictionary_encode(ids)
    if 4 * len(encoded.dictionary) > len(ids):
        return xxh64(ids)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    return xxh64(encoded.dictionary)[codes]
