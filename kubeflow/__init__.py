"""Kubeflow Pipelines runner: compile the one pipeline definition to a KFP v2 spec, deploy it.

`python -m kubeflow compile|deploy --help`. Everything that varies per cluster is
in `kubeflow.config.KubeflowConfig`; the pipeline itself is
`pipeline.definition.create_pipeline`, as for the local and Airflow runners.
"""
