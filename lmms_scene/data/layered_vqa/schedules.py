"""The table of Layered-VQA's sixteen delivery schedules, without their code.

This is the one list of schedules: :data:`lmms_scene.data.layered_vqa.delivery.SCHEDULES` binds
each entry of :data:`TABLE` to the function that builds its turns (and refuses to
import when the two disagree), the registry's task tuple (``lmms_scene.benchmarks``)
is :data:`TASKS`, and the task YAMLs in ``tasks/layered_vqa/`` are written from it by
``python -m lmms_scene.tasks.layered_vqa._generate_config`` (``make task-yamls``; a test
fails when the committed files are not what that command writes).

Standard library only: ``lmms_scene.benchmarks`` imports it, and importing the registry
stays light (no numpy, no PIL, no harness); so does the package's ``__init__``, which
importing this module runs.

To add a schedule: a row here, its builder in ``lmms_scene.data.layered_vqa.delivery``
(the ``_BUILDERS`` mapping), then ``make task-yamls`` (docs/layered_vqa.md, "Adding a schedule").

>>> TASKS[:2]
('layered_vqa_full', 'layered_vqa_concat_q')
>>> task_name("sharded-q")
'layered_vqa_sharded_q'
"""

from __future__ import annotations

#: families, in Table 1's order
FAMILIES: tuple[str, ...] = ("base", "question", "visual", "alignment", "order", "evidence")

#: The sixteen schedules (Table 10, and the paper's section 3 for the rest), in the order
#: of every table and task list: (name, family, what each turn carries).
#: n = number of shards, L = number of layers, Q the question, I the composite.
TABLE: tuple[tuple[str, str, str], ...] = (
    ("full", "base", "1 turn: Q with I"),
    ("concat-q", "question", "1 turn: q1 q2 .. qn with I"),
    ("sharded-q", "question", "n turns: q1 with I, then q2 .. qn one per turn, no image"),
    ("recap-q", "question", "n+1 turns: sharded-q, then Q again with I"),
    ("snowball-q", "question", "n turns: q1 with I, then q1 q2, then q1 q2 q3, ... (no image after turn 1)"),
    ("concat-v", "visual", "1 turn: Q with all L layers as separate images"),
    ("sharded-v", "visual", "L turns: Q with layer 0, then layers 1 .. L-1 one per turn"),
    ("recap-v", "visual", "L+1 turns: sharded-v, then Q again with I"),
    ("snowball-v", "visual", "L turns: Q with layer 0, then the composite of layers 0..t at turn t"),
    ("aligned", "alignment", "n turns: shard i with its supporting layers (none for a shard with none)"),
    ("misaligned", "alignment", "n turns: shard i with the next supporting set (cyclic) minus its own layers"),
    (
        "ev-first",
        "order",
        "n turns: shard i, with every layer handed over once, supporting layers first (the reverse of ev-last)",
    ),
    (
        "ev-last",
        "order",
        "n turns: shard i, with every layer handed over once, non-supporting layers first, supporting ones in the final turns",
    ),
    ("shuffled", "order", "n turns: shard i, with every layer handed over once, in a seeded random order"),
    ("all-lyr", "evidence", "1 turn: Q with all L layers as separate images, plus the selection prompt"),
    ("oracle", "evidence", "1 turn: Q with only the minimal-sufficient layers, plus the selection prompt"),
)

#: the schedule names, in :data:`TABLE`'s order
NAMES: tuple[str, ...] = tuple(name for name, _, _ in TABLE)

#: the group over every schedule task (and the prefix of every task name)
GROUP = "layered_vqa"


def task_name(schedule: str) -> str:
    """``sharded-q`` -> ``layered_vqa_sharded_q``."""
    return f"{GROUP}_" + schedule.replace("-", "_")


#: one task per schedule, in :data:`TABLE`'s order
TASKS: tuple[str, ...] = tuple(task_name(name) for name in NAMES)


def _check() -> None:
    names = set(NAMES)
    if len(names) != len(NAMES):
        raise ValueError(f"schedules.TABLE: a schedule name is repeated: {list(NAMES)}")
    if len(set(TASKS)) != len(TASKS):
        raise ValueError(f"schedules.TABLE: two schedules give the same task name: {list(TASKS)}")
    for name, family, _ in TABLE:
        if family not in FAMILIES:
            raise ValueError(f"schedules.TABLE: schedule {name!r} has family {family!r}; known: {', '.join(FAMILIES)}")


_check()
