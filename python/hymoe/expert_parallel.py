"""Expert parallelism for hymoe's MoE layer, on ``torch.distributed``: KempnerForge's contract
(``kempnerforge.distributed.expert_parallel``), with hymoe's C++ doing the permutations and the local experts.

``apply_expert_parallel(model, device_mesh_or_group)`` keeps each ``hymoe.torch.MoEMLP``'s contiguous slice of
``num_experts / ep`` experts (router and shared expert on every rank) and sets KempnerForge's metadata
(``ep_group``, ``ep_world_size``, ``local_expert_start``, ``num_local_experts``). The layer's forward then runs
``ep_dispatch_and_compute``: expand the (token, slot) pairs, group them by the rank that owns their expert
(``hymoe._core.moe_group_order``, a stable counting sort), exchange the counts, send the rows and the expert ids
with ``all_to_all_single``, run the local experts with hymoe's grouped kernels, send the outputs back and sum
them with the router weights in slot order. The backward is the same exchange reversed (``_AllToAll``).
docs/distributed.md states what is computed where, what is local to a rank, and the bits guarantee.
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn

from hymoe import _core
from hymoe._module_kinds import _activation_name, _as_f32, _mlp_kind, _np_f32

__all__ = ["apply_expert_parallel", "rebalance_expert_parallel", "ep_dispatch_and_compute", "record_exchanges",
           "ExchangeRecord"]


@dataclass
class ExchangeRecord:
    """What this rank's exchanges moved while recorded: all-to-all calls, bytes sent to other ranks (rows, routing
    weights, ids and counts; what stays on the rank is not counted) and seconds spent in the calls (waiting for the slowest rank
    included)."""

    calls: int = 0
    bytes_to_others: int = 0
    seconds: float = 0.0


_recorders: list = []


@contextlib.contextmanager
def record_exchanges():
    """``with record_exchanges() as r: moe(x)`` fills ``r`` (an ExchangeRecord) with that code's exchanges,
    forward and backward."""
    record = ExchangeRecord()
    _recorders.append(record)
    try:
        yield record
    finally:
        _recorders.remove(record)


def _all_to_all(out: torch.Tensor, x: torch.Tensor, recv_counts, send_counts, group) -> None:
    start = time.perf_counter() if _recorders else 0.0
    if recv_counts is None:
        dist.all_to_all_single(out, x, group=group)
    else:
        dist.all_to_all_single(out, x, output_split_sizes=recv_counts, input_split_sizes=send_counts, group=group)
    if _recorders:
        seconds = time.perf_counter() - start
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        row_bytes = x.element_size() * (x[0].numel() if x.dim() > 1 and x.shape[0] else 1)
        if send_counts is None:
            sent = (world - 1) * (x.numel() // world) * x.element_size()
        else:
            sent = (sum(send_counts) - send_counts[rank]) * row_bytes
        for r in _recorders:
            r.calls += 1
            r.bytes_to_others += sent
            r.seconds += seconds


class _AllToAll(torch.autograd.Function):
    """Rows of x sent to the ranks in ``send_counts`` order, rows received in ``recv_counts``; the gradient goes
    back by the same exchange with the counts swapped, so every rank takes part in the backward's exchange too."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, recv_counts: list, send_counts: list, group) -> torch.Tensor:
        ctx.recv_counts, ctx.send_counts, ctx.group = recv_counts, send_counts, group
        return _exchange(x, recv_counts, send_counts, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _exchange(grad, ctx.send_counts, ctx.recv_counts, ctx.group), None, None, None


def _exchange(x: torch.Tensor, recv_counts: list, send_counts: list, group) -> torch.Tensor:
    x = x.contiguous()
    out = x.new_empty((sum(recv_counts),) + tuple(x.shape[1:]))
    _all_to_all(out, x, recv_counts, send_counts, group)
    return out


def _group_order(destinations: torch.Tensor, num_groups: int) -> tuple[torch.Tensor, list]:
    order, counts = _core.moe_group_order(destinations.detach().to(torch.int64).contiguous().numpy(), num_groups)
    return torch.from_numpy(order), [int(c) for c in counts]


def _inverse(order: torch.Tensor) -> torch.Tensor:
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), dtype=order.dtype)
    return inverse


