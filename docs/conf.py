r"""Sphinx configuration of the pyg-fastload docs site: the Markdown guides
(MyST) and an API reference built from the docstrings (autodoc, Google-style
sections through napoleon). Built by ``tests/test_docs_site.py`` with
warnings as errors:

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""
import pyg_fastload

project = 'pyg-fastload'
author = 'the pyg-fastload developers'
release = version = pyg_fastload.__version__
copyright = '2026, the pyg-fastload developers'

extensions = [
    'myst_parser',
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
]
source_suffix = {'.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build']

# Links between the Markdown pages resolve as cross-references; headings
# get anchors two levels deep for links such as guide.md#section.
myst_heading_anchors = 3
myst_enable_extensions = ['colon_fence']

autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
autodoc_default_options = {'members': True, 'show-inheritance': True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = 'alabaster'
html_title = f'pyg-fastload {release}'
autodoc_inherit_docstrings = False
