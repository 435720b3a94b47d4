"""TF Serving's gRPC API: PredictionService (Predict, Classify, Regress, GetModelMetadata)
and ModelService.GetModelStatus, with the messages of `tensorflow-serving-api`, so a
client written for TF Serving works unchanged.

The same `Service` as the REST API answers (batching, A/B, request log,
metrics); a client fault is INVALID_ARGUMENT or NOT_FOUND with the message the
REST API gives, and every response's `model_spec` names the version that
answered.
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent import futures

import grpc
import numpy as np

from runtime.access import log_refused
from serving.codec import ClientError, model_error
from serving.repository import NotFound
from serving.security import bearer_matches
from serving.service import Service, classify_results, regress_results
from serving.status import signature_def_map

log = logging.getLogger("serving")

DEFAULT_WORKERS = 32


def _api(name: str):
    """Auth, errors as gRPC status codes, and the metrics, around one RPC."""

    def wrap(method):
        @functools.wraps(method)
        def handler(self, request, context):
            import tensorflow as tf

            started = time.perf_counter()
            named = ["", ""]
            code = 200
            try:
                if self.token is not None:
                    meta = dict(context.invocation_metadata())
                    if not bearer_matches(meta.get("authorization"), self.token):
                        code = 401
                        log_refused(log, code, "gRPC", name, context.peer())
                        context.abort(
                            grpc.StatusCode.UNAUTHENTICATED, "this server needs its token"
                        )
                return method(self, request, context, named)
            except NotFound as e:
                code = 404
                context.abort(grpc.StatusCode.NOT_FOUND, str(e))
            except ClientError as e:
                code = e.status
                status = (
                    grpc.StatusCode.NOT_FOUND
                    if e.status == 404
                    else grpc.StatusCode.INVALID_ARGUMENT
                )
                context.abort(status, str(e))
            except tf.errors.InvalidArgumentError as e:
                code = 400
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    model_error(e.message),
                )
            except Exception:
                if code == 200:
                    code = 500
                raise
            finally:
                self.service.metrics.answered(
                    self.service.model,
                    named[0],
                    named[1],
                    f"grpc_{name}",
                    code,
                    time.perf_counter() - started,
                )

        return handler

    return wrap


class Servicer:
    """Both services' methods over one `Service`."""

    def __init__(self, service: Service, token: str | None) -> None:
        self.service = service
        self.token = token

    def _resolve(self, spec, context, named: list):
        version = str(spec.version.value) if spec.HasField("version") else None
        label = spec.version_label or None
        key = dict(context.invocation_metadata()).get("x-request-key")
        resolved = self.service.resolve(spec.name, version, label, key)
        named[0], named[1] = str(resolved.version.version), resolved.label
        return resolved

    @staticmethod
    def _spec(out_spec, resolved, signature: str = "") -> None:
        out_spec.name = resolved.version.model
        out_spec.version.value = resolved.version.version
        if signature:
            out_spec.signature_name = signature

    def _run(self, resolved, sig, inputs, rows, context):
        rid = dict(context.invocation_metadata()).get("x-request-id")
        call = self.service.submit(resolved, sig, inputs, rows, rid)
        outputs = call.future.result()
        self.service.done(call, outputs)
        context.set_trailing_metadata(
            (("x-model-version", str(resolved.version.version)), ("x-request-id", call.request_id))
        )
        return outputs

    @_api("predict")
    def Predict(self, request, context, named):  # noqa: N802 - gRPC method name
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        resolved = self._resolve(request.model_spec, context, named)
        sig = self.service.signature(resolved.version, request.model_spec.signature_name or None)
        given, wanted = set(request.inputs), set(sig.inputs)
        if given != wanted:
            raise ClientError(
                f"inputs {sorted(given)} do not match the signature's {sorted(wanted)}"
            )
        try:
            inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        except (TypeError, ValueError) as e:
            raise ClientError(f"an input tensor cannot be read: {e}") from None
        rows = {len(v) if v.ndim else -1 for v in inputs.values()}
        if len(rows) != 1 or min(rows) < 1:
            raise ClientError("every input needs the same, non-zero number of examples (axis 0)")
        outputs = self._run(resolved, sig, inputs, rows.pop(), context)
        unknown = set(request.output_filter) - set(outputs)
        if unknown:
            raise ClientError(f"output_filter: unknown output(s) {sorted(unknown)}")
        resp = predict_pb2.PredictResponse()
        self._spec(resp.model_spec, resolved, sig.name)
        for k, v in outputs.items():
            if not request.output_filter or k in request.output_filter:
                resp.outputs[k].CopyFrom(tf.make_tensor_proto(v))
        return resp

    def _examples(self, request, resolved):
        kind = request.input.WhichOneof("kind")
        if kind == "example_list":
            examples = list(request.input.example_list.examples)
        elif kind == "example_list_with_context":
            ctx = request.input.example_list_with_context.context
            examples = []
            for e in request.input.example_list_with_context.examples:
                merged = type(e)()
                merged.CopyFrom(ctx)
                merged.MergeFrom(e)
                examples.append(merged)
        else:
            examples = []
        if not examples:
            raise ClientError("input: no examples (example_list or example_list_with_context)")
        sig = self.service.examples_signature(
            resolved.version, request.model_spec.signature_name or None
        )
        arr = np.empty(len(examples), dtype=object)
        arr[:] = [e.SerializeToString() for e in examples]
        return sig, {next(iter(sig.inputs)): arr}, len(examples)

    @_api("classify")
    def Classify(self, request, context, named):  # noqa: N802
        from tensorflow_serving.apis import classification_pb2

        resolved = self._resolve(request.model_spec, context, named)
        sig, inputs, rows = self._examples(request, resolved)
        outputs = self._run(resolved, sig, inputs, rows, context)
        resp = classification_pb2.ClassificationResponse()
        self._spec(resp.model_spec, resolved, sig.name)
        for classes in classify_results(outputs, rows, self.service.class_names):
            c = resp.result.classifications.add()
            for label, score in classes:
                c.classes.add(label=label, score=score)
        return resp

    @_api("regress")
    def Regress(self, request, context, named):  # noqa: N802
        from tensorflow_serving.apis import regression_pb2

        resolved = self._resolve(request.model_spec, context, named)
        sig, inputs, rows = self._examples(request, resolved)
        outputs = self._run(resolved, sig, inputs, rows, context)
        resp = regression_pb2.RegressionResponse()
        self._spec(resp.model_spec, resolved, sig.name)
        for value in regress_results(outputs, rows):
            resp.result.regressions.add(value=value)
        return resp

    @_api("metadata")
    def GetModelMetadata(self, request, context, named):  # noqa: N802
        from tensorflow_serving.apis import get_model_metadata_pb2

        resolved = self._resolve(request.model_spec, context, named)
        fields = list(request.metadata_field)
        if fields != ["signature_def"]:
            raise ClientError(f'metadata_field must be ["signature_def"], not {fields}')
        resp = get_model_metadata_pb2.GetModelMetadataResponse()
        self._spec(resp.model_spec, resolved)
        resp.metadata["signature_def"].Pack(signature_def_map(resolved.version))
        return resp

    @_api("status")
    def GetModelStatus(self, request, context, named):  # noqa: N802
        from tensorflow_serving.apis import get_model_status_pb2

        spec = request.model_spec
        if spec.HasField("version") or spec.version_label:
            versions = [self._resolve(spec, context, named).version]
        else:
            self._resolve(spec, context, named)  # unknown model: NOT_FOUND
            versions = list(self.service.repository.state.versions.values())
        resp = get_model_status_pb2.GetModelStatusResponse()
        for lv in sorted(versions, key=lambda v: -v.version):
            s = resp.model_version_status.add()
            s.version = lv.version
            s.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        return resp

    def HandleReloadConfigRequest(self, request, context):  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "models change through the serving folder")

    def MultiInference(self, request, context):  # noqa: N802
        context.abort(
            grpc.StatusCode.UNIMPLEMENTED, "MultiInference is not served: use Classify or Regress"
        )


def start_grpc(
    service: Service,
    host: str,
    port: int,
    token: str | None,
    workers: int,
    *,
    max_message_bytes: int = 16 * 1024 * 1024,
):
    """A started grpc.Server on host:port (port 0: any free one); returns (server, port)."""
    from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc"),
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", max_message_bytes),
        ],
    )
    servicer = Servicer(service, token)
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(servicer, server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(servicer, server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound = server.add_insecure_port(address)
    if not bound:
        raise OSError(f"cannot listen on {address} for gRPC")
    server.start()
    return server, bound
