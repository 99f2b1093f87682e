# What type checkers see of `pipelinez`: the names __init__.py loads lazily from pipelinez.api.
from pipelinez.api import Project as Project
from pipelinez.api import PzConfigError as PzConfigError
from pipelinez.api import PzError as PzError
from pipelinez.api import PzValidationError as PzValidationError

__version__: str
