"""The compiled modules: the scan engine's pass over a buffer's plain letters
(``memkit/scan/_letters.c``, used by ``memkit/scan/plain.py``), the pass that finds
where bytes can hold UTF-16/32 text (``memkit/scan/_wide.c``, used by
``memkit/scan/encodings.py``) and the automaton that names the secrets a window may
hold (``memkit/scan/_names.c``, used by ``memkit/scan/windows.py``), and the pass that
names the JSON texts whose decoding may add a copy (``memkit/scan/_escapes.c``, used by
``memkit/scan/json_escapes.py``), and the pass that finds the scan engine's window
tokens (``memkit/scan/_tokens.c``, used by ``memkit/scan/tokens.py``; an AVX2 path chosen
at run time where the CPU has it). Portable C99
against the CPython API, built with Python's own flags (no ``-march``). Everything else about the package is in ``pyproject.toml``."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("memkit.scan._letters", sources=["memkit/scan/_letters.c"]),
                   Extension("memkit.scan._wide", sources=["memkit/scan/_wide.c"], depends=["memkit/scan/_scan.h"]),
                   Extension("memkit.scan._names", sources=["memkit/scan/_names.c"]),
                   Extension("memkit.scan._escapes", sources=["memkit/scan/_escapes.c"],
                             depends=["memkit/scan/_scan.h"]),
                   Extension("memkit.scan._tokens", sources=["memkit/scan/_tokens.c"],
                             depends=["memkit/scan/_scan.h"])])
