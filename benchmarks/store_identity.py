"""Byte identity of stores across a change that must not change behaviour (issue 47).

``build DIR`` writes stores from the benchmark corpora with the checked-out code and records a
SHA-256 of every file of each store's version, the manifest normalised (its run id, parent, base,
creation time, timings and inputs, which name this run's paths, are dropped). ``compare A B``
diffs two such records. A restructuring is pure when the records of its first and last commit
are equal::

    python -m benchmarks.store_identity build /tmp/before   # at the commit before
    python -m benchmarks.store_identity build /tmp/after    # at the commit after
    python -m benchmarks.store_identity compare /tmp/before /tmp/after

The stores: the bundled sample with MiniLM (the demo's job), the shared documentation corpus with
the static Model2Vec model (skipped with a message when ``../shared/data`` is absent), and a
synthetic segments table in exact and LSH modes, from Arrow IPC and from Parquet in 7 buckets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from .common import ROOT, SHARED_DATA, git_commit
from .corpus import make_corpus

# What differs between two runs of the same job: ids, times, and what names this run's paths.
VOLATILE = ("run_id", "parent", "base", "created_at", "timings", "inputs", "input_key",
            "manifest_checksum")


def _normalised_manifest(path: Path) -> str:
    manifest = json.loads(path.read_text())
    for key in VOLATILE:
        manifest.pop(key, None)
    if isinstance(manifest.get("extract"), dict):
        manifest["extract"].pop("timings", None)
    # Each file's record without its absolute path (the checkout's) or its mtime (the clone's).
    files = manifest.pop("source_files", None) or {}
    manifest["source_files"] = sorted(
        [Path(path).name, rec.get("size"), rec.get("hash"), rec.get("doc_ids")]
        for path, rec in files.items())
    return json.dumps(manifest, sort_keys=True)


def store_digest(root: Path) -> dict[str, str]:
    """SHA-256 of each file of the store's current version, the manifest normalised."""
    version = (root / "current").resolve()
    out: dict[str, str] = {}
    for path in sorted(version.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(version).as_posix()
        data = (_normalised_manifest(path).encode() if path.name == "manifest.json"
                else path.read_bytes())
        out[rel] = hashlib.sha256(data).hexdigest()
    return out


def _build(out: Path) -> dict[str, Any]:
    import arrowdedup
    from arrowdedup.config import DedupConfig

    out.mkdir(parents=True, exist_ok=True)
    stores: dict[str, Any] = {}

    def run(name: str, inputs: list[Path], **kwargs: Any) -> None:
        root = out / name
        arrowdedup.ingest_to_store(inputs, root, **kwargs)
        stores[name] = store_digest(root)
        print(f"{name}: {len(stores[name])} files", file=sys.stderr)

    run("sample-minilm", [ROOT / "data" / "sample"], embedder="minilm")
    corpus = SHARED_DATA / "corpus" / "opentelemetry.io"
    model = SHARED_DATA / "models" / "m2v-minilm-l6-256"
    if corpus.is_dir() and model.is_dir():
        run("otel-model2vec", [corpus], embedder=f"model2vec:{model}")
    else:
        print(f"skipped otel-model2vec: {corpus} or {model} is absent", file=sys.stderr)

    table = make_corpus(200, 500, dim=64, seed=7).table
    ipc, parquet = out / "synthetic.arrow", out / "synthetic.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq
    with pa.OSFile(str(ipc), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    pq.write_table(table, parquet)
    run("synthetic-exact-ipc", [ipc])
    run("synthetic-exact-parquet-7", [parquet], buckets=7)
    lsh = DedupConfig.from_dict({"Ingestion": {"Mode": "Lsh"}})
    run("synthetic-lsh-ipc", [ipc], config=lsh)
    return {"commit": git_commit(), "stores": stores}


def _digests(build: Path) -> dict[str, dict[str, str]]:
    """The stores' digests, recomputed from the stores of a build directory when they are there
    (so a change of the normalisation applies to both sides), else as recorded."""
    record = json.loads((build / "identity.json").read_text())
    recorded: dict[str, dict[str, str]] = record["stores"]
    return {name: store_digest(build / name) if (build / name / "current").exists() else files
            for name, files in recorded.items()}


def _compare(a: Path, b: Path) -> int:
    left, right = _digests(a), _digests(b)
    differ = 0
    for name in sorted(set(left) | set(right)):
        if name not in left or name not in right:
            print(f"{name}: only in {'the first' if name in left else 'the second'}")
            differ += 1
            continue
        files = sorted(set(left[name]) | set(right[name]))
        changed = [f for f in files if left[name].get(f) != right[name].get(f)]
        verdict = "identical" if not changed else "DIFFER: " + ", ".join(changed)
        print(f"{name}: {len(files)} files, {verdict}")
        differ += bool(changed)
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.store_identity",
                                     description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="write the stores and DIR/identity.json")
    build.add_argument("out", type=Path)
    compare = sub.add_parser("compare", help="diff the stores of two build directories")
    compare.add_argument("a", type=Path)
    compare.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        record = _build(args.out)
        (args.out / "identity.json").write_text(json.dumps(record, indent=1, sort_keys=True))
        return 0
    return _compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
