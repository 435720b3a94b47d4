"""TF Serving's gRPC API: PredictionService (Predict, Classify, Regress, GetModelMetadata)
and ModelService.GetModelStatus, with the messages of `tensorflow-serving-api`, so a
client written for TF Serving works unchanged.

The same `Service.score` as the REST API answers (batching, A/B, request log,
metrics): this module only decodes the protos into its Payload and encodes its
Answer. A client fault is INVALID_ARGUMENT or NOT_FOUND with the message the
REST API gives (one mapping, `client_fault`), and every response's
`model_spec` names the version that answered.
"""

from __future__ import annotations

import functools
import logging
import time
from concurrent import futures

import grpc
import numpy as np

from runtime.access import log_refused
from serving.codec import ClientError
from serving.repository import Resolved
from serving.security import bearer_matches
from serving.service import CLASSIFY, PREDICT, REGRESS, Answer, Payload, Service, client_fault
from serving.status import signature_def_map

log = logging.getLogger("serving")

DEFAULT_WORKERS = 32
# The one fault mapping (serving/service.py client_fault) gives HTTP statuses;
# gRPC names them with its codes.
STATUS_CODES = {404: grpc.StatusCode.NOT_FOUND, 401: grpc.StatusCode.UNAUTHENTICATED}


def _api(name: str):
    """Auth, the model the request names, faults as gRPC status codes, and the
    metrics, around one RPC (which gets the resolved version)."""

    def wrap(method):
        @functools.wraps(method)
        def handler(self, request, context):
            started = time.perf_counter()
            resolved: Resolved | None = None
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
                resolved = self._resolve(request.model_spec, context)
                return method(self, request, context, resolved)
            except Exception as e:
                fault = client_fault(e)
                if fault is None:
                    if code == 200:
                        code = 500
                    raise  # the server's own fault (or the abort above)
                code = fault[0]
                context.abort(STATUS_CODES.get(code, grpc.StatusCode.INVALID_ARGUMENT), fault[1])
            finally:
                self.service.metrics.answered(
                    self.service.model,
                    str(resolved.version.version) if resolved else "",
                    resolved.label if resolved else "",
                    f"grpc_{name}",
                    code,
                    time.perf_counter() - started,
                )

        return handler

    return wrap


class Servicer:
    """Both services' methods over one `Service`: decode, `Service.score`, encode."""

    def __init__(self, service: Service, token: str | None) -> None:
        self.service = service
        self.token = token

    def _resolve(self, spec, context) -> Resolved:
        version = str(spec.version.value) if spec.HasField("version") else None
        label = spec.version_label or None
        key = dict(context.invocation_metadata()).get("x-request-key")
        return self.service.resolve(spec.name, version, label, key)

    @staticmethod
    def _spec(out_spec, version, signature: str = "") -> None:
        out_spec.name = version.model
        out_spec.version.value = version.version
        if signature:
            out_spec.signature_name = signature

    def _score(self, api: str, resolved: Resolved, payload: Payload, context) -> Answer:
        answer = self.service.score(api, resolved, payload).result()
        context.set_trailing_metadata(
            (("x-model-version", str(answer.version.version)), ("x-request-id", answer.request_id))
        )
        return answer

    @staticmethod
    def _request_id(context) -> str | None:
        return dict(context.invocation_metadata()).get("x-request-id")

    @_api("predict")
    def Predict(self, request, context, resolved):
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        def inputs(sig) -> tuple[dict[str, np.ndarray], int]:
            given, wanted = set(request.inputs), set(sig.inputs)
            if given != wanted:
                raise ClientError(
                    f"inputs {sorted(given)} do not match the signature's {sorted(wanted)}"
                )
            try:
                decoded = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
            except (TypeError, ValueError) as e:
                raise ClientError(f"an input tensor cannot be read: {e}") from None
            rows = {len(v) if v.ndim else -1 for v in decoded.values()}
            if len(rows) != 1 or min(rows) < 1:
                raise ClientError(
                    "every input needs the same, non-zero number of examples (axis 0)"
                )
            return decoded, rows.pop()

        payload = Payload(
            request.model_spec.signature_name or None,
            inputs=inputs,
            request_id=self._request_id(context),
        )
        answer = self._score(PREDICT, resolved, payload, context)
        unknown = set(request.output_filter) - set(answer.outputs)
        if unknown:
            raise ClientError(f"output_filter: unknown output(s) {sorted(unknown)}")
        resp = predict_pb2.PredictResponse()
        self._spec(resp.model_spec, answer.version, answer.signature)
        for k, v in answer.outputs.items():
            if not request.output_filter or k in request.output_filter:
                resp.outputs[k].CopyFrom(tf.make_tensor_proto(v))
        return resp

    def _examples(self, request, context) -> Payload:
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
        return Payload(
            request.model_spec.signature_name or None,
            examples=[e.SerializeToString() for e in examples],
            request_id=self._request_id(context),
        )

    @_api("classify")
    def Classify(self, request, context, resolved):
        from tensorflow_serving.apis import classification_pb2

        answer = self._score(CLASSIFY, resolved, self._examples(request, context), context)
        resp = classification_pb2.ClassificationResponse()
        self._spec(resp.model_spec, answer.version, answer.signature)
        for classes in answer.results or ():
            c = resp.result.classifications.add()
            for label, score in classes:
                c.classes.add(label=label, score=score)
        return resp

    @_api("regress")
    def Regress(self, request, context, resolved):
        from tensorflow_serving.apis import regression_pb2

        answer = self._score(REGRESS, resolved, self._examples(request, context), context)
        resp = regression_pb2.RegressionResponse()
        self._spec(resp.model_spec, answer.version, answer.signature)
        for value in answer.results or ():
            resp.result.regressions.add(value=value)
        return resp

    @_api("metadata")
    def GetModelMetadata(self, request, context, resolved):
        from tensorflow_serving.apis import get_model_metadata_pb2

        fields = list(request.metadata_field)
        if fields != ["signature_def"]:
            raise ClientError(f'metadata_field must be ["signature_def"], not {fields}')
        resp = get_model_metadata_pb2.GetModelMetadataResponse()
        self._spec(resp.model_spec, resolved.version)
        resp.metadata["signature_def"].Pack(signature_def_map(resolved.version))
        return resp

    @_api("status")
    def GetModelStatus(self, request, context, resolved):
        from tensorflow_serving.apis import get_model_status_pb2

        spec = request.model_spec
        if spec.HasField("version") or spec.version_label:
            versions = [resolved.version]
        else:  # the model's every version (resolving it answered NOT_FOUND for none)
            versions = list(self.service.repository.state.versions.values())
        resp = get_model_status_pb2.GetModelStatusResponse()
        for lv in sorted(versions, key=lambda v: -v.version):
            s = resp.model_version_status.add()
            s.version = lv.version
            s.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
        return resp

    def HandleReloadConfigRequest(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "models change through the serving folder")

    def MultiInference(self, request, context):
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
