"""Phase 1 of SPEC section 2, dedup inside each document: the plan and its stages
(:mod:`.ingest`), the greedy kernels (:mod:`.kernels`, :mod:`.kernels_jit`), the BLAS-blocked
kernel for large groups (:mod:`.blocked`), LSH mode (:mod:`.lsh`) and the default salience
scorer (:mod:`.salience`)."""
