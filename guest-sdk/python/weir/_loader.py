"""Finding the operator class of an operator file.

``guest-sdk/python/build.sh OUT.wasm OPERATOR.py[:ClassName]`` builds a component whose app
module loads the operator file with :func:`load_operator` at build time (componentize-py runs
the app's imports then and keeps their result in the component). The file is loaded from its
path, not imported by name, because componentize-py puts the standard library first on the
module path: a file named like a standard module (``socket.py``) could not be imported by its
name, and under its name it would hide that module from its own ``import``.

The module is named after the file's stem (``count.py`` is ``count``, as a test importing it
calls it, so pickles of its classes match), or ``weir_operator_<stem>`` when that name is a
standard module's or already taken.
"""

import importlib.util
import os
import sys

from ._errors import WeirError
from ._operator import Operator

__all__ = ["load_operator", "find_operator", "module_name"]


def load_operator(path: str, class_name: str = None):
    """The operator class of the Python file at ``path``: the class named ``class_name``, or
    the one :class:`~weir.Operator` subclass the file defines when no name is given."""
    path = os.path.abspath(path)
    name = module_name(path)
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None:
            raise WeirError(f"{path} is not a Python file that can be loaded")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return find_operator(module, class_name)


def module_name(path: str) -> str:
    """The name the operator file at ``path`` is loaded under: its stem, unless that is not an
    identifier, names a standard module, or is taken by a module of another file; then
    ``weir_operator_<stem>`` (with non-identifier characters made ``_``)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem.isidentifier() and stem not in sys.stdlib_module_names and _free_for(stem, path):
        return stem
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    return f"weir_operator_{safe}"


def _free_for(name: str, path: str) -> bool:
    """Whether the module name ``name`` is unused, or used by the file at ``path`` itself."""
    module = sys.modules.get(name)
    if module is None:
        return True
    loaded = getattr(module, "__file__", None)
    return loaded is not None and os.path.abspath(loaded) == path


def find_operator(module, class_name: str = None):
    """The operator class of ``module``: the class named ``class_name``, or the one
    :class:`~weir.Operator` subclass the module defines (imported ones do not count). Raises
    :class:`~weir.WeirError` when there is none, several, or the class has no ``process``."""
    # The file's name, not its path: in a build the path is componentize-py's mount point.
    where = os.path.basename(getattr(module, "__file__", None) or module.__name__)
    if class_name is not None:
        found = getattr(module, class_name, None)
        if not (isinstance(found, type) and issubclass(found, Operator)):
            what = "nothing" if found is None else type(found).__name__
            raise WeirError(f"{where}: `{class_name}` is {what}, not a weir.Operator subclass")
    else:
        defined = [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, Operator)
            and value is not Operator
            and value.__module__ == module.__name__
        ]
        if not defined:
            raise WeirError(f"{where} defines no weir.Operator subclass")
        if len(defined) > 1:
            names = ", ".join(c.__name__ for c in defined)
            raise WeirError(
                f"{where} defines several weir.Operator subclasses ({names}): name the one to "
                f"build, as {where}:{defined[0].__name__}"
            )
        found = defined[0]
    if found is Operator or found.process is Operator.process:
        raise WeirError(f"{where}: {found.__name__} does not define process(self, batch, out)")
    return found
