"""Object storage (s3://, gs://): location checks, uploads, the S3 relay for TensorFlow."""
