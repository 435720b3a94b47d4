"""The serving check: the candidate SavedModel, loaded and queried in a fresh process that knows nothing of this project."""
