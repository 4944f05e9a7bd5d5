r"""``NodeClassifier``: GraphSAGE, GCN, GAT (or an MLP baseline) trained on
the seed nodes of neighbour-sampled mini-batches (heterogeneous ones:
:class:`~pyg_fastload.lightning.hetero_net.HeteroNet`)."""
from __future__ import annotations

import contextlib
from typing import (Any, Callable, Dict, Iterator, List, Literal, Optional,
                    Tuple)

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn import GAT, GCN, MLP
from torchmetrics.classification import MulticlassAccuracy

from pyg_fastload.graph import is_hetero
from pyg_fastload.inference import WholeGraph
from pyg_fastload.modes import HeteroSchema
from pyg_fastload.modes.contract import edge_weight, seed_loss, time_steps

from .errors import ConfigError, config_section
from .hetero_net import (HETERO_MODELS, HeteroNet, check_graph_kind,
                         check_sizes)
from .sage import WeightedGraphSAGE, edge_weights_of

__all__ = ['NodeClassifier', 'MODELS']

#: Models :class:`NodeClassifier` builds.
MODELS = ('sage', 'gcn', 'gat', 'mlp')
#: Models whose seed-node outputs stay exact when each layer drops the hops
#: it no longer needs (PyG's ``trim_to_layer``); GCN's symmetric
#: normalisation reads source degrees, which trimming changes.
TRIMMABLE = ('sage', 'gat')


