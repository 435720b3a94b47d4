"""`tfxp init`: a new dataset from files (profiling, schema, the dataset file, publishing, the model choice)."""
