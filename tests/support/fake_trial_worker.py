"""A stand-in for `python -m trainer.parallel_trials` (tests/unit/trainer/test_parallel_trials.py): the
same protocol, no TensorFlow. A trial's score is its learning_rate; the set-up's
fn_args.custom_config["fake"] says which learning rate crashes the worker, hangs, or
raises, and how long each trial takes. Each trial's start and end go to a log file."""

import json
import os
import sys
import time

replies = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
setup = json.loads(sys.stdin.readline())
fake = setup["fn_args"]["custom_config"]["fake"]
log = open(fake["log"], "a", buffering=1)  # noqa: SIM115
threads = os.environ.get("TF_NUM_INTRAOP_THREADS")
for line in sys.stdin:
    request = json.loads(line)
    rate = request["hyperparameters"]["values"]["learning_rate"]
    log.write(json.dumps({"pid": os.getpid(), "start": time.time(), "threads": threads}) + "\n")
    if rate == fake.get("crash"):
        print("fake worker: crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    if rate == fake.get("hang"):
        time.sleep(3600)
    time.sleep(fake.get("seconds", 0))
    log.write(json.dumps({"pid": os.getpid(), "end": time.time()}) + "\n")
    reply = {"trial_id": request["trial_id"]}
    if rate == fake.get("raise"):
        reply["error"] = "Traceback ...\nValueError: this trial's model does not build"
    else:
        reply["score"] = rate
    replies.write(json.dumps(reply) + "\n")
