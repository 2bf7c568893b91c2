"""The pinned fact signatures of real text: the sample of the shared corpus, its digest and the
digests it must give. The golden test (``tests/facts/test_fact_scan_golden.py``) holds them and
the history of each re-pinning; the interpreted twin's test (``tests/jit/test_interpreted.py``)
checks its kernel against the same digest."""

from __future__ import annotations

import numpy as np
import xxhash

from tests.helpers import OTEL_CONTENT, need

PER_LANGUAGE = 60  # paragraphs from the start of each language's folder


TYPES = ["paragraph", "paragraph", "code", "heading", None, "page_furniture", "table_row"]


# (texts, both digests): with segment types and languages, and with neither.
EXPECTED = (638, "7055a62b6472522b", "5bbd63c4802b6776")


def corpus_sample() -> tuple[list[str], list[str]]:
    """Paragraphs of every language of the shared corpus, and each one's language tag."""
    texts: list[str] = []
    langs: list[str] = []
    for folder in sorted(p for p in need(OTEL_CONTENT).iterdir() if p.is_dir()):
        paras: list[str] = []
        for path in sorted(folder.rglob("*.md")):
            text = path.read_text(encoding="utf-8", errors="replace")
            paras += [p.strip() for p in text.split("\n\n") if p.strip()]
            if len(paras) >= PER_LANGUAGE:
                break
        texts += paras[:PER_LANGUAGE]
        langs += [folder.name] * len(paras[:PER_LANGUAGE])
    return texts, langs


def digest(offsets: np.ndarray, values: np.ndarray) -> str:
    return xxhash.xxh64(offsets.astype("<i8").tobytes() + values.astype("<u8").tobytes()
                        ).hexdigest()
