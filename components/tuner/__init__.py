"""TFX's Tuner, its trials' TensorBoard logs kept in its `tuner_results` artifact."""