def _rows_np(t: torch.Tensor, what: str):
    return _np_f32(_as_f32(t, what).reshape(t.shape[0], t.shape[-1]))


class _PermuteRows(torch.autograd.Function):
    """out[r] = x[index[r] // divisor], in hymoe's C++ (``moe_permute_rows``: one pass, where torch's expand and
    index took two). divisor top_k sends a token's row once per slot: the backward sums each token's slot
    gradients in slot order (``position``: each pair's row), wherever the slots went. divisor 1 is a permutation,
    undone in the backward."""

    @staticmethod
    def forward(ctx, x, index, divisor, position):
        ctx.index, ctx.divisor, ctx.position, ctx.shape = index, divisor, position, x.shape
        out = _core.moe_permute_rows(_rows_np(x, "rows"), index, divisor)
        return torch.from_numpy(out).to(x.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        g = _rows_np(grad, "gradient of permuted rows")
        if ctx.divisor == 1:
            out = _core.moe_unpermute_rows(g, ctx.index)
        else:
            out = _core.moe_combine_slot_rows(g, ctx.position, None, ctx.shape[0], ctx.divisor)
        return torch.from_numpy(out).to(grad.dtype).view(ctx.shape), None, None, None


class _UnpermuteRows(torch.autograd.Function):
    """out[index[r]] = x[r] (index a permutation), in hymoe's C++; the backward is the gather."""

    @staticmethod
    def forward(ctx, x, index):
        ctx.index = index
        out = _core.moe_unpermute_rows(_rows_np(x, "rows"), index)
        return torch.from_numpy(out).to(x.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        out = _core.moe_permute_rows(_rows_np(grad, "gradient of unpermuted rows"), ctx.index, 1)
        return torch.from_numpy(out).to(grad.dtype), None


class _CombineSlots(torch.autograd.Function):
    """y[t] = sum over slots k, in slot order, of weights[t, k] * rows[position[t, k]] (weights None: 1): the fused
    layer's combine, in hymoe's C++ (``moe_combine_slot_rows``), one pass where torch's index, multiply and slot
    sums took several. The backward gives the rows' and the weights' gradients (the weights' dot products summed in
    double)."""

    @staticmethod
    def forward(ctx, rows, weights, position, num_tokens, top_k):
        r = _rows_np(rows, "expert outputs")
        w = None if weights is None else _np_f32(_as_f32(weights, "routing weights").reshape(-1))
        ctx.saved = (r, w, position, top_k, rows.dtype, None if weights is None else (weights.dtype, weights.shape))
        return torch.from_numpy(_core.moe_combine_slot_rows(r, position, w, num_tokens, top_k)).to(rows.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y):
        r, w, position, top_k, rows_dtype, w_like = ctx.saved
        ctx.saved = None
        grad_rows, grad_w = _core.moe_combine_slot_rows_backward(r, position, w, _rows_np(grad_y, "gradient of y"),
                                                                 top_k)
        grad_weights = None if w_like is None else torch.from_numpy(grad_w).to(w_like[0]).view(w_like[1])
        return torch.from_numpy(grad_rows).to(rows_dtype), grad_weights, None, None, None


def _grouped(moe, shared: bool = False):
    """(hymoe's GroupedExperts over the module's local expert weights, or over its shared expert alone, the
    weights, their activation), built again when a weight was replaced or changed in place (an optimizer step):
    packing costs about one pass over the weights, which grouped_expert_forward would pay on every call."""
    if shared:
        experts = [moe.shared_expert]
        swiglu = hasattr(experts[0], "gate_proj")
        names = ("gate_proj", "up_proj", "down_proj") if swiglu else ("up_proj", "down_proj")
        weights = [getattr(e, n).weight for e in experts for n in names]
        activation = "silu" if swiglu else _activation_name(experts[0]._activation)
    elif moe.packed_experts:
        weights = [moe.up_w, moe.down_w] + ([moe.gate_w] if moe._is_swiglu else [])
        activation = "silu" if moe._is_swiglu else _activation_name(moe._packed_activation)
    else:
        swiglu = hasattr(moe.experts[0], "gate_proj")
        names = ("gate_proj", "up_proj", "down_proj") if swiglu else ("up_proj", "down_proj")
        weights = [getattr(e, n).weight for e in moe.experts for n in names]
        activation = "silu" if swiglu else _activation_name(moe.experts[0]._activation)
    experts = [moe.shared_expert] if shared else None if moe.packed_experts else moe.experts
    key = [(t._version, t.data_ptr(), t.dtype) for t in weights]
    slot = "_ep_grouped_shared" if shared else "_ep_grouped"
    cached = moe.__dict__.get(slot)
    if cached is None or cached[1] != key or any(a is not b for a, b in zip(cached[2], weights)):
        f32 = [_np_f32(_as_f32(t, "expert weight")) for t in weights]
        if experts is None:
            built = _core.GroupedExperts.packed(f32[0], f32[1], f32[2] if len(f32) == 3 else None, activation)
        else:
            n = len(f32) // len(experts)
            built = _core.GroupedExperts([tuple(f32[i:i + n]) if n == 3 else (None, *f32[i:i + n])
                                          for i in range(0, len(f32), n)], activation)
        cached = moe.__dict__[slot] = (built, key, weights, activation)
    return cached[0], weights, cached[3]


class _Grouped(torch.autograd.Function):
    """y = hymoe's GroupedExperts on x_sorted, each row's output times its scale in the kernel where ``scale`` is
    given (as MoELayer applies routing weights); the backward is hymoe's C++ expert backward (the kernels of
    MoELayer::backward), gradients for x_sorted, the scales and every weight (zeros for an expert without rows)."""

    @staticmethod
    def forward(ctx, grouped, tokens_per_expert, train, x_sorted, scale, *weights):
        x = _np_f32(_as_f32(x_sorted, "x_sorted"))
        s = None if scale is None else _np_f32(_as_f32(scale, "row scales").reshape(-1))
        ctx.dtypes = (x_sorted.dtype, None if scale is None else scale.dtype, [w.dtype for w in weights])
        if train:
            y, ctx.saved = grouped.forward(x, tokens_per_expert, True, s)
            ctx.grouped = grouped  # the weights the forward used, even if the module's are re-packed meanwhile
        else:
            y = grouped.forward(x, tokens_per_expert, False, s)
        return torch.from_numpy(y).to(x_sorted.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_y):
        grad_x, grads, grad_scale = ctx.grouped.backward(
            ctx.saved, _np_f32(_as_f32(grad_y, "gradient of the experts' output")))
        ctx.saved = ctx.grouped = None
        x_dtype, scale_dtype, w_dtypes = ctx.dtypes
        needs = ctx.needs_input_grad
        out = [None, None, None, torch.from_numpy(grad_x).to(x_dtype) if needs[3] else None,
               torch.from_numpy(grad_scale).to(scale_dtype).view(-1, 1) if needs[4] and grad_scale is not None
               else None]
        out += [torch.from_numpy(g).to(dt) if need else None for g, dt, need in zip(grads, w_dtypes, needs[5:])]
        return tuple(out)


def _run_grouped(moe, x_sorted: torch.Tensor, tokens_per_expert: list, shared: bool,
                 scale: torch.Tensor | None = None) -> torch.Tensor:
    grouped, weights, _ = _grouped(moe, shared)
    train = torch.is_grad_enabled() and (x_sorted.requires_grad or any(w.requires_grad for w in weights) or
                                         (scale is not None and scale.requires_grad))
    return _Grouped.apply(grouped, tokens_per_expert, train, x_sorted, scale, *weights)


def shared_expert_forward(moe, x: torch.Tensor) -> torch.Tensor:
    """The module's shared expert on x (tokens, dim): hymoe's grouped kernel (packed once, a row's bits
    independent of the rows beside it) for a SwiGLUMLP / StandardMLP, the module itself otherwise."""
    expert = moe.shared_expert
    if not _plain_mlps([expert]) or x.shape[0] == 0:
        return expert(x)
    return _run_grouped(moe, x, [x.shape[0]], shared=True)


def _local_experts(moe, x_sorted: torch.Tensor, tokens_per_expert: list, scale: torch.Tensor) -> torch.Tensor:
    """The local experts on rows grouped by local expert, each row's output times its scale (rows, 1): hymoe's
    grouped kernels (packed once, _grouped; the scale applied in the kernel, as the fused layer applies it) for the
    MLPs they compute, differentiable as hymoe.torch.grouped_expert_forward is; the modules themselves (in torch,
    expert by expert, then the scale) for any other class."""
    native = getattr(moe, "ep_native_experts", None)
    if native is None:  # pruned by KempnerForge's own apply_expert_parallel
        native = moe.ep_native_experts = moe.packed_experts or _plain_mlps(moe.experts)
    if native:
        return _run_grouped(moe, x_sorted, tokens_per_expert, shared=False, scale=scale)
    outs, offset = [], 0
    for expert, n in zip(moe.experts, tokens_per_expert):
        outs.append(expert(x_sorted[offset:offset + n]))
        offset += n
    return (torch.cat(outs) if outs else x_sorted.new_zeros(x_sorted.shape)) * scale.to(x_sorted.dtype)


def ep_dispatch_and_compute(x: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, moe, ep_group,
                            local_expert_start: int, num_local_experts: int, ep_world_size: int,
                            gradient_scale: bool = False) -> torch.Tensor:
    """KempnerForge's function of the same name and arguments: x (tokens, dim), weights and indices
    (tokens, top_k) of this rank's tokens -> (tokens, dim), the weighted sum of their experts' outputs, wherever
    those experts live. Every rank of ``ep_group`` must call it (a rank with no tokens too)."""
    num_tokens, top_k = indices.shape
    dim = x.shape[-1]
    flat_ids = indices.reshape(-1).to(torch.int64)
    replicas = getattr(moe, "ep_replicas", None)
    if replicas and torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in moe.parameters())):
        raise RuntimeError("hymoe.expert_parallel: a model with replicated experts is for inference (each replica "
                           "would get part of its expert's gradient); run it under torch.no_grad()")
    num_experts = len(replicas["replica_count"]) if replicas else num_local_experts * ep_world_size
    if flat_ids.numel() and (int(flat_ids.min()) < 0 or int(flat_ids.max()) >= num_experts):
        raise ValueError(f"hymoe.expert_parallel: expert ids must lie in [0, {num_experts}); "
                         f"got {int(flat_ids.min())}..{int(flat_ids.max())}")
    if replicas:
        # Pair (t, k) of expert e goes to replica t % count(e) (docs/placement.md): its physical slot, the rank
        # holding that slot, and the slot's index on that rank.
        token = torch.arange(num_tokens, dtype=torch.int64).repeat_interleave(top_k)
        physical = replicas["logical_to_physical"][flat_ids, token % replicas["replica_count"][flat_ids]]
        destination, sent_ids = physical // num_local_experts, physical % num_local_experts
    else:
        destination, sent_ids = flat_ids // num_local_experts, flat_ids
    # 1-2. The (token, slot) pairs grouped by the rank that owns their expert, pair order kept within a rank.
    order, send_counts = _group_order(destination, ep_world_size)
    position = _inverse(order).numpy()  # each pair's row among those sent
    order_np = order.numpy()
    # Each pair's token row, in send order; the backward sums a token's slot gradients in slot order, whichever
    # ranks the slots went to.
    x_send = _PermuteRows.apply(x.reshape(num_tokens, dim), order_np, max(top_k, 1), position)
    w_send = _PermuteRows.apply(weights.reshape(-1, 1), order_np, 1, None)
    ids_send = sent_ids[order]
    # 3. Counts: what this rank will receive from each rank.
    recv = torch.empty(ep_world_size, dtype=torch.int64)
    _all_to_all(recv, torch.tensor(send_counts, dtype=torch.int64), None, None, ep_group)
    recv_counts = [int(c) for c in recv]
    # 4. The rows and their routing weights (differentiable), and their expert ids.
    x_recv = _AllToAll.apply(x_send, recv_counts, send_counts, ep_group)
    w_recv = _AllToAll.apply(w_send, recv_counts, send_counts, ep_group)
    ids_recv = _exchange(ids_send, recv_counts, send_counts, ep_group)
    # 5. The local experts on the received rows grouped by local expert, each row's output times its routing weight
    # inside the kernel (the fused layer's row scale), then back in received order.
    local_order, tokens_per_expert = _group_order(ids_recv if replicas else ids_recv - local_expert_start,
                                                  num_local_experts)
    local_np = local_order.numpy()
    scale = _PermuteRows.apply(w_recv, local_np, 1, None)
    if gradient_scale and x_recv.requires_grad and x_recv.shape[0] > 0:
        # KempnerForge's rule under EP: each local expert's rows times (received rows / local experts) / its rows,
        # in float32 as the fused layer computes it (one rank gives its bits).
        avg = torch.tensor(x_recv.shape[0] / max(num_local_experts, 1), dtype=torch.float32)
        load = avg / torch.tensor(tokens_per_expert, dtype=torch.float32).clamp(min=1.0)
        scale = scale * load.repeat_interleave(torch.tensor(tokens_per_expert)).unsqueeze(-1).to(scale.dtype)
    y_local = _local_experts(moe, _PermuteRows.apply(x_recv, local_np, 1, None), tokens_per_expert, scale)
    y_recv = _UnpermuteRows.apply(y_local, local_np)
    # 6. The outputs back to the ranks their tokens came from, in the order they were sent.
    returned = _AllToAll.apply(y_recv, send_counts, recv_counts, ep_group)
    # 7. Each token's weighted outputs summed in slot order (the fused layer's combine), so a token's bits do not
    # depend on which rank computed which expert or on how many ranks there are.
    if top_k == 0:
        return x.new_zeros(num_tokens, dim)
    return _CombineSlots.apply(returned, None, position, num_tokens, top_k).to(x.dtype)


