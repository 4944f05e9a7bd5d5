import pytest
import pytorch_lightning as pl
import torch

from pyg_fastload.lightning import ConfigError, LinkPredictor, NodeClassifier
from pyg_fastload.lightning.hetero_net import MAX_LAYERS

#: Each model with the widths that make it build its network at once.
MODELS = [(NodeClassifier, dict(in_channels=4, num_classes=3), 'net'),
          (LinkPredictor, dict(in_channels=4), 'encoder')]


@pytest.mark.reliability(
    fault='`NodeClassifier` or `LinkPredictor` with `num_layers=10**6` or '
          '`hidden_channels=10**6`',
    behaviour='ConfigError naming `model.num_layers` (at most 128) or '
              '`model.hidden_channels` (its weights against the memory '
              'available) before a layer is built (was: minutes building, '
              'or an allocation failure)')
@pytest.mark.parametrize('cls, widths, net', MODELS)
def test_layers_and_widths_are_bounded(cls, widths, net):
    deepest = cls(hidden_channels=4, num_layers=MAX_LAYERS, heads=1,
                  **widths)
    assert len(getattr(deepest, net).convs) == MAX_LAYERS
    with pytest.raises(ConfigError, match=f"1,000,000 layers: give at most "
                       f"{MAX_LAYERS}") as info:
        cls(hidden_channels=8, num_layers=10**6, **widths)
    assert info.value.config_key == 'model.num_layers'
    with pytest.raises(ConfigError, match=r"1,000,000 needs (a|\d+ layers "
                       r"of) 1,000,000 x 1,000,000.*more than the .* of "
                       r"memory available") as info:
        cls(hidden_channels=10**6, **widths)
    assert info.value.config_key == 'model.hidden_channels'


@pytest.mark.reliability(
    fault="a checkpoint whose hyper-parameters say `num_layers: 1000000`",
    behaviour='`load_from_checkpoint` raises ConfigError naming '
              '`model.num_layers` before a layer is built (was: minutes '
              'building)')
@pytest.mark.parametrize('cls, widths, net', MODELS)
def test_a_checkpoint_cannot_ask_for_a_million_layers(tmp_path, cls, widths,
                                                      net):
    model = cls(hidden_channels=8, num_layers=2, **widths)
    path = tmp_path / 'model.ckpt'

    def save(**hparams):
        torch.save({'pytorch-lightning_version': pl.__version__,
                    'state_dict': model.state_dict(),
                    'hyper_parameters': {**model.hparams, **hparams}}, path)

    save()
    assert len(getattr(cls.load_from_checkpoint(path), net).convs) == 2
    save(num_layers=10**6)
    with pytest.raises(ConfigError, match='give at most') as info:
        cls.load_from_checkpoint(path)
    assert info.value.config_key == 'model.num_layers'
