"""Print the .pth line that lets a venv see this Python's packages; `make venv` runs it with
the host's python3 and writes it into .venv.

`python -m venv --system-site-packages` links the new venv to the *base* interpreter, so when
python3 is itself a venv or a conda env its packages (torch above all) stay out of sight. The
line adds this interpreter's site folders, and the folder torch was found in, behind the venv's
own. Standard library only: it runs before anything is installed.
"""

import importlib.util
import os
import sysconfig

paths = sysconfig.get_paths()
folders = [paths["purelib"], paths["platlib"]]
torch = importlib.util.find_spec("torch")
if torch is not None and torch.submodule_search_locations:
    folders.append(os.path.dirname(list(torch.submodule_search_locations)[0]))
folders = [folder for folder in dict.fromkeys(folders) if os.path.isdir(folder)]
print("import site; " + "; ".join(f"site.addsitedir({folder!r})" for folder in folders))
