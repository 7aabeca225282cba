"""Scene graphs and Cognitive Expected Scene Graphs (CESG), as plain frozen data.

A :class:`SceneGraph` is what a *factual* parser gives for one sentence: object names,
``(object, attribute)`` pairs and ``(subject, predicate, object)`` triples (FACTUAL /
SPICE style). An object is a name ("worker") or a ``(name, qualifier)`` pair when the
text says which one it is (``("worker", ("on scaffold",))``). A :class:`CESG` adds polarity (paper, "Cognitive Expected Scene Graph"):
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


#: an object of a SceneGraph: a name, or (name, qualifier)
ObjectKey = Any


def split_key(key: ObjectKey) -> tuple[str, tuple[str, ...]]:
    """(name, qualifier) of a SceneGraph object."""
    if isinstance(key, tuple):
        return str(key[0]), tuple(key[1])
    return str(key), ()


@dataclass(frozen=True)
class Node:
    """An object node: its name (head noun with its compounds: "fire extinguisher"),
    whether it is absent, and its qualifier: what the text says to tell it apart from
    other entities of that name ("on scaffold", "left"); empty when nothing does.
    The referential description of paper stage VI is name + qualifier."""

    name: str
    absent: bool
    qualifier: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        return " ".join((self.name, *self.qualifier))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "absent": self.absent}
        if self.qualifier:
            out["qualifier"] = list(self.qualifier)
        return out


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
        return {
            "subject": self.subject.to_json(),
            "predicate": self.predicate,
            "object": self.object.to_json(),
            "negated": self.negated,
        }


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

    present_nodes: tuple[Node, ...] = ()
    absent_objects: tuple[Node, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    relations: tuple[Relation, ...] = ()
    failures: tuple[ParseFailure, ...] = field(default=(), compare=False)

    @property
    def present_objects(self) -> tuple[str, ...]:
        """The present objects' referential descriptions ("worker on scaffold")."""
        return tuple(n.description for n in self.present_nodes)

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
