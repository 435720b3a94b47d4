"""The performance page's renderers, one module per family of benchmarks.

benchmarks/render_results.py keeps the command line and the registry (which
benchmark's result file each renderer turns into Markdown lines); each module
here holds the renderers of one family, on the shared cell and table helpers
of `tables`.
"""
