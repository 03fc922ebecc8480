"""The optional compiled record reader (src/kafkite/storage/_records.c); the rest is in pyproject.toml.
Without a C compiler the build skips it (optional=True) and Kafkite runs its pure-Python reader."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("kafkite.storage._records", ["src/kafkite/storage/_records.c"], optional=True,
                             extra_compile_args=["-O2"])])
