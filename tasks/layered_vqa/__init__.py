"""Layered-VQA task folder (lmms-eval YAML + thin wiring); the logic lives in lmms_scene."""
