"""Models after training: the registry's aliases, comparing, predicting, batch inference."""
