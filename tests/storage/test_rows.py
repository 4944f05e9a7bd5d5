import pytest
import torch

from pyg_fastload.storage.rows import _as_words, gather_rows

INDEX = torch.tensor([4, 0, 4, 9, 2])


def _bits(tensor):
    return tensor.contiguous().view(torch.uint8)


@pytest.mark.parametrize('shape,dtype', [
    ((10, 1), torch.float32), ((10, 2), torch.float32),
    ((10, 1), torch.float64), ((10, 2), torch.float16),
    ((10, 1), torch.bfloat16), ((10, 1), torch.bool),
    ((10, 2, 2), torch.int16), ((10, 1), torch.uint8),
    ((10, 3), torch.float32), ((10, 16), torch.float32)])
@pytest.mark.parametrize('with_out', [False, True])
def test_rows_equal_index_select_bit_for_bit(shape, dtype, with_out):
    raw = torch.randint(0, 256, (torch.Size(shape).numel()
                                 * torch.empty((), dtype=dtype)
                                 .element_size(), ), dtype=torch.uint8,
                        generator=torch.Generator().manual_seed(0))
    value = raw.view(dtype).view(shape)  # every bit pattern, NaNs too
    out = torch.empty((INDEX.numel(), *shape[1:]), dtype=dtype) \
        if with_out else None
    got = gather_rows(value, INDEX.int() if with_out else INDEX, out=out)
    assert got.shape == (INDEX.numel(), *shape[1:]) and got.dtype == dtype
    assert torch.equal(_bits(got), _bits(value.index_select(0, INDEX)))
    if with_out:
        assert got is out


def test_narrow_rows_are_read_as_one_integer_each():
    value = torch.randn(10, 2)
    words = _as_words(value)
    assert words.shape == (10, ) and words.dtype == torch.int64
    assert words.data_ptr() == value.data_ptr()
    assert _as_words(torch.randn(10, 1)).dtype == torch.int32
    assert _as_words(torch.zeros(10, 1, dtype=torch.bool)).dtype == \
        torch.uint8


@pytest.mark.parametrize('value', [
    torch.randn(10, 3),  # 12 bytes: no integer of that width
    torch.randn(10, 16),  # wide rows: index_select is fine
    torch.randn(2, 10).t(),  # not contiguous
    torch.randn(21)[1:].view(10, 2),  # rows of 8 bytes at a 4-byte offset
    torch.randn(10),  # already one element per row
])
def test_other_rows_fall_back_to_index_select(value):
    assert _as_words(value) is None
    assert torch.equal(gather_rows(value, INDEX), value[INDEX])


def test_a_mismatched_out_gets_torch_behaviour():
    value = torch.randn(10, 1)
    out = torch.empty(INDEX.numel(), 1, dtype=torch.float64)
    with pytest.raises(RuntimeError):
        gather_rows(value, INDEX, out=out)  # as torch.index_select does
    empty = gather_rows(value, torch.empty(0, dtype=torch.long))
    assert empty.shape == (0, 1)
