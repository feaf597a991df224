"""Command lines that run kernelscope's own code in a child Python which imports nothing from the working
directory or PYTHONPATH.

The child runs isolated (``python -I``: no script or working directory on ``sys.path``, no PYTHON*
variables, no user site); kernelscope's own location is then added explicitly (a source tree that is not
installed), and the user site directory where this process has one, since packages installed with
``pip install --user`` are installed, not planted. A report opened inside a folder someone else controls
must not run that folder's ``pickle.py`` or ``kernelscope/``.
"""
from __future__ import annotations

import site
import sys
from pathlib import Path

import kernelscope

# Runs first in the child: argv is ['-c', ROOT, USER_SITE, *args]; afterwards ['-c', *args].
_BOOT = (
    "import sys\n"
    "root, user_site = sys.argv[1:3]\n"
    "del sys.argv[1:3]\n"
    "if user_site:\n"
    "    import site\n"
    "    site.addsitedir(user_site)\n"
    "if root not in sys.path:\n"
    "    sys.path.insert(0, root)\n"
)


def kernelscope_root() -> str:
    """The directory that holds the kernelscope package being run (site-packages, or a source tree's src/)."""
    return str(Path(kernelscope.__file__).resolve().parent.parent)


def isolated_code(code: str, *args: str) -> list[str]:
    """``python -I -c CODE ARGS...`` with this kernelscope importable; ``sys.argv[1:]`` is ARGS in CODE."""
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    return [sys.executable, "-I", "-c", _BOOT + code, kernelscope_root(), user_site, *args]


def isolated_module(module: str, *args: str) -> list[str]:
    """``python -m MODULE ARGS...`` for one of kernelscope's own modules, isolated as isolated_code is."""
    return isolated_code(f"import runpy\nrunpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n",
                         *args)