class NodeClassifier(pl.LightningModule):
    r"""Node classification on mini-batches from
    :class:`~pyg_fastload.FastNeighborLoader` or PyG's ``NeighborLoader``.

    Loss and accuracy are computed on the first ``batch.batch_size`` nodes
    (the seeds; of a GraphSAINT subgraph, its nodes among the training
    nodes, their loss weighed by ``node_norm`` and its aggregation by
    ``edge_norm``: :mod:`~pyg_fastload.modes.contract`). :obj:`in_channels`
    and :obj:`num_classes` may be left out when training with a data
    module that knows them
    (:class:`~pyg_fastload.lightning.FastLoadDataModule`); they are then read
    from it before the model is built and saved in the checkpoint.

    Args:
        model (str): ``'sage'``, ``'gcn'``, ``'gat'`` or ``'mlp'`` (features
            only: the baseline that shows what the graph adds).
        in_channels (int, optional): node feature width.
        num_classes (int, optional): number of classes.
        hidden_channels (int): hidden width.
        num_layers (int): message-passing (or MLP) layers.
        dropout (float): dropout between layers.
        heads (int): attention heads (GAT only).
        lr (float): Adam learning rate.
        weight_decay (float): Adam weight decay.
        trim (bool, optional): drop the hops a layer no longer needs
            (``trim_to_layer``), when the batch carries per-hop counts and
            the hops match the layers. Default: on for SAGE and GAT, where
            it leaves the seed outputs unchanged and saves most of the work.
        node_embeddings (bool): on a ``HeteroData``, learn an embedding per
            node of the types without features (``False``: zeros, far
            cheaper on large types, e.g. mag-like's 1.1M authors).
        predict_embeddings (bool): prediction also gives every node's last
            hidden layer (what the last layer reads: its embedding), which
            :class:`PredictionWriter` writes; ``'sage'``, ``'gcn'`` or
            ``'gat'`` of 2 or more layers (a heterogeneous network: its
            labelled type's nodes' rows).
        predict_logits (bool): prediction also gives every node's outputs
            (``logits``, which ``PredictionWriter(logits=True)`` writes).
            ``False``: the classes alone; with ``data.evaluation.method:
            layerwise`` each chunk's outputs are reduced to their classes
            as they are computed, so no node's logits are stored (for a
            graph whose logits do not fit memory or disk).
        schema (dict, optional): a heterogeneous dataset's schema
            (``HeteroSchema.to_dict()``); normally taken from the data
            module, and saved with the hyperparameters so that a checkpoint
            rebuilds the network without one.

    Example:
        >>> import pytorch_lightning as pl
        >>> from pyg_fastload.lightning import (FastLoadDataModule,
        ...                                     NodeClassifier)
        >>> data = FastLoadDataModule('tiny', num_neighbors=[5, 5],
        ...                           batch_size=256, progress=False)
        >>> model = NodeClassifier(hidden_channels=32, num_layers=2)
        >>> trainer = pl.Trainer(
        ...     max_epochs=1, limit_train_batches=2, limit_val_batches=1,
        ...     accelerator='cpu', logger=False, enable_checkpointing=False,
        ...     enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(model, data)  # sizes read from the data module
        >>> model.hparams.in_channels, model.hparams.num_classes
        (16, 4)
    """
    @config_section('model')
    def __init__(
        self,
        model: Literal['sage', 'gcn', 'gat', 'mlp'] = 'sage',
        in_channels: Optional[int] = None,
        num_classes: Optional[int] = None,
        hidden_channels: int = 256,
        num_layers: int = 3,
        dropout: float = 0.5,
        heads: int = 4,
        lr: float = 3e-3,
        weight_decay: float = 0.0,
        trim: Optional[bool] = None,
        node_embeddings: bool = True,
        predict_embeddings: bool = False,
        predict_logits: bool = True,
        schema: Optional[Dict[str, Any]] = None,
    ):
        super().__init__()
        if model not in MODELS:
            raise ConfigError('model', f"{model!r} is not one of {MODELS}")
        check_sizes(hidden_channels, num_layers, heads,
                    {'in_channels': in_channels, 'num_classes': num_classes})
        if model == 'gat' and hidden_channels % heads:
            raise ConfigError('hidden_channels',
                              f"{hidden_channels} must be divisible by "
                              f"heads={heads} for GAT")
        if not 0.0 <= dropout < 1.0:
            raise ConfigError('dropout', f"{dropout!r} must lie in [0, 1)")
        for key, value in (('predict_embeddings', predict_embeddings),
                           ('predict_logits', predict_logits)):
            if not isinstance(value, bool):  # ('no' would read as true)
                raise ConfigError(key, f"{value!r} must be true or false")
        if predict_embeddings and (model == 'mlp' or num_layers < 2):
            raise ConfigError('predict_embeddings', f"the last hidden layer "
                              f"of a graph network of 2 or more layers "
                              f"(got model {model!r}, num_layers "
                              f"{num_layers})")
        if trim and model not in TRIMMABLE:
            raise ConfigError('trim', f"trimming changes {model!r}'s "
                              f"outputs; use it with {TRIMMABLE}")
        self.save_hyperparameters()
        self.trim = model in TRIMMABLE if trim is None else trim
        #: Whether the batches' ``edge_weight`` are estimator weights to
        #: aggregate with (set from the data module's sampler).
        self.edge_weights = False
        self.net: Optional[torch.nn.Module] = None
        if schema is not None:
            try:
                self._build_hetero(HeteroSchema.from_dict(schema))
            except (KeyError, TypeError, ValueError) as error:
                raise ConfigError('schema', f"not a HeteroSchema.to_dict() "
                                  f"({error}); leave it out to take the "
                                  f"data module's") from None
        elif in_channels is not None and num_classes is not None:
            self._build(in_channels, num_classes)

    def _build(self, in_channels: int, num_classes: int) -> None:
        hp = self.hparams
        self.hparams.in_channels = in_channels
        self.hparams.num_classes = num_classes
        kwargs = dict(in_channels=in_channels,
                      hidden_channels=hp.hidden_channels,
                      out_channels=num_classes, num_layers=hp.num_layers,
                      dropout=hp.dropout)
        if hp.model == 'sage':
            self.net = WeightedGraphSAGE(**kwargs)
        elif hp.model == 'gcn':
            self.net = GCN(**kwargs)
        elif hp.model == 'gat':
            self.net = GAT(heads=hp.heads, **kwargs)
        else:
            self.net = MLP(norm=None, **kwargs)
        self.train_acc = MulticlassAccuracy(num_classes, average='micro')
        self.val_acc = MulticlassAccuracy(num_classes, average='micro')
        self.test_acc = MulticlassAccuracy(num_classes, average='micro')

    @config_section('model')
    def configure_model(self) -> None:
        r"""Builds the network from the data module's feature width and
        class count when they were not given."""
        try:
            datamodule = self.trainer.datamodule
        except RuntimeError:  # not attached to a trainer
            datamodule = None
        if getattr(datamodule, 'task', 'node') == 'link':
            raise ConfigError('data.task', "NodeClassifier trains on seed "
                              "nodes: set data.task: node, or model: "
                              "class_path: LinkPredictor for links")
        labels = getattr(datamodule, 'num_classes', None)
        given = self.hparams.num_classes
        if labels is not None and given is not None and given < labels:
            raise ConfigError('num_classes', f"{given} is fewer than the "
                              f"data's {labels} classes (labels up to "
                              f"{labels - 1}); leave it out to take the "
                              f"data's")
        if self.hparams.model == 'mlp' and hasattr(datamodule,
                                                   'features_only'):
            datamodule.features_only()  # no neighbourhood to sample
        self.edge_weights = edge_weights_of(datamodule, self.hparams.model,
                                            'model')
        if self.net is not None:
            check_graph_kind(self.net, datamodule)
            return
        schema = getattr(datamodule, 'hetero_schema', None)
        if schema is not None:
            self._build_hetero(schema)
            return
        in_channels = self.hparams.in_channels
        num_classes = given if given is not None else labels
        if in_channels is None:
            in_channels = getattr(datamodule, 'num_features', None)
        if in_channels is None or num_classes is None:
            raise ConfigError(
                'in_channels' if in_channels is None else 'num_classes',
                "unknown: pass it, or train with a data module that has "
                "'num_features' and 'num_classes' (FastLoadDataModule)")
        self._build(int(in_channels), int(num_classes))

    def _build_hetero(self, schema: Any) -> None:
        hp = self.hparams
        if hp.model not in HETERO_MODELS:
            raise ConfigError('model', f"{hp.model!r} does not take a "
                              f"HeteroData; use one of {HETERO_MODELS}")
        self.hparams.num_classes = schema.num_classes
        self.hparams.schema = schema.to_dict()
        self.net = HeteroNet(schema, hp.model, hp.hidden_channels,
                             hp.num_layers, hp.dropout, hp.heads,
                             hp.node_embeddings, trim=self.trim)
        for split in ('train', 'val', 'test'):
            setattr(self, f'{split}_acc', MulticlassAccuracy(
                schema.num_classes, average='micro'))

    def forward(self, batch: Data) -> Tensor:
        r"""Logits of the nodes of :obj:`batch`: every node, or at least the
        seeds, which come first (trimmed runs, and the MLP, which needs no
        neighbours)."""
        if self.net is None:
            raise RuntimeError("NodeClassifier has no network yet: pass "
                               "'in_channels' and 'num_classes', or fit it "
                               "with a data module")
        if is_hetero(batch):  # the target type's logits
            return self.net(batch, self.edge_weights)
        if self.hparams.model == 'mlp':
            size = batch.get('batch_size')
            return self.net(batch.x if size is None else batch.x[:size])
        adj_t = batch.get('adj_t')
        if adj_t is not None:
            return self.net(batch.x, adj_t)
        kwargs: Dict[str, Any] = {}
        hops = batch.get('num_sampled_nodes')
        if (self.trim and hops is not None
                and len(hops) == self.hparams.num_layers + 1):
            kwargs = dict(num_sampled_nodes_per_hop=list(hops),
                          num_sampled_edges_per_hop=list(
                              batch.num_sampled_edges))
        if self.edge_weights:
            kwargs['edge_weight'] = edge_weight(batch)
        return self.net(batch.x, batch.edge_index, **kwargs)

    def _seed_outputs(self, batch: Any, embed: bool = False,
                      reduce: Optional[Callable[[Tensor], Tensor]] = None
                      ) -> Tuple[Optional[Tensor], Tensor, Optional[Tensor],
                                 Optional[Tensor]]:
        r"""``(node ids, logits, labels, embeddings)`` of the batch's seeds
        (embeddings, the last hidden layer, with :obj:`embed`; logits
        through :obj:`reduce`, if given): of a sampled batch, or of a
        :class:`~pyg_fastload.inference.WholeGraph`
        (``data.evaluation.method: layerwise``), whose outputs are computed
        layer-wise for every node (and reduced chunk by chunk)."""
        if isinstance(batch, WholeGraph):  # one pass, hidden rows too
            logits, hidden = batch.outputs_and_hidden(self.net, reduce) \
                if embed else (batch.outputs(self.net, reduce=reduce), None)
            return batch.node_ids(), logits, batch.labels(), hidden
        seeds = _seed_store(batch)
        size = int(seeds.batch_size)
        n_id, y = seeds.get('n_id'), seeds.get('y')  # a time step has no ids
        with _last_layer_input(self.net if embed else None) as hidden:
            logits = self(batch)[:size]
        if reduce is not None:
            logits = reduce(logits)
        if embed and isinstance(hidden[0], dict):  # typed: the seeds' type
            hidden[0] = hidden[0][self.net.target]
        return (None if n_id is None else n_id[:size], logits,
                None if y is None else y[:size].view(-1).long(),
                hidden[0][:size] if embed else None)

    def _seed_step(self, batch: Any) -> tuple:
        _, logits, y, _ = self._seed_outputs(batch)
        return logits, y

    def training_step(self, batch: Data, batch_idx: int) -> Tensor:
        steps = time_steps(batch)  # the batch contract of the modes
        if len(steps) > 1:
            return self._time_steps(batch, steps)
        logits, y = self._seed_step(batch)
        loss = seed_loss(logits, y, batch)
        self._log_train(loss, logits, y)
        return loss

    def _time_steps(self, batch: Data, steps: List[Data]) -> Tensor:
        r"""HopGNN's time steps: one forward and backward per step (its
        activations freed before the next), gradients accumulated; the
        returned loss carries the earlier steps' gradients (``p * g`` with
        value 0), so DDP combines everything in one backward."""
        params = [p for p in self.parameters() if p.requires_grad]
        carried = [torch.zeros_like(p) for p in params]
        total = torch.zeros(())
        all_logits, all_y = [], []
        for i, step in enumerate(steps):
            logits, y = self._seed_step(step)
            loss = seed_loss(logits, y, batch)
            all_logits.append(logits.detach())
            all_y.append(y)
            if i == len(steps) - 1:
                break
            total = total + loss.detach()
            if y.numel():
                grads = torch.autograd.grad(loss, params, allow_unused=True)
                for acc, grad in zip(carried, grads):
                    if grad is not None:
                        acc += grad
        for p, acc in zip(params, carried):
            loss = loss + (p * acc).sum() - (p.detach() * acc).sum()
        self._log_train(total + loss.detach(), torch.cat(all_logits),
                        torch.cat(all_y))
        return loss

    def _log_train(self, loss: Tensor, logits: Tensor, y: Tensor) -> None:
        self.train_acc(logits, y)
        size = max(y.numel(), 1)
        self.log('train_loss', loss, prog_bar=True, batch_size=size)
        self.log('train_acc', self.train_acc, on_step=False, on_epoch=True,
                 batch_size=size)

    def validation_step(self, batch: Data, batch_idx: int) -> None:
        logits, y = self._seed_step(batch)
        self.val_acc(logits, y)
        size = y.numel()
        self.log('val_loss', F.cross_entropy(logits, y), batch_size=size,
                 sync_dist=True)  # accuracy: torchmetrics syncs it
        self.log('val_acc', self.val_acc, prog_bar=True, batch_size=size)

    def test_step(self, batch: Data, batch_idx: int) -> None:
        logits, y = self._seed_step(batch)
        self.test_acc(logits, y)
        self.log('test_acc', self.test_acc, batch_size=y.numel())

    def predict_step(self, batch: Data, batch_idx: int) -> Dict[str, Tensor]:
        r"""Predicted class and outputs (``logits``) per seed node, with the
        node ids (what :class:`PredictionWriter` writes)."""
        embed = self.hparams.predict_embeddings
        keep = self.hparams.get('predict_logits', True)
        n_id, outputs, _, hidden = self._seed_outputs(
            batch, embed, None if keep else _classes)
        out = {'n_id': n_id, 'pred': outputs.argmax(dim=-1) if keep
               else outputs}
        if keep:
            out['logits'] = outputs
        if embed:
            out['embeddings'] = hidden
        return out

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr,
                                weight_decay=self.hparams.weight_decay)


@contextlib.contextmanager
def _last_layer_input(net: Optional[torch.nn.Module]
                      ) -> Iterator[List[Tensor]]:
    r"""Collects what the last convolution of :obj:`net` reads while the
    block runs (nothing for :obj:`None`): the nodes' last hidden layer, the
    seeds' rows first."""
    seen: List[Tensor] = []
    if net is None:
        yield seen
        return
    handle = net.convs[-1].register_forward_pre_hook(
        lambda module, args: seen.append(args[0]))
    try:
        yield seen
    finally:
        handle.remove()


def _seed_store(batch: Any) -> Any:
    r"""Where a batch keeps its seeds' ``batch_size``, ``y`` and ``n_id``:
    the batch, or the node type of a heterogeneous batch that has them."""
    if is_hetero(batch):
        return next(batch[t] for t in batch.node_types
                    if 'batch_size' in batch[t])
    return batch


def _classes(logits: Tensor) -> Tensor:
    r"""The predicted class of each row of :obj:`logits`."""
    return logits.argmax(dim=-1)
