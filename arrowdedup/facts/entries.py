"""What a list entry names, and what a definition is about: two more tokens of the fact guard.

Both are tokens of kind :data:`arrowdedup.facts.content.LEAD` (the lead-in's kind), told apart
by bits 58-59 (the role; a lead-in's is 0) and holding a *form* in their low 58 bits: the hash
of a text with layout removed (:func:`arrowdedup.facts.sections.forms`: letter case folded,
every run of ASCII punctuation, markup and white space one space).

**A list entry that is only a name names one thing** (role :data:`LABEL`). On the shared
corpus, the near merges of short list entries that a reader judged as losing something were
entries of one list that name two things: "Servicio de Pago" and "Servicio de Pagos" (two
services of a list of links), "OpenTelemetry .NET" and "OpenTelemetry .NET Contrib" (two
repositories). Their words are covered (an inflection, a word added), so the content rule lets
them through; but a name with a word added or inflected is another name. So a *label*, a list
item of at most :data:`LABEL_MAX_WORDS` words that is not a sentence (no sentence punctuation,
no ``key: value`` colon, not a lead-in) and capitalises its words (a word in lower case is a
function word: "Servicio de Pago", not "Install the agent", which says something), merges
only into an entry that writes the same name,
layout aside: a list item or heading of that form, or one that pairs that form with a key or a
description across a colon ("W3C Baggage" into ``"baggage": W3C Baggage``). Each list item and
heading carries the forms it offers (role :data:`PART`): its whole text's and, for ``key:
value``, each side's. Headings are not labels: their inflections are style ("Use
instrumentation libraries", "Using instrumentation libraries"), and the heading rule already
asks equal facts.

**A definition of a type states its own subject** (role :data:`SUBJECT`). The section rule
(:mod:`arrowdedup.facts.sections`) refuses merges between sibling sections, because a statement
is about the section it stands in. A definition whose term is a type name ("SpanProcessor:
Processes spans when they start and end.", under the SDK's components and again under its
extension interfaces) is about that type wherever it stands. Its token holds the form of the
term, a PascalCase word with two humps or more (``SpanProcessor``, not ``Protocols``: "Supported
protocols: A and B" under five providers stays five statements), its plural ``s`` dropped
(``SpanProcessors`` is the same type, as the scanner reads it). Two segments that define the
same type are not apart, whatever their sections.
"""

from __future__ import annotations

import functools

import numpy as np
import polars as pl

from .tables import KIND_SHIFT, LEAD

# Bits 58-59 of a token of kind LEAD: a lead-in (0), a label, a form an entry offers, the
# subject of a definition.
LABEL, PART, SUBJECT = 1, 2, 3
ROLE_SHIFT = 58
_FORM_MASK = np.uint64((1 << ROLE_SHIFT) - 1)
# A list item of at most this many words, and not a sentence, is a name.
LABEL_MAX_WORDS = 6
LABEL_TYPES = frozenset({"list_item"})
PART_TYPES = frozenset({"list_item", "heading"})
# Sentence punctuation ends a statement (".NET" and "go.opentelemetry.io" keep their dots).
_SENTENCE = r"[.!?。！？](?:\s|$)"
_COLON = r"[:：]"
# ``key: value``: the key before the first colon, the value after it (both non-empty).
_KEY_VALUE = r"^\s*([^:：]+?)\s*[:：]\s*(\S[\s\S]*?)\s*$"
# A type name defined at the start of a text: PascalCase, two humps or more, then a colon.
_DEFINED_TYPE = r"^\s*([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*[a-z0-9])+)\s*[:：]"


def _token(forms: np.ndarray, role: int) -> np.ndarray:
    return ((forms & _FORM_MASK) | np.uint64(role << ROLE_SHIFT)
            | (np.uint64(LEAD) << np.uint64(KIND_SHIFT))).astype(np.uint64)


def _forms_of(texts: pl.Series) -> np.ndarray:
    from .sections import forms

    return forms(texts, np.arange(texts.len(), dtype=np.int64))


