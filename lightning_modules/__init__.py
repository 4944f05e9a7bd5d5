r"""Lightning integration for pyg-fastload (``FastLoadDataModule``,
``NodeClassifier``, callbacks): arrives with the Lightning issue."""
