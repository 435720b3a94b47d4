"""The image trainer: a small CNN over class folders of images.

Image datasets (`kind: image` in the dataset file) name it by dotted path
(`preprocessing_fn: trainer.image.preprocessing.preprocessing_fn`,
`run_fn: trainer.image.train.run_fn`), the plug-in contract described in
trainer/base.py; the pipeline passes the dataset's `image:` options as
`custom_config["image"]`. Modules: `preprocessing.py` (tf.Transform: decode,
resize, normalise), `model.py` (Keras CNN and batch augmentation), `train.py`
(run_fn and the image-bytes serving signatures).
"""
