"""ML Metadata: the store opener, lineage, diff, graphs, run summary, report lookup, verify."""
