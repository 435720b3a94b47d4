"""Runs the pipeline locally with LocalDagRunner: `python local_runner.py [flags]`.

Thin on purpose: the pipeline is defined once in pipeline/definition.py.
`python local_runner.py --help` lists the flags.
"""

import sys

from tfxp.cli import exit_now, guarded_main

if __name__ == "__main__":
    exit_now(guarded_main(["run", *sys.argv[1:]]))
