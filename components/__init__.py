"""The project's own TFX components and executors."""