def _ep_group_of(device_mesh_or_group):
    """(group, rank, size) for the argument, or None where KempnerForge's apply step is a no-op: no mesh, a mesh
    without an "ep" dimension, or one whose "ep" dimension has size 1. A process group is used at any size, so a
    one-rank group runs the expert-parallel forward (the reference its tests compare more ranks against)."""
    if device_mesh_or_group is None:
        return None
    names = getattr(device_mesh_or_group, "mesh_dim_names", None)
    if hasattr(device_mesh_or_group, "get_group"):  # a DeviceMesh
        if names is None or "ep" not in names:
            return None
        mesh = device_mesh_or_group["ep"]
        if mesh.size() <= 1:
            return None
        return mesh.get_group(), mesh.get_local_rank(), mesh.size()
    group = device_mesh_or_group
    return group, dist.get_rank(group), dist.get_world_size(group)


def _own_copy(module: nn.Module, name: str, tensor: torch.Tensor) -> None:
    """Puts a copy of ``tensor`` (which may view the C++ layer being freed) in place under ``name``."""
    owner_path, _, attr = name.rpartition(".")
    owner = module.get_submodule(owner_path) if owner_path else module
    copy = tensor.detach().clone()
    if isinstance(tensor, nn.Parameter):
        owner._parameters[attr] = nn.Parameter(copy, requires_grad=tensor.requires_grad)
    else:
        owner._buffers[attr] = copy


