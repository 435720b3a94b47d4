"""`python -m kubeflow compile|deploy|run-local`: the pipeline on Kubeflow Pipelines.

  compile    build the KFP v2 PipelineJob JSON from the one pipeline definition (offline)
  deploy     compile (or take --package), upload as a pipeline or a new version, start a run
  run-local  run a compiled PipelineJob here, task by task, with KFP's local orchestrator

Settings come from flags, else environment variables (KFP_IMAGE,
KFP_PIPELINE_ROOT, KFP_HOST, KFP_NAMESPACE, KFP_TOKEN). See docs/orchestrators.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from kubeflow.config import (  # environment first
    BEAM_PRESETS,
    DEFAULT_RESOURCES,
    DEFAULT_TRAINER_MACHINE,
    KubeflowConfig,
    KubeflowConfigError,
    Resources,
)
from pipeline.datasets import DEFAULT_DATASET, dataset_names


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _add_compile_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", default=_env("KFP_IMAGE"), help="container image [KFP_IMAGE]")
    p.add_argument(
        "--pipeline-root",
        default=_env("KFP_PIPELINE_ROOT"),
        help="artifact root: gs://..., s3://... or a path all pods mount [KFP_PIPELINE_ROOT]",
    )
    p.add_argument(
        "--dataset", default=DEFAULT_DATASET, help=f"dataset config ({', '.join(dataset_names())})"
    )
    p.add_argument("--data-root", help="raw data inside the container or a URI (default: in image)")
    p.add_argument("--schema-file", help="curated schema inside the container or a URI")
    p.add_argument(
        "--beam-runner",
        default="direct",
        help=f"Beam runner preset: {', '.join(BEAM_PRESETS)} (default: direct, in the pod)",
    )
    p.add_argument(
        "--spark-master",
        help="--beam-runner spark: the Spark cluster's master the pods reach, spark://HOST:PORT",
    )
    p.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra Beam flag, repeatable, e.g. --beam-arg=--project=my-project",
    )
    p.add_argument(
        "--resources",
        action="append",
        default=[],
        metavar="COMPONENT=CPU,MEMORY",
        help="pod limits, repeatable, e.g. Trainer=4,16G (defaults: "
        + "; ".join(f"{k}={v.cpu:g},{v.memory}" for k, v in DEFAULT_RESOURCES.items())
        + ")",
    )
    p.add_argument("--no-default-resources", action="store_true", help="drop the defaults")
    p.add_argument("--train-steps", type=int, help="training steps (default from the dataset)")
    p.add_argument(
        "--trainer-workers",
        type=int,
        default=1,
        metavar="N",
        help="N > 1: train on N workers, a Vertex AI custom job (MultiWorkerMirroredStrategy)",
    )
    p.add_argument("--vertex-project", help="with --trainer-workers > 1: the GCP project")
    p.add_argument("--vertex-region", help="with --trainer-workers > 1: e.g. us-central1")
    p.add_argument(
        "--trainer-machine-type",
        default=DEFAULT_TRAINER_MACHINE,
        help=f"with --trainer-workers > 1: each worker's machine (default {DEFAULT_TRAINER_MACHINE})",
    )
    p.add_argument("--no-cache", action="store_true", help="disable KFP's step cache")
    p.add_argument("-o", "--output", help="compiled file (default build/kubeflow/<name>.json)")


def _kubeflow_config(args: argparse.Namespace) -> KubeflowConfig:
    resources = {} if args.no_default_resources else dict(DEFAULT_RESOURCES)
    for item in args.resources:
        component, sep, value = item.partition("=")
        if not sep or not component:
            raise KubeflowConfigError(
                f"--resources {item!r}: expected COMPONENT=CPU,MEMORY such as Trainer=4,16G"
            )
        resources[component] = Resources.parse(value)
    config = KubeflowConfig(
        image=args.image or "",
        pipeline_root=args.pipeline_root or "",
        dataset=args.dataset,
        data_root=args.data_root,
        schema_file=args.schema_file,
        beam_runner=args.beam_runner,
        spark_master=args.spark_master,
        extra_beam_args=tuple(args.beam_arg),
        resources=resources,
        train_steps=args.train_steps,
        trainer_workers=args.trainer_workers,
        vertex_project=args.vertex_project,
        vertex_region=args.vertex_region,
        trainer_machine_type=args.trainer_machine_type,
        enable_cache=not args.no_cache,
        output_file=args.output,
    )
    config.validate()
    return config


def _compile(args: argparse.Namespace) -> tuple[dict, str]:
    from kubeflow.compiler import compile_pipeline, write_pipeline_job

    config = _kubeflow_config(args)
    print(f"compiling pipeline {config.base.pipeline_name!r} for Kubeflow Pipelines ...")
    job = compile_pipeline(config)
    path = write_pipeline_job(job, config.output_path)
    spec = job["pipelineSpec"]
    print(f"  tasks:         {len(spec['root']['dag']['tasks'])}")
    print(f"  image:         {config.image}")
    print(f"  pipeline root: {config.pipeline_root}")
    print(f"  data root:     {config.container_data_root}")
    print(f"  beam:          {config.beam_runner} {' '.join(config.beam_args())}".rstrip())
    if config.trainer_workers > 1:
        print(
            f"  trainer:       {config.trainer_workers} workers, Vertex AI custom job in "
            f"{config.vertex_project}/{config.vertex_region} ({config.trainer_machine_type})"
        )
    print(f"wrote {path}")
    return job, path


def cmd_compile(args: argparse.Namespace) -> int:
    _compile(args)
    print("next: python -m kubeflow deploy --package <that file> --host https://KFP-HOST")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    from kubeflow.compiler import load_pipeline_job
    from kubeflow.deploy import DeployTarget, check_package, deploy

    if args.package:
        job, _ = load_pipeline_job(args.package)
        print(f"loaded {args.package}")
    else:
        job, _ = _compile(args)
    for warning in check_package(job, image=args.image if args.package else None):
        print(f"warning: {warning}", file=sys.stderr)
    spec = job["pipelineSpec"]
    if args.dry_run:
        from kubeflow.compiler import parse_pipeline_spec
        from kubeflow.deploy import spec_digest

        parse_pipeline_spec(spec)
        print(
            f"dry run: PipelineSpec {spec['pipelineInfo']['name']!r} is valid "
            f"({len(spec['root']['dag']['tasks'])} tasks, sha256 {spec_digest(spec)[:12]}); "
            f"would upload it to {args.host or '<--host / KFP_HOST>'} and start a run. "
            "Nothing was sent."
        )
        return 0
    target = DeployTarget(
        host=args.host or "",
        namespace=args.namespace,
        token=args.token,
        experiment=args.experiment,
        run_name=args.run_name,
        version_name=args.version_name,
        timeout_s=args.timeout,
    )
    result = deploy(job, target)
    what = "created pipeline" if result.pipeline_created else "new version of pipeline"
    print(f"{what} {result.pipeline_id} (version {result.version_name}: {result.version_id})")
    print(f"run id: {result.run_id}")
    print(f"run url: {result.run_url}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kubeflow",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{compile,deploy,run-local}")
    comp = sub.add_parser("compile", help="compile the pipeline to a KFP v2 PipelineJob JSON")
    _add_compile_flags(comp)
    comp.set_defaults(func=cmd_compile)

    dep = sub.add_parser("deploy", help="upload the compiled pipeline and start a run")
    _add_compile_flags(dep)
    dep.add_argument("--package", help="deploy this compiled file instead of compiling")
    dep.add_argument("--host", default=_env("KFP_HOST"), help="KFP endpoint URL [KFP_HOST]")
    dep.add_argument(
        "--namespace", default=_env("KFP_NAMESPACE"), help="multi-user namespace [KFP_NAMESPACE]"
    )
    dep.add_argument("--token", default=_env("KFP_TOKEN"), help="bearer token [KFP_TOKEN]")
    dep.add_argument("--experiment", help="experiment name (default: the pipeline's name)")
    dep.add_argument("--run-name", help="run display name (default: <pipeline> <UTC time>)")
    dep.add_argument("--version-name", help="pipeline version name (default: time + spec hash)")
    dep.add_argument("--timeout", type=float, default=10.0, help="connect timeout, seconds")
    dep.add_argument(
        "--dry-run", action="store_true", help="compile and validate only; contact no server"
    )
    dep.set_defaults(func=cmd_deploy)

    from kubeflow.local import cli as run_local

    loc = sub.add_parser("run-local", help="run a compiled PipelineJob here, task by task")
    run_local.add_arguments(loc)
    loc.set_defaults(func=run_local.cmd_run_local)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from kubeflow.compiler import KubeflowCompileError
    from kubeflow.deploy import KubeflowDeployError
    from kubeflow.local.job import LocalRunError

    args = build_parser().parse_args(argv)
    root = logging.getLogger()
    level = root.level
    # Quiet for the command only: a caller in the same process (a test, a notebook) gets
    # its own logging level and warning filters back.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")  # TF/Google client deprecation noise, not ours
        root.setLevel(logging.ERROR)  # Beam/absl start-up chatter
        try:
            return args.func(args)
        except (
            KubeflowConfigError,
            KubeflowCompileError,
            KubeflowDeployError,
            LocalRunError,
        ) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        finally:
            root.setLevel(level)


if __name__ == "__main__":
    from tfxp.cli import exit_now  # no interpreter teardown: seconds and noise

    exit_now(main())
