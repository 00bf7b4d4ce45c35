"""The suites, one folder each, and the registry that finds them.

A suite is a folder on the suite path holding a `suite.py` that defines `SUITE` (bench/suites/base.py
says what else the folder holds); it is named by its folder, and only there. The suite path is this package's
folder, then the folders DDPBENCH_SUITES_PATH names (separated by os.pathsep), so a suite of your
own needs no edit here: the ranks torchrun starts inherit the variable and find it too.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil

from bench.errors import UserError

SUITES_PATH_ENV = "DDPBENCH_SUITES_PATH"

USERS_FOLDERS = [folder for folder in os.environ.get(SUITES_PATH_ENV, "").split(os.pathsep) if folder]
__path__ = [*__path__, *USERS_FOLDERS]


class UnknownSuite(UserError):
    """A plan, a bundle or a compare names a suite this installation does not have."""


@functools.lru_cache(maxsize=None)
def registry() -> dict:
    """name -> Suite, for every suite folder on the suite path, in name order."""
    missing = [folder for folder in USERS_FOLDERS if not os.path.isdir(folder)]
    if missing:
        raise UserError(f"{SUITES_PATH_ENV} names {', '.join(missing)}, which {'is not a folder' if len(missing) == 1 else 'are not folders'}; "
                        "give the folder that holds your suites' folders, or unset it")
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if not info.ispkg:
            continue
        module_name = f"{__name__}.{info.name}.suite"
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as missing:
            if missing.name == module_name:  # a package beside the suites that is no suite
                continue
            raise
        suite = module.SUITE
        if suite.name != info.name:  # a class of another folder's, or one that sets name itself
            raise UserError(f"{module.__file__}: SUITE.name is {suite.name!r} but its folder is {info.name!r}; "
                            "a suite is named by its folder: leave name out of its class")
        found[info.name] = suite
    return found


def names() -> list:
    return list(registry())


def get(name: str, where: str = "", fix: str = "fix the name"):
    """The suite named `name`, or an UnknownSuite error that says `where` it was named, which suites
    exist, and `fix`."""
    suite = registry().get(name)
    if suite is None:
        place = f"{where}: " if where else ""
        raise UnknownSuite(f"{place}unknown suite {name!r}: this ddpbench has {', '.join(names())}; "
                           f"{fix}, or put the suite's folder on {SUITES_PATH_ENV}")
    return suite
