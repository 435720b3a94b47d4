"""The project's own TFX components and executors, one folder per purpose (docs/architecture.md).

example_gen/, validation/, resolvers/, evaluation/, release/, fast/ and
batch_inference/ are the rooms; io/ and base/ are what they share. A component
is written with base/component.py.
"""