def apply_expert_parallel(model: nn.Module, device_mesh_or_group, replicas=None) -> int:
    """KempnerForge's ``apply_expert_parallel(model, device_mesh)``, also taking a process group: every
    ``hymoe.torch.MoEMLP`` in ``model`` keeps experts [rank * n, (rank + 1) * n), n = num_experts / ep, and its
    forward exchanges tokens with the other ranks. The C++ layer that held every expert is released (its router,
    shared expert and local experts become ordinary tensors), so each rank holds 1/ep of the experts' memory.
    Call it before building the optimizer (the parameters are new tensors). Returns the number of layers.

    ``replicas`` (``hymoe.placement.plan_replicas(counts, ep, slots_per_rank)``, one layer per MoEMLP in
    ``model.modules()`` order) places replicated hot experts instead: each rank keeps the experts of its slots,
    ``local_expert_start`` is -1 and ``num_local_experts`` the slots per rank, and a token's pair with expert e
    goes to replica t % count(e). For inference: the forward refuses to record gradients."""
    got = _ep_group_of(device_mesh_or_group)
    if got is None:
        return 0
    group, rank, size = got
    layers = [m for m in model.modules() if _is_moe_layer(m)]
    if replicas is not None:
        _check_replicas(replicas, layers, size)
    applied = 0
    for index, module in enumerate(layers):
        if module.ep_group is not None:
            raise ValueError("hymoe.expert_parallel: apply_expert_parallel was already applied to this MoEMLP")
        if replicas is None and module.num_experts % size:
            raise ValueError(f"hymoe.expert_parallel: num_experts ({module.num_experts}) must be divisible by the "
                             f"expert-parallel size ({size})")
        per_rank = int(replicas["slots_per_rank"]) if replicas is not None else module.num_experts // size
        start = rank * per_rank
        held = (list(range(start, start + per_rank)) if replicas is None
                else [int(e) for e in replicas["physical_to_logical"][index][start:start + per_rank]])
        if any(e < 0 or e >= module.num_experts for e in held):
            raise ValueError(f"hymoe.expert_parallel: layer {index} of the replica plan gives rank {rank} the slots "
                             f"{held}; every slot must hold an expert of [0, {module.num_experts})")
        module.ep_native_experts = module.packed_experts or _plain_mlps(module.experts)
        if module._layer is not None:  # the module's tensors view the C++ layer: own copies, then free it
            for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
                if not name.startswith(("experts.", "up_w", "down_w", "gate_w")):
                    _own_copy(module, name, tensor)
        if module.packed_experts:
            for name in ("up_w", "down_w") + (("gate_w",) if module._is_swiglu else ()):
                setattr(module, name, nn.Parameter(getattr(module, name).detach()[held].clone()))
        else:
            local = nn.ModuleList([copy.deepcopy(module.experts[e]) for e in held] if replicas is not None
                                  else [module.experts[e] for e in held])
            for i, expert in enumerate(local):
                for name, tensor in list(expert.named_parameters()) + list(expert.named_buffers()):
                    if module._layer is not None:
                        _own_copy(expert, name, tensor)
            module.experts = local
        if module._layer is not None:
            _release_layer(module)
        module.ep_world_size = size
        module.ep_group = group
        module.local_expert_start = start if replicas is None else -1
        module.num_local_experts = per_rank
        module.ep_replicas = None if replicas is None else _layer_replicas(replicas, index, held)
        applied += 1
    return applied


