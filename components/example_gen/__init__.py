"""ExampleGens: checked CSV (Arrow or TFX reader) and image class folders, with their shared driver."""
