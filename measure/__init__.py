"""Measurement apart from the product: retrieval quality (`rag_eval`) and speed (`rag_bench`)."""
