"""The one job path: documents or segments tables → bucketed, streamed dedup → a store version
(:mod:`.job`), a store's life through it (:mod:`.update`), and the compile stage that loads
the kernels a run will use (:mod:`.precompile`)."""
