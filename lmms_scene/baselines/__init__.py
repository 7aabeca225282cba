"""Text-only priors for the ``scene_blind`` model: one module per benchmark exposing
``blind_answer(doc, prompt) -> str``. Importing loads no model."""
