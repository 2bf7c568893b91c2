"""The version of the decision rules a store was written with.

An update re-decides only the documents that changed and keeps every other document's
decisions, so a store must never mix decisions of two rule sets (SPEC §8a). Bump
:data:`RULES_VERSION` with any change to the hash pass, the kernels, salience, the fact guard
or the tokenizer that can change a decision or a stored value; an update of a store written
under another version is refused (naming ``--replace``).
"""

from __future__ import annotations

RULES_VERSION = "18.0"
