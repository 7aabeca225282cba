"""Polarity-blind scene-graph tuples of a caption, for the SPICE-style and CAPTURE-style
baselines: what a factual parser sees (negation ignored), from the same dependency-rule
parser CESG uses (the union of each sentence's affirmative graph)."""

from __future__ import annotations

from lmms_scene import cache
from lmms_scene.metrics.cesg.construct import default_pipeline
from lmms_scene.metrics.cesg.graph import SceneGraph, split_key


def factual_graph(text: str) -> SceneGraph:
    """All objects, attributes and relations of ``text``, negation ignored (memoised)."""

    def compute() -> SceneGraph:
        pipe = default_pipeline()
        sentences = pipe.split(text)
        objects: list[str] = []
        attrs: list[tuple[str, str]] = []
        rels: list[tuple[str, str, str]] = []
        for result in pipe.parser.parse_pairs(sentences, [pipe.strip(s) for s in sentences]):
            if isinstance(result, Exception):
                continue
            g = result[1]
            # plain object names (a factual parser's nodes carry no qualifier)
            objects += [split_key(o)[0] for o in g.objects]
            attrs += [(split_key(o)[0], a) for o, a in g.attributes]
            rels += [(split_key(s)[0], p, split_key(o)[0]) for s, p, o in g.relations]
        return SceneGraph(tuple(dict.fromkeys(objects)), tuple(dict.fromkeys(attrs)), tuple(dict.fromkeys(rels)))

    return cache.memo("captioning.factual_graph", text, compute)


def parser_provenance() -> dict[str, str]:
    return default_pipeline().parser.provenance()
