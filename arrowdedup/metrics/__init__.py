"""Analytics over a store (SPEC §8): DuckDB views, warnings, Prometheus text, HTML report."""

from .prometheus import prometheus_text
from .report import (
    benchmark_results,
    benchmark_tables,
    figure_png,
    figures,
    render_html,
    report_data,
    top_boosted,
    write_report,
)
from .views import CORPUS_METRICS, connect, corpus_metrics, metric_views
from .warnings import MetricWarning, compute_warnings

__all__ = [
    "CORPUS_METRICS",
    "MetricWarning",
    "benchmark_results",
    "benchmark_tables",
    "compute_warnings",
    "connect",
    "corpus_metrics",
    "figure_png",
    "figures",
    "metric_views",
    "prometheus_text",
    "render_html",
    "report_data",
    "top_boosted",
    "write_report",
]
