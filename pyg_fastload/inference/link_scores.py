r"""A link predictor after training: the encoder's embedding of every node
(:func:`encoder_embeddings`, layer-wise and exact; one table per node type
on a heterogeneous graph) and the scores of given node pairs from those
embeddings (:func:`score_pairs`), read from a predictions directory of kind
``'embeddings'`` (:func:`write_predictions`, or one table per node type:
:func:`write_embedding_tables`) or given as tensors, in bounded chunks of
pairs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, \
    Tuple, Union

import torch
from torch import Tensor

from .layerwise import layerwise_inference
from .prediction_files import node_tables, read_predictions

__all__ = ['encoder_embeddings', 'score_pairs', 'load_pairs']

PathLike = Union[str, 'os.PathLike[str]']

#: ``decoder(h_src * h_dst) -> [P, 1] or [P]`` logits (``None``: the dot
#: product).
Decoder = Optional[Callable[[Tensor], Tensor]]

#: ``[N, H]`` rows by node id, a dict of them by node type, or a predictions
#: directory of either.
Embeddings = Union[Tensor, Dict[str, Tensor], PathLike]


class _Table(NamedTuple):
    r"""One node set's embeddings, as :func:`score_pairs` reads them."""
    rows: Tensor
    #: The sorted node ids of the rows (:obj:`None`: row ``i`` is node
    #: ``i``).
    node_ids: Optional[Tensor]
    #: The table in errors (``"embeddings of node type 'paper'"``).
    name: str


