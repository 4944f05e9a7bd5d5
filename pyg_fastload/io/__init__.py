r"""Reading and writing files: the dataset directory format and safe
loading of ``.pt`` files."""
from .safe_load import UnsafeFileError, safe_torch_load

__all__ = ['UnsafeFileError', 'safe_torch_load']
