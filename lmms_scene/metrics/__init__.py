"""Scores computed on model outputs: CLIP-based scores (:mod:`.clip`) and object-naming
metrics for COOCO (:mod:`.naming`). Importing this package loads no model."""
