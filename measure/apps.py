from django.apps import AppConfig


class MeasureConfig(AppConfig):
    # Evaluation and benchmarks (rag_eval, rag_bench): they use the product, the
    # product never imports them (tests/test_import_graph.py). No models of its own.
    name = "measure"
    verbose_name = "Measurement"
