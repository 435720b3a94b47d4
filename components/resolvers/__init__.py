"""Resolvers: which earlier artifacts a run reads (the span window, the drift baseline, the model to beat)."""
