"""The parts of benchmarks/taxi_vs_tfx_example.py, shared with scale.py and digits_vs_tfx_mnist.py.

`measure` runs a pipeline process and measures it (wall time, every process's
peak memory); `example` prepares, drives and reads TFX's own example (the
anchor); `report` compares the runs and prints the table. The script keeps the
command line and our pipeline's run, and re-exports these names.
"""
