r"""Helpers the tests share (assertions and small builders), imported as
``from tests.helpers import ...`` or relatively; fixtures stay in the
``conftest.py`` files."""
import contextlib
import re
from typing import Iterator

import pytest

from pyg_fastload.errors import USAGE_EXIT


@contextlib.contextmanager
def usage_exit(capsys: pytest.CaptureFixture, match: str) -> Iterator[None]:
    r"""Asserts that the block ends a ``pyg-fastload`` command as a bad
    argument or input does: exit status :data:`USAGE_EXIT` and a line on
    stderr matching :obj:`match`."""
    with pytest.raises(SystemExit) as info:
        yield
    assert info.value.code == USAGE_EXIT, info.value.code
    err = capsys.readouterr().err
    assert re.search(match, err), err