def encoder_embeddings(encoder: torch.nn.Module, data: Any,
                       **options: Any) -> Union[Tensor, Dict[str, Tensor]]:
    r"""The output of :obj:`encoder` (a PyG ``BasicGNN`` such as a link
    predictor's ``GraphSAGE``/``GCN``/``GAT`` encoder) for every node of
    :obj:`data` (a ``Data`` or a ``(FeatureStore, GraphStore)`` pair), by
    :func:`layerwise_inference` over every in-neighbour: the full-batch
    ``encoder(x, edge_index)``'s rows within float tolerance, in node order.
    On a heterogeneous graph (a ``HeteroData`` or typed stores, and a
    ``HeteroConv`` encoder such as a heterogeneous link predictor's
    ``HeteroNet``): a dict of one table per node type, every type a
    relation of the last layer leads into, each in node order.

    Args:
        encoder (torch.nn.Module): the encoder (a ``BasicGNN`` or a
            ``HeteroConv`` stack).
        data (Data or HeteroData or Tuple[FeatureStore, GraphStore]): the
            graph.
        **options: :func:`layerwise_inference`'s options (``chunk_size``,
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
    return layerwise_inference(encoder, data, **options)


def load_pairs(pairs: Union[Tensor, PathLike], name: str = 'pairs'
               ) -> Tensor:
    r"""The ``[2, P]`` integer pairs :obj:`pairs` (a tensor, or a file
    ``torch.save`` wrote one to, read with ``weights_only=True``),
    checked: an error names :obj:`name`, the value and the fix.

    Args:
        pairs (torch.Tensor or str or os.PathLike): the pairs or their file.
        name (str, optional): the argument errors name.
            (default: :obj:`'pairs'`)

    Example:
        >>> import torch
        >>> from pyg_fastload.inference import load_pairs
        >>> load_pairs(torch.tensor([[0, 1], [2, 3]])).tolist()
        [[0, 1], [2, 3]]
    """
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


def score_pairs(embeddings: Embeddings, pairs: Union[Tensor, PathLike],
                decoder: Decoder = None, *,
                edge_type: Optional[Sequence[str]] = None,
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
            chunk's rows are in memory. With :obj:`edge_type`: a dict of
            such rows by node type (:func:`encoder_embeddings` on a
            heterogeneous graph), or a directory of one table per node
            type (:func:`write_embedding_tables`).
        pairs: ``[2, P]`` node ids (of the directory's ``node_ids``), or
            the path of a tensor saved with ``torch.save``. With
            :obj:`edge_type`, row 0 holds ids of its source type and row 1
            of its destination type.
        decoder (callable, optional): ``LinkPredictor.decoder`` (an MLP on
            ``h_src * h_dst``), or :obj:`None` for a dot product.
        edge_type (Sequence[str], optional): the scored relation
            ``(source type, relation, destination type)`` of a
            heterogeneous link predictor (``LinkPredictor.edge_type``);
            :obj:`None`: one table for both ends (a homogeneous graph).
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
        >>> score_pairs({'author': h[:2], 'paper': h},
        ...             torch.tensor([[0, 1], [2, 2]]),
        ...             edge_type=('author', 'writes', 'paper')).tolist()
        [1.0, 2.0]
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or \
            chunk_size < 1:
        raise ValueError(f"'chunk_size' must be an int >= 1, got "
                         f"{chunk_size!r}")
    relation = _relation(edge_type)
    source, target = _tables(embeddings, relation)
    pairs = load_pairs(pairs)
    if relation is None:
        src = _positions(pairs[0], source, '')
        dst = _positions(pairs[1], target, '')
    else:
        fix = (f"; row 0 holds ids of the source type {relation[0]!r} of "
               f"{list(relation)}, row 1 of its destination type "
               f"{relation[2]!r}")
        src = _positions(pairs[0], source, 'row 0 ', fix)
        dst = _positions(pairs[1], target, 'row 1 ', fix)
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
                end = start + chunk_size
                pair = (source.rows[src[start:end]].to(device).float() *
                        target.rows[dst[start:end]].to(device).float())
                out.append((pair.sum(dim=-1) if decoder is None
                            else decoder(pair).view(-1)).cpu())
    finally:
        if was_training:
            decoder.train()
    return torch.cat(out) if out else torch.empty(0)


def _relation(edge_type: Optional[Sequence[str]]
              ) -> Optional[Tuple[str, str, str]]:
    if edge_type is None:
        return None
    if isinstance(edge_type, str) or not isinstance(edge_type, Sequence) \
            or len(edge_type) != 3 or \
            not all(isinstance(part, str) for part in edge_type):
        raise TypeError(f"'edge_type' must be the scored relation (source "
                        f"type, relation, destination type), got "
                        f"{edge_type!r}")
    return tuple(edge_type)


def _tables(embeddings: Embeddings, relation: Optional[Tuple[str, str, str]]
            ) -> Tuple[_Table, _Table]:
    r"""The tables of the pairs' source and destination nodes: one for both
    without :obj:`relation`, else its two node types'."""
    if isinstance(embeddings, (str, os.PathLike)):
        return _directory_tables(embeddings, relation)
    if isinstance(embeddings, Tensor):
        if relation is not None:
            raise ValueError(_one_table("'embeddings' is one [N, H] table",
                                        relation))
        table = _tensor(embeddings, "'embeddings'", 'embeddings')
        return table, table
    if isinstance(embeddings, dict):
        held = sorted(embeddings)
        if relation is None:
            raise ValueError(_per_type("'embeddings' is a dict of tables",
                                       held))
        _check_types("'embeddings' holds", held, relation)
        src, _, dst = relation
        return (_tensor(embeddings[src], f"'embeddings[{src!r}]'",
                        f'embeddings of node type {src!r}'),
                _tensor(embeddings[dst], f"'embeddings[{dst!r}]'",
                        f'embeddings of node type {dst!r}'))
    raise TypeError(f"'embeddings' must be a [N, H] tensor, a dict of them "
                    f"by node type or a predictions directory, got "
                    f"{type(embeddings).__name__}")


def _directory_tables(path: PathLike,
                      relation: Optional[Tuple[str, str, str]]
                      ) -> Tuple[_Table, _Table]:
    r""":func:`_tables` of a predictions directory."""
    tables = node_tables(path)
    what = f"'embeddings': {str(path)!r}"
    if relation is None:
        if tables is not None:
            raise ValueError(_per_type(f"{what} holds one table per node "
                                       f"type", sorted(tables)))
        table = _read(path, None)
        return table, table
    if tables is None:
        raise ValueError(_one_table(f"{what} holds one table (a homogeneous "
                                    f"model's embeddings)", relation))
    _check_types(f'{what} holds', sorted(tables), relation)
    return _read(path, relation[0]), _read(path, relation[2])


