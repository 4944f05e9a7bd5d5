r"""Lightning-based benchmarks behind ``pyg-fastload bench fit|accuracy``:
FastLoadDataModule against PyG's LightningNodeData in the same run."""
