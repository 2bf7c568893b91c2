"""What a refused merge would have lost, in words: the decisions' ``guard_detail`` column.

The guard decides on hashes (:mod:`arrowdedup.facts.guard`, :mod:`arrowdedup.facts.content`), which
cannot be read back; a reader needs the words. So for each refused pair (a segment and the first
representative that failed the guard) this module names, from the two texts:

- for a fact reason, the tokens of the segment that state a fact of that kind and that the
  representative does not write;
- for ``content``, the content words of the segment the representative does not cover (or,
  when every word is covered, the opposites, negations and order words that stand elsewhere,
  that both are lead-ins, or that the segment is a list entry naming another thing:
  ``another name: Servicio de Pago ≠ Servicio de Pagos``);
- for code, the lines of the segment missing from the representative, and the commands the
  representative adds (``+ ...``);
- for ``section``, the two sections from the level where their paths part
  (``Tomcat ≠ WebLogic``).

It runs once per refused pair, after the decisions, never on the decision path.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from . import code_lines
from . import content as cw

# At most this many words or lines are named per pair.
DETAIL_LIMIT = 8
_PUNCT = "\"'`.,;:!?()[]{}<>*_"


def guard_details(a: pl.Series, b: pl.Series, reason: pl.Series,
                  segment_type: pl.Series | None = None,
                  language: pl.Series | None = None,
                  sections: tuple[pl.Series, pl.Series] | None = None) -> pl.Series:
    """One detail string per pair (null where ``reason`` is null); ``sections`` are the
    ``section`` values of ``a`` and of ``b``, which a ``section`` refusal names."""
    n = a.len()
    if n > _CHUNK:
        # Each pair's detail is its own: chunks bound the word tables and token lists of a
        # document whose every row was refused (a table of alike rows).
        def part(s: pl.Series | None, start: int) -> pl.Series | None:
            return None if s is None else s.slice(start, _CHUNK)

        return pl.concat([
            guard_details(a.slice(i, _CHUNK), b.slice(i, _CHUNK), reason.slice(i, _CHUNK),
                          segment_type=part(segment_type, i), language=part(language, i),
                          sections=None if sections is None else
                          (sections[0].slice(i, _CHUNK), sections[1].slice(i, _CHUNK)))
            for i in range(0, n, _CHUNK)])
    out: list[str | None] = [None] * n
    reasons = reason.cast(pl.String).to_list()
    rows = [i for i in range(n) if reasons[i] is not None]
    if not rows:
        return pl.Series("guard_detail", out, dtype=pl.String)
    a_texts = a.cast(pl.String).fill_null("")
    b_texts = b.cast(pl.String).fill_null("")
    types = (segment_type.cast(pl.String).to_list() if segment_type is not None
             else [None] * n)
    code = [i for i in rows if reasons[i] == "content" and types[i] == "code"]
    content = [i for i in rows if reasons[i] == "content" and types[i] != "code"]
    fact = [i for i in rows if reasons[i] not in ("content", "section")]
    a_sections = sections[0].cast(pl.String).to_list() if sections is not None else [None] * n
    b_sections = sections[1].cast(pl.String).to_list() if sections is not None else [None] * n
    for i in rows:
        if reasons[i] == "section":
            out[i] = _section_detail(a_sections[i], b_sections[i])
    for i in code:
        out[i] = _code_detail(a_texts[i], b_texts[i])
    if content:
        from .sections import lead_ins

        idx = np.array(content, dtype=np.int64)
        langs = cw.language_keys(language, n).gather(idx)
        leads = (lead_ins(a_texts.gather(idx)) & lead_ins(b_texts.gather(idx))).to_list()
        names = _labels(a_texts.gather(idx), None if segment_type is None
                        else segment_type.gather(idx))
        for k, (i, text, lead) in enumerate(zip(content, _content_details(
                a_texts.gather(idx), b_texts.gather(idx), langs), leads, strict=True)):
            # Covered words, refused all the same: two lead-ins (each introduces its own
            # block), or a list entry that names another thing than the representative.
            if text == "content" and lead:
                out[i] = "two lead-ins: each introduces its own block"
            elif text == "content" and names[k]:
                out[i] = f"another name: {a_texts[i].strip()} ≠ {b_texts[i].strip()}"
            else:
                out[i] = text
    if fact:
        for i, text in zip(fact, _fact_details([a_texts[i] for i in fact],
                                               [b_texts[i] for i in fact],
                                               [reasons[i] for i in fact],
                                               [types[i] for i in fact]), strict=True):
            out[i] = text
    return pl.Series("guard_detail", out, dtype=pl.String)


_CHUNK = 8192


def _labels(texts: pl.Series, kinds: pl.Series | None) -> np.ndarray:
    """Which of ``texts`` are list entries that are only a name (:mod:`.entry_facts`), read
    as the guard read them (layout removed)."""
    from .entries import label_rows
    from .guard import without_layout
    from .sections import lead_ins

    out = np.zeros(texts.len(), dtype=bool)
    plain = without_layout(texts, np.zeros(texts.len(), dtype=bool))
    out[label_rows(plain, None if kinds is None else kinds.cast(pl.String),
                   lead_ins(plain).to_numpy().astype(bool))] = True
    return out


def _content_details(a: pl.Series, b: pl.Series, langs: pl.Series) -> list[str]:
    m = a.len()
    rows = np.arange(m, dtype=np.int64)
    wa = cw.word_table(a, langs, rows)
    wb = cw.word_table(b, langs, rows)
    covered = wb.filter(pl.col("content")).select("row", "stem").unique()
    missing = (wa.filter(pl.col("content")).join(covered, on=["row", "stem"], how="anti")
               .group_by("row", maintain_order=True)
               .agg(pl.col("tok").unique(maintain_order=True).head(DETAIL_LIMIT)))
    words = {int(r): ", ".join(t) for r, t in missing.iter_rows()}
    pivots = (wa.filter(pl.col("marked")).group_by("row", maintain_order=True)
              .agg(pl.col("tok").unique(maintain_order=True).head(DETAIL_LIMIT)))
    placed = {int(r): ", ".join(t) for r, t in pivots.iter_rows()}
    return [words[i] if i in words else
            (f"placement of: {placed[i]}" if i in placed else "content")
            for i in range(m)]


def _section_detail(a: str | None, b: str | None) -> str:
    """``a's section ≠ b's section``, from the first level where the two paths differ."""
    from .sections import LEVEL_SEPARATOR

    pa = [x.strip() for x in (a or "").split(LEVEL_SEPARATOR.strip())]
    pb = [x.strip() for x in (b or "").split(LEVEL_SEPARATOR.strip())]
    k = 0
    while k < min(len(pa), len(pb)) and pa[k].lower() == pb[k].lower():
        k += 1
    return f"{LEVEL_SEPARATOR.join(pa[k:])} ≠ {LEVEL_SEPARATOR.join(pb[k:])}"


def _code_detail(a: str, b: str) -> str:
    def lines(text: str) -> list[str]:
        return [ln.strip() for ln in text.split("\n") if ln.strip()]

    def key(line: str) -> str:
        return "".join(line.split())

    a_lines, b_lines = lines(a), lines(b)
    b_keys = {key(ln) for ln in b_lines}
    missing = [ln for ln in a_lines if key(ln) not in b_keys]
    kinds = (code_lines.code_line_kinds(pl.Series(b_lines, dtype=pl.String)).to_list()
             if b_lines else [])
    a_keys = {key(ln) for ln in a_lines}
    added = [ln for ln, k in zip(b_lines, kinds, strict=True)
             if k == "command" and key(ln) not in a_keys]
    parts = [*missing[:DETAIL_LIMIT], *(f"+ {ln}" for ln in added[:DETAIL_LIMIT])]
    return "; ".join(parts) if parts else "code lines"


def _fact_details(a: list[str], b: list[str], reasons: list[str],
                  types: list[str | None]) -> list[str]:
    """The tokens of each ``a`` absent from ``b`` whose own facts include the failing kind."""
    from .guard import signature_arrays
    from .tables import KIND_NAMES, KIND_SHIFT

    candidates: list[tuple[int, str]] = []
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        present = {t.strip(_PUNCT) for t in y.split()}
        lowered = {t.lower() for t in present}
        for token in dict.fromkeys(t.strip(_PUNCT) for t in x.split()):
            if token and token not in present and (reasons[i] not in ("name", "identifier")
                                                   or token.lower() not in lowered):
                candidates.append((i, token))
            elif token and reasons[i] in ("negation", "opposite") and token not in present:
                candidates.append((i, token))
    if not candidates:
        return [reason for reason in reasons]
    tokens = pl.Series([t for _, t in candidates], dtype=pl.String)
    token_types = pl.Series([types[i] for i, _ in candidates], dtype=pl.String)
    offsets, values = signature_arrays(tokens, segment_type=token_types)
    kinds = (values >> KIND_SHIFT).astype(np.int64)
    found: dict[int, list[str]] = {}
    for k, (i, token) in enumerate(candidates):
        states = {KIND_NAMES[int(x)] for x in kinds[offsets[k]:offsets[k + 1]] if x < 9}
        if reasons[i] in states or (reasons[i] == "name" and "mention" in states):
            found.setdefault(i, []).append(token)
    return [", ".join(found[i][:DETAIL_LIMIT]) if i in found else reasons[i]
            for i in range(len(a))]
