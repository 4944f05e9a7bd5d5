r"""``LinkPredictor``: a GNN encoder from ``torch_geometric.nn`` and a
dot-product or MLP decoder trained on link batches
(:class:`~pyg_fastload.FastLinkNeighborLoader` or PyG's
``LinkNeighborLoader``), evaluated as ogbl-citation2 is: every evaluation
edge ranked against its fixed negatives (MRR, Hits@K), and AUROC over all
scored pairs."""
from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, Tuple, Union

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.nn import GAT, GCN, MLP
from torchmetrics import MeanMetric
from torchmetrics.classification import BinaryAUROC

from pyg_fastload.distributed.seeds import shard
from pyg_fastload.graph import is_hetero
from pyg_fastload.inference import WholeGraph, encoder_embeddings, score_pairs
from pyg_fastload.modes import HeteroSchema

from .errors import ConfigError, config_section
from .hetero_net import (HETERO_MODELS, HeteroNet, check_graph_kind,
                         check_sizes, unused)
from .sage import WeightedGraphSAGE, edge_weights_of

__all__ = ['LinkPredictor', 'ENCODERS', 'ranking_metrics']

#: Encoders :class:`LinkPredictor` builds.
ENCODERS = ('sage', 'gcn', 'gat')


def ranking_metrics(scores: Tensor, hits: List[int]) -> Dict[str, Tensor]:
    r"""Per evaluation edge, from :obj:`scores` ``[num_edges, 1 + K]``
    (the true edge first, then its negatives): the reciprocal rank and
    Hits@k, with ties ranked halfway (OGB's evaluator)."""
    pos, neg = scores[:, :1], scores[:, 1:]
    optimistic = (neg > pos).sum(dim=1)
    pessimistic = (neg >= pos).sum(dim=1)
    rank = 0.5 * (optimistic + pessimistic).float() + 1
    out = {'mrr': 1.0 / rank}
    for k in hits:
        out[f'hits@{k}'] = (rank <= k).float()
    return out


