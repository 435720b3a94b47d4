"""Beam's own planning phases (fusion, combiner lifting, SDF expansion), plus one: Reshuffle
as a distribution boundary.

The FnApiRunner runs in one process, so it fuses straight through Reshuffle and through an
SDF's split: a file read would then run in one Spark task. Here Reshuffle is a known runner
transform, so Beam's SDF expansion puts one between the split of the restrictions and their
processing, and `expand_reshuffle` turns each into a write and a read of a `reshuffle:`
buffer that the runner spreads over the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import translations
from apache_beam.runners.worker import bundle_processor

RESHUFFLE_KIND = "reshuffle"


def expand_reshuffle(
    stages: Iterable[translations.Stage], context: translations.TransformContext
) -> Iterator[translations.Stage]:
    """Each Reshuffle becomes a write and a read of its own buffer, which fusion never
    crosses (as `translations.expand_gbk` does for GroupByKey)."""
    for stage in stages:
        transform = translations.only_transform(stage.transforms)
        if transform.spec.urn != common_urns.composites.RESHUFFLE.urn:
            yield stage
            continue
        for pcoll_id in list(transform.inputs.values()) + list(transform.outputs.values()):
            context.length_prefix_pcoll_coders(pcoll_id)
        buffer_id = translations.create_buffer_id(stage.name, kind=RESHUFFLE_KIND)
        write = translations.Stage(
            transform.unique_name + "/Write",
            [
                beam_runner_api_pb2.PTransform(
                    unique_name=transform.unique_name + "/Write",
                    inputs={"in": _main_input(transform, context)},
                    spec=beam_runner_api_pb2.FunctionSpec(
                        urn=bundle_processor.DATA_OUTPUT_URN, payload=buffer_id
                    ),
                )
            ],
            downstream_side_inputs=frozenset(),
            must_follow=stage.must_follow,
        )
        yield write
        yield translations.Stage(
            transform.unique_name + "/Read",
            [
                beam_runner_api_pb2.PTransform(
                    unique_name=transform.unique_name + "/Read",
                    outputs=transform.outputs,
                    spec=beam_runner_api_pb2.FunctionSpec(
                        urn=bundle_processor.DATA_INPUT_URN, payload=buffer_id
                    ),
                )
            ],
            downstream_side_inputs=stage.downstream_side_inputs,
            must_follow=translations.union(frozenset([write]), stage.must_follow),
        )


def _main_input(
    transform: beam_runner_api_pb2.PTransform, context: translations.TransformContext
) -> str:
    """The Reshuffle's data input. The one Beam's SDF expansion inserts also lists the
    DoFn's side inputs; its data input is the one encoded like its output."""
    inputs = list(transform.inputs.values())
    if len(inputs) == 1:
        return inputs[0]
    pcollections = context.components.pcollections
    output_coder = pcollections[translations.only_element(transform.outputs.values())].coder_id
    return translations.only_element(p for p in inputs if pcollections[p].coder_id == output_coder)


def create_stages(
    pipeline_proto: beam_runner_api_pb2.Pipeline,
    use_state_iterables: bool = False,
    is_drain: bool = False,
) -> tuple[translations.TransformContext, list[translations.Stage]]:
    """The FnApiRunner's phases in its order, with `expand_reshuffle` after the SDF
    expansion (which is what inserts the SDF's Reshuffle)."""
    phases: list[Any] = [
        translations.annotate_downstream_side_inputs,
        translations.fix_side_input_pcoll_coders,
        translations.pack_combiners,
        translations.lift_combiners,
        translations.expand_sdf,
        expand_reshuffle,
        translations.expand_gbk,
        translations.sink_flattens,
        translations.greedily_fuse,
        translations.read_to_impulse,
        translations.impulse_to_input,
        translations.sort_stages,
        translations.add_impulse_to_dangling_transforms,
        translations.setup_timer_mapping,
        translations.populate_data_channel_coders,
    ]
    return translations.create_and_optimize_stages(
        pipeline_proto,
        phases=phases,
        known_runner_urns=frozenset(
            [
                common_urns.primitives.FLATTEN.urn,
                common_urns.primitives.GROUP_BY_KEY.urn,
                common_urns.composites.RESHUFFLE.urn,
            ]
        ),
        use_state_iterables=use_state_iterables,
        is_drain=is_drain,
    )
