"""CESG stage IV, the model parsers (loaded only when asked): :class:`FactualT5Parser`
(the FACTUAL T5 scene-graph parser through transformers) and :class:`DiscoSGParser` (the
paper's DiscoSG-Refiner). The offline default, the rule parser, is
:mod:`~lmms_scene.metrics.cesg.parse`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lmms_scene import cache
from lmms_scene.metrics.cesg.graph import SceneGraph
from lmms_scene.nlp import MissingNLPComponent

# -- FACTUAL T5 (high fidelity) ---------------------------------------------------------

FACTUAL_MODEL = "lizhuang144/flan-t5-base-VG-factual-sg"
_FACTUAL_PROMPT = "Generate Scene Graph: "


def parse_factual_output(text: str) -> SceneGraph:
    """FACTUAL's linearised output ``( man , wear , goggles ) , ( man , is , tall ) ,
    ( helmet )`` -> a SceneGraph; an ``is`` triple is an attribute."""
    objects: list[str] = []
    attributes: list[tuple[str, str]] = []
    relations: list[tuple[str, str, str]] = []
    for inner in re.findall(r"\(([^()]*)\)", text):
        parts = [p.strip().lower() for p in inner.split(",")]
        parts = [p for p in parts if p]
        if len(parts) == 1:
            objects.append(parts[0])
        elif len(parts) == 3:
            s, p, o = parts
            objects.append(s)
            if p in ("is", "are"):
                attributes.append((s, o))
            else:
                objects.append(o)
                relations.append((s, p, o))
    return SceneGraph(tuple(dict.fromkeys(objects)), tuple(attributes), tuple(relations))


class FactualT5Parser:
    """The FACTUAL T5 scene-graph parser through transformers (batched), parsing negative
    and affirmative sentences independently (paper, stage IV)."""

    one_parse = False

    def __init__(
        self, model: str = FACTUAL_MODEL, device: str | None = None, batch_size: int = 32, max_new_tokens: int = 128
    ):
        self.name = f"FACTUAL T5 ({model})"
        self.model_name = model
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.device = cache.torch_device(device)

        def load() -> tuple[Any, Any]:
            from transformers import (
                AutoModelForSeq2SeqLM,
                AutoTokenizer,
            )  # deferred: transformers (imports torch) is heavy to import

            try:
                tok = AutoTokenizer.from_pretrained(model)
                net = cache.load_pretrained(AutoModelForSeq2SeqLM, model, self.device)
            except OSError as exc:
                raise MissingNLPComponent(
                    f"FACTUAL parser {model!r} is not available (download it once with network, or pass a local folder); "
                    "the offline default is parser='rule'"
                ) from exc
            return tok, net

        self._tok, self._net = cache.cached(("factual_t5", model, self.device), load)

    def provenance(self) -> dict[str, Any]:
        return {"parser": self.name}

    def generate(self, sentences: list[str]) -> list[str]:
        """FACTUAL's linearised graphs of ``sentences`` (batched, greedy)."""
        import torch  # deferred: torch is heavy to import

        out: list[str] = []
        for start in range(0, len(sentences), self.batch_size):
            chunk = [_FACTUAL_PROMPT + s for s in sentences[start : start + self.batch_size]]
            batch = self._tok(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt").to(self.device)
            with torch.no_grad():
                ids = self._net.generate(**batch, max_new_tokens=self.max_new_tokens, num_beams=1, do_sample=False)
            out.extend(self._tok.batch_decode(ids, skip_special_tokens=True))
        return out

    def _parse(self, sentences: list[str]) -> list[SceneGraph]:
        return [parse_factual_output(t) for t in self.generate(sentences)]

    def parse_pairs(
        self, negative: Sequence[str], affirmative: Sequence[str]
    ) -> list[tuple[SceneGraph, SceneGraph] | Exception]:
        graphs = self._parse([*negative, *affirmative])
        n = len(negative)
        return list(zip(graphs[:n], graphs[n:]))


# -- DiscoSG-Refiner (the paper's parser) ------------------------------------------------

DISCOSG_MODEL = "sqlinn/DiscoSG-Refiner-Large-t5-only"
DISCOSG_INSTALL = (
    "pip install --no-deps discosg==0.0.5 peft (--no-deps: the discosg package pins torch<=2.6, which would replace "
    "the torch lmms-scene runs on)"
)


class DiscoSGParser:
    """DiscoSG-Refiner (Lin et al. 2025) through the ``discosg`` package, as the paper's
    stage IV: each sentence's initial graph (FACTUAL T5, ``initial``) is refined by
    DiscoSG's delete-then-insert passes; negative and affirmative sentences are parsed
    independently. Everything is loaded here, so a missing package or checkpoint stops a
    run before the model generates anything, saying how to get it."""

    one_parse = False

    def __init__(
        self, model: str = DISCOSG_MODEL, initial: str = FACTUAL_MODEL, device: str | None = None, batch_size: int = 16
    ):
        self.name = f"DiscoSG-Refiner ({model}; initial graphs: FACTUAL T5 {initial})"
        self.model_name, self.batch_size = model, batch_size
        self.device = cache.torch_device(device)

        def load() -> Any:
            try:
                from discosg.parser.DualTaskSceneGraphParser import (
                    DualTaskSceneGraphParser,
                )  # deferred: optional (discosg may not be installed)
            except ImportError as exc:
                raise MissingNLPComponent(
                    f"parser='discosg' needs the discosg package: {DISCOSG_INSTALL}; the offline default is parser='rule'"
                ) from exc
            try:
                return DualTaskSceneGraphParser(model_path=model, device=self.device, lemmatize=False, lowercase=True)
            except (OSError, ValueError) as exc:
                raise MissingNLPComponent(
                    f"DiscoSG-Refiner checkpoint {model!r} is not available (download it once with network: `hf download {model}` "
                    "and `hf download google/flan-t5-base` for its tokenizer, or pass a local folder as model=); "
                    "the offline default is parser='rule'"
                ) from exc

        self._refiner = cache.cached(("discosg", model, self.device), load)
        self._initial = FactualT5Parser(model=initial, device=device)

    def provenance(self) -> dict[str, Any]:
        return {"parser": self.name}

    def parse_pairs(
        self, negative: Sequence[str], affirmative: Sequence[str]
    ) -> list[tuple[SceneGraph, SceneGraph] | Exception]:
        sentences = [*negative, *affirmative]
        initial = dict(zip(sentences, self._initial.generate(sentences)))
        refined = self._refiner.parse(
            descriptions=list(initial), graph_to_fix=initial, batch_size=self.batch_size, task="delete_before_insert"
        )
        graphs = [parse_factual_output(refined["insert"].get(s) or initial[s]) for s in sentences]
        n = len(negative)
        return list(zip(graphs[:n], graphs[n:]))