def _per_type(what: str, held: Sequence[str]) -> str:
    return (f"{what}, of node types {list(held)} (a heterogeneous "
            f"encoder's), but no edge_type was given: pass "
            f"edge_type=(source type, relation, destination type), the "
            f"relation the pairs are of (a heterogeneous LinkPredictor's "
            f"score_pairs passes its own)")


def _one_table(what: str, relation: Tuple[str, str, str]) -> str:
    return (f"{what}, not one per node type, but edge_type "
            f"{list(relation)} scores pairs of node types {relation[0]!r} "
            f"and {relation[2]!r}: give the heterogeneous model's "
            f"embeddings, a dict {{node_type: rows}} (encoder_embeddings on "
            f"its graph) or the directory pyg-fastload predict wrote with "
            f"it (a subdirectory per node type)")


def _check_types(what: str, held: Sequence[str],
                 relation: Tuple[str, str, str]) -> None:
    for node_type in (relation[0], relation[2]):
        if node_type not in held:
            raise ValueError(
                f"{what} no table of node type {node_type!r} (only of "
                f"{list(held)}): give the embeddings of the model that "
                f"scores {list(relation)}, every node type it embeds")


def _tensor(rows: Any, arg: str, name: str) -> _Table:
    if not isinstance(rows, Tensor):
        raise TypeError(f"{arg} must be a [N, H] tensor, got "
                        f"{type(rows).__name__}")
    if rows.dim() != 2:
        raise ValueError(f"{arg} has shape {list(rows.shape)}, expected "
                         f"[num_nodes, width]")
    return _Table(rows, None, name)


def _read(path: PathLike, node_type: Optional[str]) -> _Table:
    r"""The table of :obj:`node_type` (:obj:`None`: the only one) of a
    predictions directory, memory-mapped."""
    read = read_predictions(path, mmap=True, node_type=node_type)
    if 'embeddings' not in read:
        raise ValueError(f"'embeddings': {str(path)!r} holds no "
                         f"embeddings.npy; write them with "
                         f"pyg-fastload predict and a LinkPredictor (or "
                         f"NodeClassifier(predict_embeddings=True))")
    rows, node_ids = read['embeddings'], read['node_ids']
    if node_ids.numel() and bool(
            (node_ids == torch.arange(node_ids.numel())).all()):
        node_ids = None  # every node, in order: ids are rows
    return _Table(rows, node_ids, 'embeddings' if node_type is None
                  else f'embeddings of node type {node_type!r}')


def _positions(ids: Tensor, table: _Table, where: str,
               fix: str = '') -> Tensor:
    r"""The rows of :obj:`table` of the node ids :obj:`ids` (a row of the
    pairs, :obj:`where` in errors, which end with :obj:`fix`)."""
    rows, node_ids, name = table
    if node_ids is None:  # ids are rows
        count = rows.size(0)
        if ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= count:
                bad = low if low < 0 else high
                raise IndexError(f"'pairs' {where}holds node id {bad}, out "
                                 f"of range [0, {count}) of the {count:,} "
                                 f"{name}: give ids of the embedded "
                                 f"graph{fix}")
        return ids
    # ids to rows (node_ids are sorted)
    index = torch.searchsorted(node_ids, ids.clamp(min=0))
    index = index.clamp(max=max(node_ids.numel() - 1, 0))
    found = node_ids[index] == ids if node_ids.numel() else \
        torch.zeros_like(ids, dtype=torch.bool)
    if not bool(found.all()):
        bad = int(ids[~found][0])
        raise IndexError(f"'pairs' {where}holds node id {bad}, which has no "
                         f"row in the {name}: give ids listed in their "
                         f"node_ids{fix}")
    return index
