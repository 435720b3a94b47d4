"""Process infrastructure every runner may use: the fork server (zygotes), Beam's speed-ups
and the SDK worker pool. It imports nothing of the project but compat/ (Beam's internals), so
kubeflow/ and airflow/ tasks and the local run share it without reaching into the local run's
package."""
