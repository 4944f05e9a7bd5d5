r"""The placement's own rules (:mod:`pyg_fastload.placement`): resolved
from a loader's arguments or a run's settings, each refusal naming the
argument or setting, the value and the fix. Without CUDA the rules that
need a GPU are checked on ``torch.device('cuda', 0)`` values, never
used."""
import doctest

import pytest
import torch

from pyg_fastload import FastNeighborLoader, placement
from pyg_fastload.config import SettingError
from pyg_fastload.placement import (
    Placement,
    check_device,
    check_run_sampling,
    check_shared_memory,
)

from .helpers import random_graph

CPU, GPU = torch.device('cpu'), torch.device('cuda', 0)
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(),
                             reason='CUDA is available')


def test_the_example_runs():
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(Placement, 'Placement',
                                             module=placement, globs={}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_a_loader_without_devices_samples_where_the_graph_is():
    assert Placement.of_loader() == Placement(None, None)
    assert Placement.of_loader().sampled_on(CPU) == Placement(CPU, None)
    assert Placement.of_loader('cpu', 'cpu') == Placement(CPU, CPU)
    assert not Placement.of_loader('cpu').pinned
    assert Placement.of_loader('cpu').copy_stream() is None


def test_batches_copied_to_a_gpu_are_pinned():
    assert Placement(batches=GPU).pinned
    assert not Placement(sampling=GPU).pinned


@pytest.mark.parametrize('arguments, error, match', [
    (dict(device=True), ValueError, r"^'device=True' is not a torch device"),
    (dict(device='meta'), ValueError, r"^'device=meta' is not supported"),
    (dict(sampling_device=['cuda']), ValueError,
     r"^'sampling_device=\['cuda'\]' is not a torch device"),
    (dict(sampling_device='cuda', device='cpu'), ValueError,
     r"^'sampling_device=cuda' with 'device=cpu': the sampler runs on cuda.*"
     r"pass device=None"),
    (dict(sampling_device='cpu', given_sampler=True), ValueError,
     r"both given.*build it with 'device'"),
    pytest.param(dict(device='cuda'), ValueError, r"^'device=cuda' needs CUDA",
                 marks=NO_CUDA),
])
def test_bad_loader_arguments_are_named(arguments, error, match):
    with pytest.raises(error, match=match):
        Placement.of_loader(**arguments)


def test_batches_sampled_on_a_gpu_go_nowhere_else():
    with pytest.raises(ValueError, match=r"^'device=cpu': the sampler runs "
                       r"on cuda:0, where its batches are returned; pass "
                       r"device=None or 'cuda:0'"):
        Placement(batches=CPU).sampled_on(GPU)


@NO_CUDA
def test_a_sampler_on_a_gpu_this_machine_lacks_is_named():
    with pytest.raises(ValueError, match=r"^'sampling_device=cuda:0' needs "
                       r"CUDA"):
        Placement().sampled_on(GPU)


def test_a_run_places_by_its_trainer_device():
    assert Placement.of_run(CPU) == Placement(None, None)
    assert Placement.of_run(GPU) == Placement(None, GPU)
    assert Placement.of_run(GPU, num_workers=2) == Placement(None, None)
    assert Placement.of_run(GPU, 'cuda') == Placement(GPU, GPU)
    with pytest.raises(SettingError, match="'cuda' samples on the trainer's "
                       "GPU, but this run's device is cpu: use "
                       "sampling_device: cpu") as info:
        Placement.of_run(CPU, 'cuda')
    assert info.value.key == 'sampling_device'


@pytest.mark.parametrize('value, workers, match', [
    ('gpu', 0, "must be 'cpu' or 'cuda'"),
    ('cuda:0', 0, "must be 'cpu' or 'cuda'"),
    ('cuda', 2, r"needs 'num_workers=0' \(got 2\)"),
])
def test_a_run_sampling_setting_is_named(value, workers, match):
    with pytest.raises(SettingError, match=match) as info:
        check_run_sampling(value, workers)
    assert info.value.key == 'sampling_device'


def test_shared_memory_is_host_memory():
    check_shared_memory(CPU)
    with pytest.raises(ValueError, match="'share_memory=True'.*meta"):
        check_shared_memory(torch.device('meta'))


def test_device_arguments_of_commands_are_named():
    assert check_device(None) is None
    assert check_device('cpu', 0, '--device') == CPU
    with pytest.raises(ValueError, match="^'--device=1.5' is not a torch"):
        check_device(1.5, 0, '--device')


def test_a_loader_hands_its_placement_down():
    loader = FastNeighborLoader(random_graph(), [3], batch_size=16,
                                device='cpu')
    assert loader.placement == Placement(CPU, CPU)
    assert loader.device == CPU
    assert next(iter(loader)).x.device == CPU