class LinkPredictor(pl.LightningModule):
    r"""Link prediction on sampled subgraphs.

    Node embeddings come from :obj:`encoder` over the batch's subgraph; a
    pair is scored by the dot product of its endpoints' embeddings or by an
    MLP on their element-wise product. Training batches carry
    ``edge_label_index`` / ``edge_label`` (binary negatives: BCE) or
    ``src_index`` / ``dst_pos_index`` / ``dst_neg_index`` (triplet
    negatives: BCE or BPR). Evaluation batches (``task: link`` of
    :class:`~pyg_fastload.lightning.FastLoadDataModule`) hold each
    evaluation edge followed by its fixed negatives; ``val_mrr``,
    ``val_hits@K`` and ``val_auroc`` (``test_*``) are logged.

    On a ``HeteroData`` (or heterogeneous dataset directory) the encoder is
    one convolution per relation summed per node type (``'sage'`` or
    ``'gat'``, as :class:`~pyg_fastload.lightning.NodeClassifier` builds
    it), and the pairs of the data module's ``link.edge_type`` are scored
    from its source and destination types' embeddings; prediction gives
    one embedding table per node type (:attr:`node_types`).

    Args:
        encoder (str): ``'sage'``, ``'gcn'`` or ``'gat'``.
        decoder (str): ``'dot'`` or ``'mlp'``.
        loss (str): ``'bce'`` or ``'bpr'`` (needs triplet negatives).
        in_channels (int, optional): node feature width (default: the
            data module's).
        hidden_channels (int): hidden and embedding width.
        num_layers (int): message-passing layers.
        dropout (float): dropout between layers.
        heads (int): attention heads (GAT only).
        lr (float): Adam learning rate.
        weight_decay (float): Adam weight decay.
        hits (List[int]): the K of the logged Hits@K.
        node_embeddings (bool): on a heterogeneous graph, learn an
            embedding per node of the types without features (else
            zeros).
        schema (dict, optional): a heterogeneous dataset's schema
            (``HeteroSchema.to_dict()``; default: the data module's, saved
            with the checkpoint).
        edge_type (List[str], optional): the relation whose pairs are
            scored on a heterogeneous graph (default: the data module's
            ``link.edge_type``).

    Example:
        >>> import pytorch_lightning as pl
        >>> from pyg_fastload.lightning import (FastLoadDataModule,
        ...                                     LinkPredictor)
        >>> data = FastLoadDataModule('tiny', task='link',
        ...                           num_neighbors=[5, 5], batch_size=256,
        ...                           progress=False)
        >>> model = LinkPredictor(hidden_channels=32, hits=[1, 10])
        >>> trainer = pl.Trainer(
        ...     max_epochs=1, limit_train_batches=2, limit_val_batches=1,
        ...     accelerator='cpu', logger=False, enable_checkpointing=False,
        ...     enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(model, data)
        >>> sorted(k for k in trainer.callback_metrics if k.startswith('val'))
        ['val_auroc', 'val_hits@1', 'val_hits@10', 'val_mrr']
    """
    @config_section('model')
    def __init__(
        self,
        encoder: Literal['sage', 'gcn', 'gat'] = 'sage',
        decoder: Literal['dot', 'mlp'] = 'dot',
        loss: Literal['bce', 'bpr'] = 'bce',
        in_channels: Optional[int] = None,
        hidden_channels: int = 256,
        num_layers: int = 2,
        dropout: float = 0.0,
        heads: int = 4,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        hits: List[int] = [1, 10, 50],  # noqa: B006 (CLI default)
        node_embeddings: bool = False,
        schema: Optional[Dict[str, Any]] = None,
        edge_type: Optional[List[str]] = None,
    ):
        super().__init__()
        for key, value, allowed in (('encoder', encoder, ENCODERS),
                                    ('decoder', decoder, ('dot', 'mlp')),
                                    ('loss', loss, ('bce', 'bpr'))):
            if value not in allowed:
                raise ConfigError(key, f"{value!r} is not one of {allowed}")
        check_sizes(hidden_channels, num_layers, heads,
                    {'in_channels': in_channels})
        if encoder == 'gat' and hidden_channels % heads:
            raise ConfigError('hidden_channels', f"{hidden_channels} must be "
                              f"divisible by heads={heads} for GAT")
        if not 0.0 <= dropout < 1.0:
            raise ConfigError('dropout', f"{dropout!r} must lie in [0, 1)")
        if not hits or any(isinstance(k, bool) or not isinstance(k, int)
                           or k < 1 for k in hits):
            raise ConfigError('hits', f"{hits!r} must be positive ints")
        self.save_hyperparameters()
        #: Whether the batches' ``edge_weight`` are estimator weights to
        #: aggregate with (set from the data module's sampler).
        self.edge_weights = False
        self.encoder: Optional[torch.nn.Module] = None
        #: The scored relation on a heterogeneous graph.
        self.edge_type: Optional[Tuple[str, str, str]] = None
        #: The node types the encoder embeds on a heterogeneous graph
        #: (every type a relation leads into), sorted.
        self.node_types: List[str] = []
        self.decoder: Optional[torch.nn.Module] = None
        if decoder == 'mlp':
            self.decoder = MLP([hidden_channels, hidden_channels, 1],
                               norm=None, dropout=dropout)
        self.metrics = torch.nn.ModuleDict({
            f'{split}_{name}': MeanMetric() for split in ('val', 'test')
            for name in ['mrr', *[f'hits@{k}' for k in hits]]})
        self.auroc = torch.nn.ModuleDict({split: BinaryAUROC()
                                          for split in ('val', 'test')})
        if schema is not None or edge_type is not None:
            if schema is None or edge_type is None:
                raise ConfigError('schema', "'schema' and 'edge_type' go "
                                  "together (a heterogeneous model); leave "
                                  "both out to take the data module's")
            try:
                hetero = HeteroSchema.from_dict(schema)
            except (KeyError, TypeError, ValueError) as error:
                raise ConfigError('schema', f"not a HeteroSchema.to_dict() "
                                  f"({error}); leave it out to take the "
                                  f"data module's") from None
            self._build_hetero(hetero, edge_type)
        elif in_channels is not None:
            self._build(in_channels)

    def _build(self, in_channels: int) -> None:
        hp = self.hparams
        self.hparams.in_channels = in_channels
        kwargs = dict(in_channels=in_channels,
                      hidden_channels=hp.hidden_channels,
                      out_channels=hp.hidden_channels,
                      num_layers=hp.num_layers, dropout=hp.dropout)
        if hp.encoder == 'sage':
            self.encoder = WeightedGraphSAGE(**kwargs)
        elif hp.encoder == 'gcn':
            self.encoder = GCN(**kwargs)
        else:
            self.encoder = GAT(heads=hp.heads, **kwargs)

    def _build_hetero(self, schema: HeteroSchema,
                      edge_type: Any) -> None:
        hp = self.hparams
        edge_type = tuple(edge_type)
        if hp.encoder not in HETERO_MODELS:
            raise ConfigError('encoder', f"{hp.encoder!r} does not take a "
                              f"heterogeneous graph: use one of "
                              f"{HETERO_MODELS}")
        if edge_type not in schema.edge_types:
            raise ConfigError('edge_type', f"{list(edge_type)} is not an "
                              f"edge type of the schema")
        self.hparams.schema = schema.to_dict()
        self.hparams.edge_type = list(edge_type)
        self.edge_type = edge_type
        self.encoder = HeteroNet(schema, hp.encoder, hp.hidden_channels,
                                 hp.num_layers, hp.dropout, hp.heads,
                                 hp.node_embeddings,
                                 out_channels=hp.hidden_channels)
        outputs = {e[2] for e in schema.edge_types}
        self.node_types = sorted(outputs)
        missing = {edge_type[0], edge_type[2]} - outputs
        if missing:
            raise ConfigError('edge_type', f"no relation leads into node "
                              f"type(s) {sorted(missing)}, so the encoder "
                              f"gives them no embedding")

    @config_section('model')
    def configure_model(self) -> None:
        r"""Builds the encoder from the data module's feature width, and
        checks that the data module serves link batches fit for the
        loss."""
        try:
            datamodule = self.trainer.datamodule
        except RuntimeError:  # not attached to a trainer
            datamodule = None
        task = getattr(datamodule, 'task', None)
        predicting = getattr(self._trainer, 'predicting', False)
        if task == 'node' and not predicting:  # predict: every node's rows
            raise ConfigError('data.task', "LinkPredictor trains on link "
                              "batches: set data.task: link")
        link = getattr(getattr(datamodule, 'spec', None), 'link', None)
        self.edge_weights = edge_weights_of(datamodule, self.hparams.encoder,
                                            'encoder')
        if self.hparams.loss == 'bpr' and link is not None and \
                link.neg_sampling != 'triplet':
            raise ConfigError('loss', "'bpr' ranks each positive above its "
                              "own negatives: set data.link.neg_sampling: "
                              "triplet (or loss: bce)")
        if self.encoder is not None:
            check_graph_kind(self.encoder, datamodule)
            return
        schema = getattr(datamodule, 'hetero_schema', None)
        if schema is not None:
            edge_type = getattr(link, 'edge_type', None)
            if edge_type is None:
                raise ConfigError('data.link.edge_type', "a heterogeneous "
                                  "graph needs the relation to predict")
            self._build_hetero(schema, edge_type)
            return
        in_channels = self.hparams.in_channels
        if in_channels is None:
            in_channels = getattr(datamodule, 'num_features', None)
        if in_channels is None:
            raise ConfigError('in_channels', "unknown: pass it, or train "
                              "with a data module that has 'num_features'")
        self._build(int(in_channels))

    def forward(self, batch: Union[Data, HeteroData]
                ) -> Tuple[Tensor, Tensor]:
        r"""Embeddings of the source-side and destination-side nodes of
        :obj:`batch` (the same tensor on a homogeneous graph, aggregated
        over its ``adj_t`` where it has one (``data.adjacency: sparse``),
        else over its ``edge_index``; on a heterogeneous one, the scored
        relation's two types)."""
        if self.encoder is None:
            raise RuntimeError("LinkPredictor has no encoder yet: pass "
                               "'in_channels', or fit it with a data module")
        if not is_hetero(batch):
            adj_t = batch.get('adj_t')  # data.adjacency: sparse (unweighted)
            if adj_t is not None:
                h = self.encoder(batch.x, adj_t)
            else:
                weight = batch.edge_weight if self.edge_weights else None
                h = self.encoder(batch.x, batch.edge_index,
                                 edge_weight=weight)
            return h, h
        src, _, dst = self.edge_type
        h = self.encoder.embed(batch, self.edge_weights)
        rest = 0.0 * unused(h, [src, dst])  # every parameter in the loss
        return h[src] + rest, h[dst]

    def score(self, h: Tuple[Tensor, Tensor], src: Tensor,
              dst: Tensor) -> Tensor:
        r"""The logit of every pair ``(src[i], dst[i])`` of batch-local
        node indices, from the embeddings :obj:`h` (:meth:`forward`)."""
        pair = h[0][src] * h[1][dst]
        if self.decoder is None:
            return pair.sum(dim=-1)
        return self.decoder(pair).view(-1)

    def node_embeddings(self, data: Any, **options: Any
                        ) -> Union[Tensor, Dict[str, Tensor]]:
        r"""The encoder's output for every node of :obj:`data` (a ``Data``
        or a ``(FeatureStore, GraphStore)`` pair; a heterogeneous model's:
        a ``HeteroData`` or typed stores, giving a dict of one table per
        node type of :attr:`node_types`), layer-wise over every
        in-neighbour: the full-batch encoder's rows
        (:func:`~pyg_fastload.inference.encoder_embeddings`; options are
        :func:`~pyg_fastload.layerwise_inference`'s)."""
        return encoder_embeddings(self.encoder, data, **options)

    def score_pairs(self, embeddings: Any, pairs: Any,
                    chunk_size: int = 65536) -> Tensor:
        r"""The logits of the ``[2, P]`` node pairs :obj:`pairs` (or a
        ``torch.save`` file of them) from :obj:`embeddings` (what
        :meth:`node_embeddings` returns, or the directory ``pyg-fastload
        predict`` wrote), with this model's decoder, :obj:`chunk_size`
        pairs at a time (:func:`~pyg_fastload.inference.score_pairs`). On
        a heterogeneous model, the pairs are of :attr:`edge_type`: row 0
        ids of its source type, row 1 of its destination type."""
        return score_pairs(embeddings, pairs, self.decoder,
                           edge_type=self.edge_type, chunk_size=chunk_size,
                           device=self.device)

    def predict_step(self, batch: Any, batch_idx: int) -> Dict[str, Any]:
        r"""The node ids and encoder embeddings of the batch's nodes (what
        :class:`PredictionWriter` writes, kind ``'embeddings'``): of every
        node, layer-wise and exact, from a
        :class:`~pyg_fastload.inference.WholeGraph` (``data.evaluation.method:
        layerwise``), else of a sampled batch's seeds. On a heterogeneous
        model, of every node type of :attr:`node_types`: ``'n_id'`` and
        ``'embeddings'`` are dicts by node type, each holding this rank's share
        of the type's nodes (every ``world_size``-th)."""
        if self.encoder is None:
            raise RuntimeError("LinkPredictor has no encoder yet: pass "
                               "'in_channels', or load a checkpoint")
        if isinstance(batch, WholeGraph) and self.edge_type is not None:
            # every rank computes every type's rows, then keeps its share
            h = encoder_embeddings(self.encoder, batch.data, **batch.options)
            ids = {t: shard(torch.arange(rows.size(0)), self.global_rank,
                            self.trainer.world_size) for t, rows in h.items()}
            return {'n_id': ids,
                    'embeddings': {t: h[t][ids[t]] for t in ids}}
        if isinstance(batch, WholeGraph):
            return {'n_id': batch.node_ids(),
                    'embeddings': batch.outputs(self.encoder)}
        if self.edge_type is not None:
            raise ConfigError('data.evaluation.method', "a heterogeneous "
                              "LinkPredictor predicts every node type's "
                              "embeddings layer-wise: predict with "
                              "--data.task link (or "
                              "--data.evaluation.method layerwise)")
        size = batch.get('batch_size')
        if size is None or batch.get('n_id') is None:
            raise ConfigError('data.task', "LinkPredictor predicts node "
                              "embeddings from node batches: predict with "
                              "--data.task node (and --data.evaluation."
                              "method layerwise for the exact full-graph "
                              "embeddings)")
        h = self(batch)[0]
        return {'n_id': batch.n_id[:size], 'embeddings': h[:size]}

    def _labels(self, batch: Union[Data, HeteroData]) -> Any:
        r"""Where :obj:`batch` keeps its label edges (the scored
        relation's store on a heterogeneous batch), and the stores of the
        triplet indices (source type, destination type)."""
        if not is_hetero(batch):
            return batch, batch, batch
        src, _, dst = self.edge_type
        return batch[self.edge_type], batch[src], batch[dst]

    def _pairs(self, batch: Any) -> Tuple[Tensor, Tensor]:
        r"""``(logits, labels)`` of a training batch's labelled pairs, and
        for triplets the positives' and negatives' logits paired."""
        h = self(batch)
        labels, sources, targets = self._labels(batch)
        if 'src_index' in sources:  # triplet negatives
            src_index = sources.src_index
            neg_dst = targets.dst_neg_index.view(src_index.numel(), -1)
            pos = self.score(h, src_index, targets.dst_pos_index)
            neg = self.score(
                h, src_index.view(-1, 1).expand_as(neg_dst).reshape(-1),
                neg_dst.reshape(-1)).view(neg_dst.shape)
            return pos, neg
        src, dst = labels.edge_label_index
        return self.score(h, src, dst), labels.edge_label.float()

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        first, second = self._pairs(batch)
        if 'src_index' in self._labels(batch)[1]:
            pos, neg = first, second
            if self.hparams.loss == 'bpr':
                loss = -F.logsigmoid(pos.view(-1, 1) - neg).mean()
            else:
                logits = torch.cat([pos, neg.reshape(-1)])
                labels = torch.cat([torch.ones_like(pos),
                                    torch.zeros(neg.numel())])
                loss = F.binary_cross_entropy_with_logits(logits, labels)
            size = pos.numel()
        else:
            if self.hparams.loss == 'bpr':
                raise ConfigError('loss', "'bpr' needs triplet negatives")
            loss = F.binary_cross_entropy_with_logits(first, second)
            size = second.numel()
        self.log('train_loss', loss, prog_bar=True, batch_size=size)
        return loss

    def _evaluate(self, batch: Any, split: str) -> None:
        labels = self._labels(batch)[0]
        label = labels.edge_label
        group = _group_size(label)
        h = self(batch)
        src, dst = labels.edge_label_index
        logits = self.score(h, src, dst)
        self.auroc[split](logits, label.long())
        size = logits.numel() // group
        metrics = ranking_metrics(logits.view(-1, group), self.hparams.hits)
        for name, values in metrics.items():
            metric = self.metrics[f'{split}_{name}']
            metric(values)
            self.log(f'{split}_{name}', metric, batch_size=size,
                     prog_bar=name == 'mrr')
        self.log(f'{split}_auroc', self.auroc[split], batch_size=size)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, 'val')

    def test_step(self, batch: Any, batch_idx: int) -> None:
        self._evaluate(batch, 'test')

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr,
                                weight_decay=self.hparams.weight_decay)


def _group_size(label: Tensor) -> int:
    r"""Label edges per evaluation edge in an evaluation batch: its true
    edge (label 1), then its negatives (0); every group as long."""
    ones = label.nonzero().view(-1)
    group = int(ones[1] - ones[0]) if ones.numel() > 1 else label.numel()
    if not ones.numel() or ones.numel() * group != label.numel() or \
            not torch.equal(ones, torch.arange(0, label.numel(), group)):
        raise RuntimeError("an evaluation batch must hold whole groups, each "
                           "a true edge (label 1) then its negatives (0), as "
                           "FastLoadDataModule(task='link') serves them")
    return group
