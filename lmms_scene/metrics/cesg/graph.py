"""Scene graphs and Cognitive Expected Scene Graphs (CESG), as plain frozen data.

A :class:`SceneGraph` is what a *factual* parser gives for one sentence: object names,
``(object, attribute)`` pairs and ``(subject, predicate, object)`` triples (FACTUAL /
SPICE style). A :class:`CESG` adds polarity (paper, "Cognitive Expected Scene Graph"):
absent objects (black nodes), negated attributes and negated relations (dashed edges),
each dependent node marked present or absent (the paper's ``e^m``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SceneGraph:
    objects: tuple[str, ...] = ()
    attributes: tuple[tuple[str, str], ...] = ()
    relations: tuple[tuple[str, str, str], ...] = ()

    def is_empty(self) -> bool:
        return not (self.objects or self.attributes or self.relations)


@dataclass(frozen=True)
class Node:
    """An object node: its referential description (name) and whether it is absent."""

    name: str
    absent: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "absent": self.absent}


@dataclass(frozen=True)
class Attribute:
    node: Node
    attribute: str
    negated: bool

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node.to_json(), "attribute": self.attribute, "negated": self.negated}


@dataclass(frozen=True)
class Relation:
    subject: Node
    predicate: str
    object: Node
    negated: bool

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject.to_json(), "predicate": self.predicate, "object": self.object.to_json(), "negated": self.negated}


@dataclass(frozen=True)
class ParseFailure:
    """A sentence a stage could not process (the row is still scored without it)."""

    stage: str
    sentence: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"stage": self.stage, "sentence": self.sentence, "error": self.error}


@dataclass(frozen=True)
class CESG:
    """A scene-level CESG: present objects (merged by identical description), absent
    objects, attributes and relations (negated ones never merged)."""

    present_objects: tuple[str, ...] = ()
    absent_objects: tuple[Node, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    relations: tuple[Relation, ...] = ()
    failures: tuple[ParseFailure, ...] = field(default=(), compare=False)

    @property
    def negated_attributes(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.negated)

    @property
    def negated_relations(self) -> tuple[Relation, ...]:
        return tuple(r for r in self.relations if r.negated)

    def has_absent_information(self) -> bool:
        return bool(self.absent_objects or self.negated_attributes or self.negated_relations)

    def to_json(self) -> dict[str, Any]:
        return {
            "present_objects": list(self.present_objects),
            "absent_objects": [n.name for n in self.absent_objects],
            "attributes": [a.to_json() for a in self.attributes],
            "relations": [r.to_json() for r in self.relations],
            "failures": [f.to_json() for f in self.failures],
        }
