"""Whole-column primitives shared by every stage: XXH64 over string columns (:mod:`.hashing`),
embeddings as one float32 matrix with their norms (:mod:`.vectors`), and large scratch arrays
reused from bucket to bucket (:mod:`.scratch`)."""
