"""concurbench: database concurrency experiments as one YAML file and one command."""

__version__ = "0.1.0"
