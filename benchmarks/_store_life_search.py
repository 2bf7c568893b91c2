"""A smaller probe of the store-life search target (issue 14 item 4): build a base plus 10
update steps and its compaction the way :mod:`benchmarks.store_life` does, then print the
search p50 of both stores per mode (``search_p50``, 40 queries) and whether their top-10s agree.

    python -m benchmarks._store_life_search DIR [DOCS] [--profile]

``DIR`` keeps the stores between runs (built when absent); ``DOCS`` (default 8000, ~210k live
segments) sets the size. Not a registered benchmark (no ``run``): it writes no results file.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

import numpy as np

from .store_life import (
    DIM,
    KEEP,
    STEPS,
    _link_copy,
    _save_ipc,
    _search,
    same_results,
    search_p50,
    step_inputs,
)


def build(tmp: Path, docs: int, dim: int = 384) -> None:
    import polars as pl

    from arrowdedup.pipeline.run import ingest_to_store
    from arrowdedup.pipeline.update import compact_store, delete_documents, update_store

    from .corpus import make_corpus

    tmp.mkdir(parents=True, exist_ok=True)
    frame = pl.from_arrow(make_corpus(docs, 50, dim, seed=14).table)
    assert isinstance(frame, pl.DataFrame)
    rng = np.random.default_rng(14)
    ingest_to_store([_save_ipc(frame, tmp / "base.arrow")], tmp / "life", quiet=True)
    corpus = frame
    for step in range(STEPS):
        nxt, deleted = step_inputs(corpus, rng, step + 1)
        update_store(tmp / "life", [_save_ipc(nxt, tmp / "step.arrow")], keep_versions=KEEP)
        delete_documents(tmp / "life", deleted, keep_versions=KEEP)
        corpus = nxt.filter(~pl.col("doc_id").is_in(deleted))
    compact_store(_link_copy(tmp / "life", tmp / "compacted"), keep_versions=1)
    texts = [" ".join(s.split()[:3]) for s in
             corpus.get_column("text").sample(40, seed=1).to_list()]
    np.save(tmp / "vectors.npy", rng.standard_normal((40, dim)).astype(np.float32))
    (tmp / "texts.txt").write_text("\n".join(texts), encoding="utf-8")


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    tmp = Path(args[0])
    if not (tmp / "texts.txt").exists():
        build(tmp, int(args[1]) if len(args) > 1 else 8000)
    texts = (tmp / "texts.txt").read_text(encoding="utf-8").split("\n")
    vectors = np.load(tmp / "vectors.npy")
    DIM[0] = vectors.shape[1]
    for _ in range(2):
        lay = search_p50(tmp / "life", texts, vectors)
        com = search_p50(tmp / "compacted", texts, vectors)
        for mode in lay:
            print(f"{mode}: layered {lay[mode] * 1e3:.1f} ms, compacted "
                  f"{com[mode] * 1e3:.1f} ms, ratio {lay[mode] / com[mode]:.3f}")
    print("same top-10 share:", same_results(tmp / "life", tmp / "compacted", texts, vectors)[0])
    if "--profile" in argv:
        for name in ("life", "compacted"):
            for mode, q in (("semantic", vectors[3]), ("hybrid", texts[3])):
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(5):
                    _search(tmp / name, q, mode)
                prof.disable()
                print(f"===== {name} {mode} (5 queries)")
                pstats.Stats(prof).sort_stats("tottime").print_stats(8)


if __name__ == "__main__":
    main(sys.argv[1:])
