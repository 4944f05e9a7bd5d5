r"""A topology's copy to a GPU, with a stand-in for the device: refused
where it would leave sampling no room (made once however many threads ask:
``tests/sampling/test_device.py``)."""
import pytest
import torch

from pyg_fastload.graph import topology
from pyg_fastload.graph.topology import CSCTopology, device_copy
from pyg_fastload.sampling import FastNeighborSampler, LayerWiseSampler

GPU = torch.device('cuda', 0)


def small_topology() -> CSCTopology:
    edge_index = torch.randint(0, 50, (2, 400),
                               generator=torch.Generator().manual_seed(0))
    return CSCTopology.from_edge_index(edge_index, 50)


@pytest.mark.reliability(
    fault="a topology moved to a GPU that would leave less free memory "
          "than sampling a batch takes there",
    behaviour="`ValueError` naming the topology's and the scratch's MiB, "
              "the free memory and the fix (sample on the CPU, a smaller "
              "batch_size or fan-out); nothing copied (was: accepted up to "
              "all the free memory)")
def test_a_copy_that_leaves_no_room_for_sampling_is_refused(monkeypatch):
    topo = small_topology()
    reserve = 3 * 2**20
    made = []

    def make(device):
        made.append(device)
        return object()
    free = topo.nbytes() + reserve - 1
    monkeypatch.setattr(topology, 'free_cuda_memory', lambda device: free)
    with pytest.raises(ValueError, match=r"takes 0 MiB and sampling's "
                       r"scratch 3 MiB, more than the 3 MiB free on "
                       r"cuda:0: sample on the CPU .*smaller batch_size"):
        device_copy(topo, GPU, make, reserve)
    assert made == []
    free += 1
    device_copy(topo, GPU, make, reserve)
    assert made == [GPU]


@pytest.mark.parametrize('kind, fanouts', [(FastNeighborSampler, [15, 10]),
                                           (LayerWiseSampler, [64, 64])])
def test_a_sampler_keeps_room_for_its_batches_scratch(monkeypatch, kind,
                                                      fanouts):
    moves = []

    def to(self, device, reserve_bytes=0):
        moves.append((torch.device(device), reserve_bytes))
        return self  # a stand-in: the copy stays on the CPU
    monkeypatch.setattr(CSCTopology, 'to', to)
    topo = small_topology()
    sampler = kind(topo, fanouts, device='cuda:0', batch_size=8)
    assert moves == [(GPU, sampler.scratch_bytes(8))]
    assert sampler.scratch_bytes(8) > 2 * 50 * 4  # beyond the relabelling
    kind(topo, fanouts)  # on the CPU: no move
    assert len(moves) == 1