def _is_moe_layer(module) -> bool:
    """A hymoe.torch.MoEMLP (marked by its class, so this module need not import hymoe.torch, which imports it)."""
    return getattr(type(module), "_hymoe_moe_layer", False)


def _check_replicas(replicas, layers, size) -> None:
    p2l = replicas["physical_to_logical"]
    if int(replicas["num_ranks"]) != size:
        raise ValueError(f"hymoe.expert_parallel: the replica plan is for {int(replicas['num_ranks'])} ranks, the "
                         f"expert-parallel group has {size}")
    if len(p2l) != len(layers):
        raise ValueError(f"hymoe.expert_parallel: the replica plan has {len(p2l)} layers, the model has "
                         f"{len(layers)} MoE layers")
    for index, module in enumerate(layers):
        count = replicas["logical_replica_count"][index]
        if len(count) != module.num_experts or min(int(c) for c in count) < 1:
            raise ValueError(f"hymoe.expert_parallel: layer {index} of the replica plan places {len(count)} "
                             f"experts (each at least once); the layer has {module.num_experts}")


def _layer_replicas(replicas, index: int, held: list) -> dict:
    return {
        "logical_to_physical": torch.as_tensor(replicas["logical_to_physical_map"][index], dtype=torch.int64),
        "replica_count": torch.as_tensor(replicas["logical_replica_count"][index], dtype=torch.int64),
        "held": held,
    }


