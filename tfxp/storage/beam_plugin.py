"""A Beam plugin (--beam_plugins=tfxp.storage.beam_plugin) for remote SDK workers.

Beam's own filesystems read and write s3:// in a worker through boto3, but
TensorFlow inside the workers opens artifacts too (Transform's analyzers and
transform graph, the Evaluator's SavedModel), and TensorFlow knows s3:// only
once tensorflow-io is imported and pointed at the relay (s3_shim). A worker
imports its plugins before it runs any work (sdk_worker_main), so importing
this module is the set-up. The worker's environment supplies the endpoint and
credentials, as the driver's does (storage.prepare_s3_environment).
"""

from tfxp.storage.storage import enable_filesystems

enable_filesystems(["s3://"])
