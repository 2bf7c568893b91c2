"""The fact guard of SPEC section 2 step 4: what a merge may not lose.

:mod:`.guard` computes the signatures and decides (the rule's documentation is its docstring);
:mod:`.scan_jit` is the fact tokenizer, :mod:`.content` and :mod:`.content_jit` the content
words, :mod:`.entries` and :mod:`.sections` the list-entry and section tokens,
:mod:`.function_words` the word tables, :mod:`.conflict_jit` the test the kernels compile in,
:mod:`.detail` the words of a refusal and :mod:`.rules` the rules version a store records.
"""

from .._lazy import install

__getattr__ = install(__name__, {
    "fact_conflict": "guard", "fact_signatures": "guard", "signatures_of": "guard",
    "conflict_reasons": "guard",
})