def rebalance_expert_parallel(model: nn.Module, replicas) -> int:
    """Moves a model placed by ``apply_expert_parallel(..., replicas=old)`` to the plan ``replicas`` (from
    ``hymoe.placement.rebalance_replicas(old, counts)``, which keeps every slot it can): a slot whose expert
    changed takes the expert's weights from a slot of its own rank that held it, else from the lowest rank that
    held it (point-to-point, in one order on every rank). Every rank must call it. The outputs keep their bits:
    whichever replica computes a pair computes it the same way. Returns the number of slots this rank received."""
    layers = [m for m in model.modules() if _is_moe_layer(m)]
    if not layers or any(getattr(m, "ep_replicas", None) is None for m in layers):
        raise ValueError("hymoe.expert_parallel: rebalance_expert_parallel needs a model placed with "
                         "apply_expert_parallel(..., replicas=...)")
    group = layers[0].ep_group
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    _check_replicas(replicas, layers, size)
    received = 0
    for index, module in enumerate(layers):
        slots = module.num_local_experts
        if int(replicas["slots_per_rank"]) != slots:
            raise ValueError(f"hymoe.expert_parallel: the new plan has {int(replicas['slots_per_rank'])} slots per "
                             f"rank, the placed model {slots}")
        # Every rank's old holdings (each rank knows only its own).
        mine = torch.tensor(module.ep_replicas["held"], dtype=torch.int64)
        everyone = [torch.empty_like(mine) for _ in range(size)]
        dist.all_gather(everyone, mine, group=group)
        old = [t.tolist() for t in everyone]
        new = [[int(e) for e in replicas["physical_to_logical"][index][r * slots:(r + 1) * slots]]
               for r in range(size)]
        tensors = _slot_tensors(module)
        current = [t.detach() for t in tensors]
        fresh = [[c[old[rank].index(new[rank][s])].clone() for c in current] if new[rank][s] in old[rank] else None
                 for s in range(slots)]
        for r in range(size):  # the transfers, in the same order on every rank
            for s in range(slots):
                e = new[r][s]
                if e in old[r]:
                    continue
                source = min(q for q in range(size) if e in old[q])
                if rank == source:
                    for c in current:
                        dist.send(c[old[rank].index(e)].contiguous(), dst=_global(group, r), group=group)
                elif rank == r:
                    fresh[s] = [torch.empty_like(c[0]) for c in current]
                    for buffer in fresh[s]:
                        dist.recv(buffer, src=_global(group, source), group=group)
                    received += 1
        with torch.no_grad():
            for i, t in enumerate(tensors):
                t.copy_(torch.stack([fresh[s][i] for s in range(slots)]))
        module.ep_replicas = _layer_replicas(replicas, index, new[rank])
    return received


