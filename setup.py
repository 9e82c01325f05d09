"""The compiled modules: the scan engine's pass over a buffer's plain letters
(``memkit/_letters.c``, used by ``memkit/scan_plain.py``) and the pass that finds
where bytes can hold UTF-16/32 text (``memkit/_wide.c``, used by
``memkit/encodings.py``). Portable C99 against the CPython API, built with Python's
own flags (no ``-march``). Everything else about the package is in ``pyproject.toml``."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("memkit._letters", sources=["memkit/_letters.c"]),
                   Extension("memkit._wide", sources=["memkit/_wide.c"])])
