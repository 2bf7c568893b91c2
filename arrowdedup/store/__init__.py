"""The store: versioned, bucketed by a hash of ``doc_id``, swapped in atomically.

- :mod:`.layout`: the on-disk layout (documented there) and its names;
- :mod:`.lock`: the writer's ``fcntl.flock`` lock;
- :mod:`.atomic`: the one atomic-write helper (also used by the embedding cache, the
  retrieval log and ``extract``);
- :mod:`.writer`: :class:`StoreWriter`, bucket by bucket, then one atomic switch;
- :mod:`.reader`: :func:`open_store` and :class:`Store` (LazyFrames and stored vectors);
- :mod:`.integrity`: block checksums of every file, checked for the bytes a read touches, and
  the manifest's own checksum (damage is refused, never read back as data).

The store imports neither ingestion nor retrieval: the job path (:mod:`arrowdedup.pipeline.run`)
registers the indexes a version gets.
"""

from .atomic import atomic_path, atomic_write_bytes, atomic_write_text
from .encode import BucketOutput, IndexBuilder, StagedFile, encode_bucket, write_staged
from .integrity import CHECKSUM, checksum_file, sha256_file
from .layout import (
    CURRENT,
    DEFAULT_BUCKETS,
    FORMAT_VERSION,
    INV_NORM,
    KEEP_VERSIONS,
    VERSIONS,
    bucket_of,
)
from .lock import LOCK, store_lock
from .manifest import current_manifest, current_version
from .reader import Store, open_store
from .vectors import StoredVectors
from .writer import PAUSE_ENV, StoreWriter, prepare_root

__all__ = [
    "CHECKSUM",
    "CURRENT",
    "DEFAULT_BUCKETS",
    "FORMAT_VERSION",
    "INV_NORM",
    "KEEP_VERSIONS",
    "LOCK",
    "PAUSE_ENV",
    "VERSIONS",
    "BucketOutput",
    "IndexBuilder",
    "StagedFile",
    "Store",
    "StoreWriter",
    "StoredVectors",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "bucket_of",
    "checksum_file",
    "current_manifest",
    "current_version",
    "encode_bucket",
    "open_store",
    "prepare_root",
    "sha256_file",
    "store_lock",
    "write_staged",
]
