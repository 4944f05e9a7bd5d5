r"""A link predictor after training: the encoder's embedding of every node
(:func:`encoder_embeddings`, layer-wise and exact) and the scores of given
node pairs from those embeddings (:func:`score_pairs`), read from a
predictions directory of kind ``'embeddings'`` (:func:`write_predictions`)
or given as a tensor, in bounded chunks of pairs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor

from ..graph import graph_input
from .layerwise import layerwise_inference
from .prediction_files import read_predictions

__all__ = ['encoder_embeddings', 'score_pairs', 'load_pairs']

PathLike = Union[str, 'os.PathLike[str]']

#: ``decoder(h_src * h_dst) -> [P, 1] or [P]`` logits (``None``: the dot
#: product).
Decoder = Optional[Callable[[Tensor], Tensor]]


def encoder_embeddings(encoder: torch.nn.Module, data: Any,
                       **options: Any) -> Tensor:
    r"""The output of :obj:`encoder` (a PyG ``BasicGNN`` such as a link
    predictor's ``GraphSAGE``/``GCN``/``GAT`` encoder) for every node of
    :obj:`data` (a ``Data`` or a ``(FeatureStore, GraphStore)`` pair), by
    :func:`layerwise_inference` over every in-neighbour: the full-batch
    ``encoder(x, edge_index)``'s rows within float tolerance, in node order.
    :obj:`options` are :func:`layerwise_inference`'s (``chunk_size``,
    ``memory_budget``, ``work_dir``, ``progress``, ...).

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from torch_geometric.nn import GraphSAGE
        >>> from pyg_fastload.inference import encoder_embeddings
        >>> data = Data(x=torch.randn(50, 8),
        ...             edge_index=torch.randint(0, 50, (2, 200)))
        >>> encoder = GraphSAGE(8, 16, num_layers=2).eval()
        >>> h = encoder_embeddings(encoder, data, progress=False)
        >>> torch.allclose(h, encoder(data.x, data.edge_index), atol=1e-5)
        True
    """
    if graph_input(data).hetero:
        raise NotImplementedError(
            "encoder_embeddings: a heterogeneous link predictor (HeteroNet "
            "over a HeteroData) is not supported yet: its embeddings are "
            "one table per node type, and a predictions directory holds "
            "one node type; use a homogeneous graph, or call "
            "layerwise_inference(model.encoder, data) for the dict of "
            "every type's rows")
    return layerwise_inference(encoder, data, **options)


def load_pairs(pairs: Union[Tensor, PathLike], name: str = 'pairs'
               ) -> Tensor:
    r"""The ``[2, P]`` integer pairs :obj:`pairs` (a tensor, or a file
    ``torch.save`` wrote one to, read with ``weights_only=True``),
    checked: an error names :obj:`name`, the value and the fix."""
    if isinstance(pairs, (str, os.PathLike)):
        path = Path(pairs).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"'{name}': {str(path)!r} is not a file; "
                                    f"give a [2, P] tensor saved with "
                                    f"torch.save")
        try:
            pairs = torch.load(path, map_location='cpu', weights_only=True)
        except Exception as error:  # noqa: BLE001 (named in the message)
            raise ValueError(f"'{name}': {str(path)!r} is not a tensor "
                             f"file ({error}); save a [2, P] int64 tensor "
                             f"with torch.save") from None
    if not isinstance(pairs, Tensor):
        raise TypeError(f"'{name}' must be a [2, P] integer tensor (or the "
                        f"path of one), got {type(pairs).__name__}")
    if pairs.dtype in (torch.bool, ) or pairs.is_floating_point() or \
            pairs.is_complex():
        raise TypeError(f"'{name}' has dtype {pairs.dtype}: node ids are "
                        f"integers; pass pairs.long()")
    if pairs.dim() != 2 or pairs.size(0) != 2:
        raise ValueError(f"'{name}' has shape {list(pairs.shape)}, expected "
                         f"[2, P] (source ids in row 0, destination ids in "
                         f"row 1; transpose a [P, 2] tensor with .t())")
    return pairs.long()


def score_pairs(embeddings: Union[Tensor, PathLike], pairs: Union[
                Tensor, PathLike], decoder: Decoder = None, *,
                chunk_size: int = 65536,
                device: Union[str, torch.device, None] = None) -> Tensor:
    r"""The logit of every pair ``(pairs[0, i], pairs[1, i])`` scored as a
    link predictor scores it: the decoder of the element-wise product of
    the two nodes' embeddings (:obj:`decoder` :obj:`None`: its sum, the dot
    product), :obj:`chunk_size` pairs at a time.

    Args:
        embeddings: ``[N, H]`` rows by node id, or a predictions directory
            (:func:`write_predictions`, e.g. by ``pyg-fastload predict``
            with a ``LinkPredictor``) holding ``embeddings.npy``, read
            memory-mapped after its checksums are checked: only each
            chunk's rows are in memory.
        pairs: ``[2, P]`` node ids (of the directory's ``node_ids``), or
            the path of a tensor saved with ``torch.save``.
        decoder (callable, optional): ``LinkPredictor.decoder`` (an MLP on
            ``h_src * h_dst``), or :obj:`None` for a dot product.
        chunk_size (int): pairs scored at once.
        device: where each chunk is scored (default: the decoder's).

    Returns:
        torch.Tensor: ``[P]`` float logits.

    Example:
        >>> import torch
        >>> from pyg_fastload.inference import score_pairs
        >>> h = torch.tensor([[1., 0.], [0., 2.], [1., 1.]])
        >>> score_pairs(h, torch.tensor([[0, 1], [2, 2]])).tolist()
        [1.0, 2.0]
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or \
            chunk_size < 1:
        raise ValueError(f"'chunk_size' must be an int >= 1, got "
                         f"{chunk_size!r}")
    node_ids: Optional[Tensor] = None
    if isinstance(embeddings, (str, os.PathLike)):
        read = read_predictions(embeddings, mmap=True)
        if 'embeddings' not in read:
            raise ValueError(f"'embeddings': {str(embeddings)!r} holds no "
                             f"embeddings.npy; write them with "
                             f"pyg-fastload predict and a LinkPredictor (or "
                             f"NodeClassifier(predict_embeddings=True))")
        rows, node_ids = read['embeddings'], read['node_ids']
        if node_ids.numel() and bool(
                (node_ids == torch.arange(node_ids.numel())).all()):
            node_ids = None  # every node, in order: ids are rows
    elif isinstance(embeddings, Tensor):
        rows = embeddings
        if rows.dim() != 2:
            raise ValueError(f"'embeddings' has shape {list(rows.shape)}, "
                             f"expected [num_nodes, width]")
    else:
        raise TypeError(f"'embeddings' must be a [N, H] tensor or a "
                        f"predictions directory, got "
                        f"{type(embeddings).__name__}")
    pairs = load_pairs(pairs)
    num_rows = rows.size(0)
    if pairs.numel():
        low, high = int(pairs.min()), int(pairs.max())
        if node_ids is None and (low < 0 or high >= num_rows):
            bad = low if low < 0 else high
            raise IndexError(f"'pairs' holds node id {bad}, out of range "
                             f"[0, {num_rows}) of the {num_rows:,} "
                             f"embeddings: give ids of the embedded graph")
    if node_ids is not None:  # ids to rows (node_ids are sorted)
        index = torch.searchsorted(node_ids, pairs.clamp(min=0))
        index = index.clamp(max=max(node_ids.numel() - 1, 0))
        found = node_ids[index] == pairs if node_ids.numel() else \
            torch.zeros_like(pairs, dtype=torch.bool)
        if not bool(found.all()):
            bad = int(pairs[~found][0])
            raise IndexError(f"'pairs' holds node id {bad}, which has no "
                             f"row in the embeddings: give ids listed in "
                             f"their node_ids")
        pairs = index
    if device is None:
        param = None if decoder is None or not isinstance(
            decoder, torch.nn.Module) else next(decoder.parameters(), None)
        device = param.device if param is not None else torch.device('cpu')
    was_training = isinstance(decoder, torch.nn.Module) and decoder.training
    if was_training:
        decoder.eval()
    out = []
    try:
        with torch.no_grad():
            for start in range(0, pairs.size(1), chunk_size):
                src, dst = pairs[:, start:start + chunk_size]
                pair = (rows[src].to(device).float() *
                        rows[dst].to(device).float())
                out.append((pair.sum(dim=-1) if decoder is None
                            else decoder(pair).view(-1)).cpu())
    finally:
        if was_training:
            decoder.train()
    return torch.cat(out) if out else torch.empty(0)