def label_rows(plain: pl.Series, kinds: pl.Series | None, skip: np.ndarray) -> np.ndarray:
    """The rows of ``plain`` (texts with list markers and markup removed) that are labels;
    ``skip`` holds the rows that are not, lead-ins among them
    (:func:`arrowdedup.facts.sections.lead_ins`, which the caller has computed already)."""
    if kinds is None:
        return np.empty(0, dtype=np.int64)
    typed = kinds.is_in(sorted(LABEL_TYPES)).fill_null(False).to_numpy().astype(bool) & ~skip
    rows = np.flatnonzero(typed).astype(np.int64)
    if rows.size == 0:
        return rows
    texts = plain.gather(rows).fill_null("")
    split = texts.str.split(" ").list.eval(pl.element().filter(pl.element() != ""))
    # A name capitalises its words: a word in lower case is a function word ("Servicio de
    # Pago", "Guide to the SDK"), else the entry says something ("set ebpf in the list",
    # "Install the agent").
    lower = split.list.eval(pl.element().str.replace_all(r"[^\p{L}\p{N}'-]", "")
                            .filter(pl.element().str.contains(r"^\p{Ll}"))
                            .is_in(sorted(_function_words()))).list.all()
    label = (texts.str.contains(r"\w")
             & ~texts.str.contains(_COLON) & ~texts.str.contains(_SENTENCE)
             & ~texts.str.contains("\n")
             & (split.list.len() <= LABEL_MAX_WORDS) & lower).fill_null(False).to_numpy()
    return rows[label.astype(bool)]


@functools.cache
def _function_words() -> frozenset[str]:
    """The function words of every language of :mod:`arrowdedup.facts.function_words`: a name's
    lower-case words are these, whatever the entry's language."""
    from .function_words import BY_LANGUAGE

    return frozenset().union(*BY_LANGUAGE.values())


def defined_type(texts: pl.Series) -> pl.Series:
    """The type name each text defines (``Name: ...``), its plural ``s`` dropped; null where
    the text defines none."""
    term = texts.str.extract(_DEFINED_TYPE, 1)
    if term.null_count() == term.len():
        return term  # the common case, without the plural's expression
    # As the scanner reads a type name (fact_scan.type_name_end): not after "i", "s", "u".
    return pl.select(pl.when(term.str.contains(r"[a-hj-rtv-z]s$"))
                     .then(term.str.slice(0, term.str.len_chars() - 1))
                     .otherwise(term)).to_series()


def entry_parts(plain: pl.Series, kinds: pl.Series | None, skip: np.ndarray, lead: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """(row, token) pairs: the label, part and subject tokens of the rows of ``plain`` not in
    ``skip`` (rows of unguarded types and code); ``lead`` marks the lead-ins, never labels."""
    owners: list[np.ndarray] = []
    tokens: list[np.ndarray] = []
    texts = plain.fill_null("")
    labels = label_rows(texts, kinds, skip | lead)
    if labels.size:
        owners.append(labels)
        tokens.append(_token(_forms_of(texts.gather(labels)), LABEL))
    if kinds is not None:
        typed = kinds.is_in(sorted(PART_TYPES)).fill_null(False).to_numpy().astype(bool) & ~skip
        rows = np.flatnonzero(typed).astype(np.int64)
        if rows.size:
            owned = texts.gather(rows)
            owners.append(rows)
            tokens.append(_token(_forms_of(owned), PART))
            pairs = owned.str.extract_groups(_KEY_VALUE)
            has = pairs.struct.field("1").is_not_null().to_numpy().astype(bool)
            if has.any():
                for field in ("1", "2"):
                    owners.append(rows[has])
                    tokens.append(_token(_forms_of(
                        pairs.struct.field(field).filter(pl.Series(has))), PART))
    subject = defined_type(texts)
    rows = np.flatnonzero(subject.is_not_null().to_numpy().astype(bool) & ~skip).astype(np.int64)
    if rows.size:
        owners.append(rows)
        tokens.append(_token(_forms_of(subject.gather(rows)), SUBJECT))
    if not owners:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64)
    return np.concatenate(owners), np.concatenate(tokens)
