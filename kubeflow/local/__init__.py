"""The Kubeflow local executor: `python -m kubeflow run-local` without a cluster.

`job_runner.py` walks the compiled PipelineJob task by task as KFP would
(`kfp.local`'s DAG walk and placeholder resolution, plus what a TFX-compiled
spec needs beyond it), on `job.py` (the job, its arguments, the run's record) and
`artifacts.py` (the registry standing in for ML Metadata); `cli.py` is the
`run-local` command; `task_handler.py` decides where each task's
`command + args` runs (a subprocess in the image's environment, a fork of a
warm server, or the image under Docker); `forked_tasks.py` is the fork
server's task side (`--runner forked`).
"""
