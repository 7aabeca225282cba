"""CESG's rule parser, its words: the closed word lists the dependency rules of
:mod:`~lmms_scene.metrics.cesg.parse` read (negating determiners and subjects, verbs of
lacking and possession, existence and perception, epistemic and idiom words, labels, lost
beings, depictions, qualifying prepositions). Standard library only."""

from __future__ import annotations

#: words whose presence marks a verb or noun phrase as negated (beyond spaCy's `neg`)
_NEG_DET = {"no", "neither"}
_NEG_SUBJ_PRON = {"none", "neither", "nobody", "nothing", "noone"}
_QUANT_OF = {
    "none",
    "neither",
    "all",
    "both",
    "each",
    "either",
    "some",
    "any",
    "most",
    "many",
    "several",
    "one",
    "two",
    "three",
}
_LACK = {"lack", "miss"}
#: verbs whose negation means the object is not there ("not wearing a helmet"); for other
#: verbs only the relation is negated ("nobody is holding the ladder": the ladder is there)
_POSSESSION = {
    "have",
    "wear",
    "carry",
    "use",
    "own",
    "bring",
    "don",
    "put",
    "contain",
    "include",
    "get",
    "keep",
    "feature",
    "involve",
}
#: verbs whose negation makes an indefinite object absent but leaves a definite one there:
#: "she is not holding a purse" (no purse), "nobody is holding the ladder" (the ladder is there)
_HOLDING = {"hold", "grip", "grasp", "clutch"}
#: units and tallies a count of zero can measure: "0 degrees" is a temperature, not an absence
_UNITS = set(
    "degree percent % time point minute hour second day week month year dollar cent euro pound mile meter metre "
    "kilometer kilometre foot feet inch yard kilogram kg gram ounce liter litre mph km cm mm star vote "
    "calorie volt watt".split()
)
_ABSENT_ADJ = {"missing", "absent", "lacking", "unavailable", "gone"}
#: predicates that only state existence: "no sign is visible" == "there is no sign"
_EXIST = {
    "visible",
    "present",
    "available",
    "provide",
    "install",
    "see",
    "evident",
    "exist",
    "place",
    "there",
    "find",
    "detect",
    "notice",
    "spot",
    "observe",
    "identify",
    "locate",
    "apparent",
}
#: perception verbs: "I don't see a helmet" / "I cannot find any sign" says the object is
#: absent; the perceiver (the narrator, the image) is no scene node
_PERCEIVE = {
    "see",
    "notice",
    "observe",
    "spot",
    "find",
    "detect",
    "identify",
    "locate",
    "show",
    "depict",
    "display",
    "portray",
    "spy",
    "discern",
    "recognize",
    "recognise",
}
#: raising verbs whose negation belongs to their complement ("does not appear to be")
_RAISING = {"appear", "seem", "look", "happen", "tend"}
#: adjectives whose complement is not done: "unable to see", "impossible to find"
_UNABLE = {"unable", "impossible"}
#: modifiers that say how something is seen or judged, not what it is ("no visible X")
_EPISTEMIC_ADJ = {
    "visible",
    "apparent",
    "evident",
    "obvious",
    "noticeable",
    "discernible",
    "observable",
    "identifiable",
    "detectable",
    "present",
    "available",
    "proper",
    "adequate",
    "required",
    "necessary",
    "appropriate",
    "suitable",
    "sufficient",
    "any",
    "additional",
    "single",
    "clear",
}
#: abstract nouns after "no"/"without" that are idioms, not absent objects ("no doubt")
_IDIOM_NOUNS = {
    "doubt",
    "question",
    "problem",
    "issue",
    "concern",
    "need",
    "way",
    "reason",
    "exception",
    "denying",
    "time",
    "chance",
    "matter",
    "difference",
    "longer",
    "hesitation",
    "fail",
    "sign_of",
    "evidence",
    "indication",
    "trace",
}
#: attitudes after "no"/"without" ("pays no attention", "without interest"): not absent objects
_ATTITUDE_NOUNS = {
    "attention",
    "heed",
    "interest",
    "intention",
    "idea",
    "mind",
    "regard",
    "respect",
    "mercy",
    "effort",
    "attempt",
}
#: "the lack of lighting", "in the absence of a rail": the "of" object is absent
_LACK_NOUNS = {"lack", "absence"}
#: "devoid of customers", "bereft of leaves": the "of" object is absent
_DEVOID = {"devoid", "bereft"}
#: heads that make a quoted or named "no X" a label, not an absence ("a no parking sign")
_LABEL_NOUNS = {
    "sign",
    "signage",
    "sticker",
    "label",
    "banner",
    "poster",
    "notice",
    "symbol",
    "zone",
    "placard",
    "plate",
    "board",
    "tape",
    "text",
    "writing",
    "message",
}
#: people and animals: "a missing person", "a poster of a missing woman" say lost, not absent
_LOST_BEINGS = {
    "person",
    "people",
    "man",
    "woman",
    "child",
    "children",
    "kid",
    "girl",
    "boy",
    "dog",
    "cat",
    "pet",
    "teen",
    "teenager",
    "student",
    "hiker",
}
#: "no X" said of X: "no sign of X", "no evidence of X": X is what is absent
_EVIDENCE = {"evidence", "sign", "indication", "trace", "hint", "presence"}
#: narrators and depictions: never scene nodes of a perception verb
_PERCEIVERS = {
    "i",
    "we",
    "you",
    "one",
    "image",
    "picture",
    "photo",
    "photograph",
    "scene",
    "frame",
    "view",
    "camera",
    "it",
}
#: the scene itself as a subject: "the site lacks a fire extinguisher" == "there is no
#: fire extinguisher" (no relation with the site); depictions as prepositional objects
_SCENE_NOUNS = {
    "site",
    "scene",
    "area",
    "image",
    "picture",
    "photo",
    "photograph",
    "frame",
    "view",
    "workplace",
    "workspace",
    "setting",
    "environment",
    "premises",
    "location",
    "worksite",
    "jobsite",
    "shot",
    "footage",
}
_DEPICTIONS = {"image", "picture", "photo", "photograph", "frame", "scene", "view", "shot", "footage"}
#: passive verbs whose "with" object is what is (not) there: "not equipped with harnesses"
_WITH_VERBS = {"equip", "provide", "fit", "supply", "furnish", "outfit"}
#: indefinite people: "no one", "nobody" -> a person node
_PERSON_WORDS = {"one", "nobody", "noone", "someone", "anyone", "everyone", "somebody", "anybody", "everybody"}
_NOUN = {"NOUN", "PROPN"}
#: prepositions whose object tells two entities of one name apart ("the worker on the
#: scaffold" vs "the worker on the ground"); with/without/of state parts and possessions
_QUALIFYING_PREPS = {
    "on",
    "in",
    "at",
    "near",
    "beside",
    "by",
    "behind",
    "under",
    "above",
    "below",
    "next",
    "inside",
    "outside",
    "from",
    "atop",
    "underneath",
    "beneath",
    "around",
    "along",
    "across",
    "over",
    "between",
    "left",
    "right",
}