def _global(group, rank: int) -> int:
    """A rank of ``group`` as the global rank dist.send / dist.recv take."""
    if group is None or group is dist.group.WORLD or not hasattr(dist, "get_global_rank"):
        return rank
    return dist.get_global_rank(group, rank)


def _slot_tensors(module) -> list:
    """The module's expert weights as (slots, ...) tensors: the packed parameters, or a stacked view of the local
    experts' Linear weights, written back expert by expert."""
    if module.packed_experts:
        return [module.up_w, module.down_w] + ([module.gate_w] if module._is_swiglu else [])
    names = ("gate_proj", "up_proj", "down_proj") if hasattr(module.experts[0], "gate_proj") else ("up_proj",
                                                                                                  "down_proj")
    return [_StackedWeights(module.experts, name) for name in names]


class _StackedWeights:
    """The ``name`` weights of a ModuleList of experts read as one (slots, out, in) tensor and written back
    expert by expert."""

    def __init__(self, experts, name):
        self.weights = [getattr(e, name).weight for e in experts]

    def detach(self):
        return torch.stack([w.detach() for w in self.weights])

    def copy_(self, stacked):
        for w, value in zip(self.weights, stacked):
            w.copy_(value)



def _plain_mlps(experts) -> bool:
    """Whether hymoe's grouped kernels compute these experts: SwiGLUMLP / StandardMLP modules of one kind."""
    if len(experts) == 0:
        return True
    kinds = [_mlp_kind(e, e.up_proj.weight.shape[1], None) if hasattr(e, "up_proj") else None for e in experts]
    return kinds[0] is not None and all(k == kinds[0] for k in kinds)


def _release_layer(module) -> None:
    """Drops every reference the module keeps to its C++ layer (the numpy views of its memory included), so the
    layer and the experts of the other ranks are freed."""
    router = module._modules["router"].__dict__
    counts = router.get("_expert_counts")
    if callable(counts):  # the layer's counts reader, left to be read after a fast forward
        router["_expert_counts"] = counts()
    for name in ("_layer_handle", "_read_expert_counts", "_slots", "_slot_by_name", "_dicts", "_parameter_dicts",
                 "_parameters_now", "_router_state_slots", "_watched"):
        module.__dict__.pop(name, None)
    module._layer = None
