"""lmms-scene: scene-context benchmarks and analyses for the lmms-eval harness.

Importing this package is cheap on purpose: it loads no model, reads no dataset and
touches no network. Everything heavy is imported inside the functions that need it.
"""

__version__ = "0.1.0"
