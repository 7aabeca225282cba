"""Dataset schemas, builders from the original releases, hub publishing and the
embedded sample splits. One module per benchmark (``lmms_scene.data.cooco`` ...)."""
