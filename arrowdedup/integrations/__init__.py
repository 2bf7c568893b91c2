"""Adapters for the frameworks RAG engineers already use, each an optional extra.

- :mod:`arrowdedup.integrations.langchain` (``pip install 'arrowdedup[langchain]'``):
  ``DedupTransformer``, ``DedupCompressor``, ``StoreRetriever``;
- :mod:`arrowdedup.integrations.llamaindex` (``[llamaindex]``): ``DedupTransform``,
  ``DedupPostprocessor``, ``StoreRetriever``;
- :mod:`arrowdedup.integrations.haystack` (``[haystack]``): the ``DedupDocuments`` component;
- :mod:`arrowdedup.integrations.datasets` (``[datasets]``): a Hugging Face ``Dataset`` as a
  segments table (``ingest`` and ``ingest_to_store`` take one directly).

Nothing here is imported by ``import arrowdedup``; each module imports its framework when it
is imported itself and raises :class:`~arrowdedup.errors.MissingDependencyError`, naming the
pip command, when the extra is missing. The adapters convert the framework's objects to one
segments table, call the library (:func:`arrowdedup.ingest`, :func:`arrowdedup.dedupe_ranked`,
:func:`arrowdedup.search`) and convert back, so they make exactly the library's decisions.
"""
