"""The model card: one self-contained HTML page per evaluated model, beside every pushed version."""
