"""`tfxp serve`: the pushed models online with TF Serving's REST and gRPC APIs.

server.py puts it together; rest.py and grpc_api.py are the two front ends
over one service.py (A/B, request log); repository.py follows the serving
folder and the aliases (hot swaps); models.py loads a version and replays its
warmup requests; batching.py batches concurrent requests; request_log.py
writes the serving log the validation gate's skew check reads; codec.py,
status.py, metrics.py and security.py do what their names say.
"""
