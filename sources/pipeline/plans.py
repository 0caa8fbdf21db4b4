"""Segments: where each of a root's items is written (its segment's source, model and generation)."""

from dataclasses import dataclass

import pathspec

from sources.config import EmbeddingConfig
from sources.ingest import embedding_model_for
from sources.models import EmbeddingModel, Source, WorkspaceRoot
from sources.roots import root_sources_sync


@dataclass(slots=True)
class SegmentPlan:
    source: Source
    glob: str  # "" for the root's default segment
    matcher: pathspec.PathSpec | None
    model: EmbeddingModel
    generation: int  # where this run writes
    rebuilding: bool  # a new model: written beside the active generation, flipped at the end


def segment_plans(root: WorkspaceRoot, config: EmbeddingConfig, *, rebuild: bool = False) -> list[SegmentPlan]:
    root_sources_sync(root=root)
    plans = []
    for segment in root.segments.select_related("source").order_by("pk"):
        assert segment.source is not None  # root_sources_sync gave every segment its source
        matcher = pathspec.GitIgnoreSpec.from_lines([segment.path_glob])
        plans.append(
            _plan(
                segment.source,
                segment.path_glob,
                matcher,
                segment.embedding_model_name or root.embedding_model_name,
                config,
                rebuild,
            )
        )
    # The most specific segment wins: longest glob first, the default last.
    plans.sort(key=lambda p: -len(p.glob))
    assert root.source_id is not None  # root_sources_sync gave the root its source too
    plans.append(_plan(Source.objects.get(pk=root.source_id), "", None, root.embedding_model_name, config, rebuild))
    return plans


def _plan(
    source: Source, glob: str, matcher, model_name: str, config: EmbeddingConfig, rebuild: bool = False
) -> SegmentPlan:
    """Where a segment's files are written; ``rebuild`` (a git history rewritten): beside the active generation."""
    model = embedding_model_for(model_name, config=config)
    rebuilding = source.embedding_model_id is not None and (rebuild or source.embedding_model_id != model.pk)
    generation = source.active_generation + 1 if rebuilding else source.active_generation
    return SegmentPlan(source, glob, matcher, model, generation, rebuilding)


def segment_for(path: str, plans: list[SegmentPlan]) -> SegmentPlan:
    return next(p for p in plans if p.matcher is None or p.matcher.match_file(path))
