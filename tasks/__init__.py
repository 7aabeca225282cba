"""lmms-eval task folders of lmms-scene (installed as ``lmms_scene.tasks``).

Pass this folder to the harness with ``--include_path "$(lmms-scene tasks-path)"``.
"""
