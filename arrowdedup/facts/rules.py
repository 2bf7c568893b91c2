"""The version of the decision rules a store was written with.

An update re-decides only the documents that changed and keeps every other document's
decisions, so a store must never mix decisions of two rule sets (SPEC §8a). Bump
:data:`RULES_VERSION` with any change to the hash pass, the kernels, salience, the fact guard
or the tokenizer that can change a decision or a stored value; an update of a store written
under another version is refused (naming ``--replace``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RULES_VERSION = "20.0"

# The first rules whose stored ``fact_signature`` values the guard reads as they are: 18.0
# widened the kind field to four bits for the content tokens; 20.0 added the label, part and
# subject tokens (:mod:`arrowdedup.facts.entries`), which older signatures lack.
SIGNATURE_RULES = 20


def signatures_current(manifest: Mapping[str, Any]) -> bool:
    """Were a store's ``fact_signature`` values written in today's layout?"""
    try:
        return int(str(manifest.get("rules", "0")).split(".")[0]) >= SIGNATURE_RULES
    except ValueError:
        return False
