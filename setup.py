"""Maps the top-level ``tasks/`` and ``templates/`` folders into the package as
``lmms_scene.tasks`` and ``lmms_scene.templates``; everything else is in pyproject.toml.

The package list is computed because a new task folder must not need an edit here.
"""

from setuptools import find_packages, setup

MAPPED = {"lmms_scene.tasks": "tasks", "lmms_scene.templates": "templates"}

packages = find_packages(include=["lmms_scene", "lmms_scene.*"])
for name, folder in MAPPED.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir={"lmms_scene": "lmms_scene", **MAPPED})
