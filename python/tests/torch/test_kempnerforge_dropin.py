"""hymoe.torch as KempnerForge's ``kempnerforge.model.moe`` for KempnerForge's own code (issue 25), checked
without KempnerForge installed: its MoEMLP constructor, its router and expert modules (modules defined under
KempnerForge's module names here, from what KempnerForge's classes are: names, attributes, set_step), its
registries, differentiable grouped helpers and ``_apply_capacity`` (test_import_guard.py: the quiet import).
scripts/run_kempnerforge_tests.sh runs KempnerForge's real tests against a checkout."""

import math
import sys
import types

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import hymoe.torch as hmoe  # noqa: E402


def close(got, exp, what, dtype_eps=2.0 ** -23, k=64):
    """|got - exp| <= tol * max(1, max|exp|), tol = 8 * K * eps of the dtype: float32 sums of K terms in another
    order (hymoe's kernels against torch's) differ by at most about K * eps relative to the largest term."""
    got, exp = got.detach().double(), exp.detach().double()
    assert got.shape == exp.shape, (what, got.shape, exp.shape)
    scale = max(1.0, exp.abs().max().item()) if exp.numel() else 1.0
    err = (got - exp).abs().max().item() if exp.numel() else 0.0
    assert err <= 8 * k * dtype_eps * scale, f"{what}: max |diff| {err:.3g} (scale {scale:.3g})"


# ---- Modules under KempnerForge's module names (kempnerforge.model.router / .mlp) ----
# Written from the facts of KempnerForge's classes (their names, constructor arguments, attributes and
# results); the routing rule itself is hymoe's torch port (hymoe.torch.SoftmaxTopKRouter.forward), which
# test_moe_layer.py checks against KempnerForge's numbers through the conformance cases.

FAKE_ROUTER_SOURCE = '''
import torch
import torch.nn as nn
import hymoe.torch as _h

class SoftmaxTopKRouter(nn.Module):
    def __init__(self, dim, num_experts, top_k):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts, self.top_k = num_experts, top_k
        self.aux_loss = torch.tensor(0.0)
        self.z_loss = torch.tensor(0.0)
        self.expert_counts = torch.zeros(num_experts)

    def forward(self, x):
        return _h.SoftmaxTopKRouter.forward(self, x)

class SigmoidTopKRouter(nn.Module):
    def __init__(self, dim, num_experts, top_k, bias_update_rate=0.001, ema_decay=0.99,
                 sequence_aux_loss_weight=0.0, bias_schedule="constant"):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts, self.top_k = num_experts, top_k
        self.bias_update_rate, self.ema_decay = bias_update_rate, ema_decay
        self.sequence_aux_loss_weight, self.bias_schedule = sequence_aux_loss_weight, bias_schedule
        self._step, self._max_steps = 0, 1
        self.expert_bias = nn.Parameter(torch.zeros(num_experts))
        self.register_buffer("expert_ema", torch.ones(num_experts) / num_experts)
        self.aux_loss = torch.tensor(0.0)
        self.z_loss = torch.tensor(0.0)
        self.expert_counts = torch.zeros(num_experts)

    def set_step(self, step, max_steps):
        self._step, self._max_steps = step, max(max_steps, 1)

    _bias_rate = _h.SigmoidTopKRouter._bias_rate

    def forward(self, x):
        return _h.SigmoidTopKRouter.forward(self, x)
'''

FAKE_MLP_SOURCE = '''
import torch.nn as nn
import torch.nn.functional as F

class SwiGLUMLP(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.up_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

class StandardMLP(nn.Module):
    def __init__(self, dim, hidden_dim, activation="gelu"):
        super().__init__()
        self.up_proj = nn.Linear(dim, hidden_dim, bias=False)
        self.down_proj = nn.Linear(hidden_dim, dim, bias=False)
        self._activation = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}[activation]

    def forward(self, x):
        return self.down_proj(self._activation(self.up_proj(x)))
'''


def fake_module(name, source):
    mod = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)
    return mod


KF_ROUTER = fake_module("kempnerforge.model.router", FAKE_ROUTER_SOURCE)
KF_MLP = fake_module("kempnerforge.model.mlp", FAKE_MLP_SOURCE)


def kf_experts(n, dim, hidden, activation="silu"):
    make = (lambda: KF_MLP.SwiGLUMLP(dim, hidden)) if activation == "silu" else (
        lambda: KF_MLP.StandardMLP(dim, hidden, activation))
    return nn.ModuleList([make() for _ in range(n)])


class ForeignRouter(nn.Module):
    """A router hymoe does not know (a user's registry entry): same parameters as the softmax router, and a
    forward of its own, so the layer must call it."""

    def __init__(self, dim, num_experts, top_k, rule="softmax"):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts, bias=False)
        self.num_experts, self.top_k, self.rule = num_experts, top_k, rule
        self.aux_loss = self.z_loss = torch.tensor(0.0)

    def forward(self, x):
        if self.rule == "softmax":
            return hmoe.SoftmaxTopKRouter.forward(self, x)
        # "first": every token to experts 0..k-1 with equal weights, still differentiable through the gate
        logits = self.gate(x)
        idx = torch.arange(self.top_k).expand(x.shape[0], -1)
        w = torch.softmax(logits[:, :self.top_k], dim=-1)
        self.aux_loss = logits.sum() * 0.0
        self.z_loss = (torch.logsumexp(logits, dim=-1) ** 2).mean()
        self.expert_counts = F.one_hot(idx, self.num_experts).float().sum((0, 1))
        return w, idx


def grads_of(module, x, g):
    xr = x.clone().requires_grad_(True)
    y = module(xr)
    (y * g).sum().add(0.3 * module.aux_loss + 0.05 * module.z_loss).backward()
    return y.detach(), xr.grad, {n: p.grad for n, p in module.named_parameters()}


# ---- Cause 1: KempnerForge's constructor ----


def test_constructor_takes_kempnerforges_signature():
    torch.manual_seed(0)
    router = hmoe.SoftmaxTopKRouter(16, 4, 2)
    experts = nn.ModuleList([hmoe.SwiGLUMLP(16, 24) for _ in range(4)])
    m = hmoe.MoEMLP(router, experts)
    assert m.native and m.router is router and m.experts is experts and m.shared_expert is None
    assert (m.capacity_factor, m.gradient_scale, m.packed_experts) == (0.0, False, False)
    assert (m.ep_world_size, m.ep_group, m.local_expert_start, m.num_local_experts) == (1, None, 0, 4)
    m2 = hmoe.MoEMLP(hmoe.SoftmaxTopKRouter(16, 4, 2), nn.ModuleList([hmoe.SwiGLUMLP(16, 24) for _ in range(4)]),
                     None, 1.25, True, packed_experts=False)
    assert (m2.capacity_factor, m2.gradient_scale) == (1.25, True)
    built = hmoe.build_moe(16, 24, 4, 2).eval()
    built.load_state_dict(m.state_dict(), strict=True)
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        assert torch.equal(m.eval()(x), built(x))


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_packed_constructor_seeds_the_packed_weights_from_the_experts(activation):
    torch.manual_seed(1)
    experts = nn.ModuleList([hmoe._build_mlp(16, 24, activation) for _ in range(4)])
    up = torch.stack([e.up_proj.weight.t() for e in experts]).detach().clone()
    down = torch.stack([e.down_proj.weight.t() for e in experts]).detach().clone()
    m = hmoe.MoEMLP(hmoe.SoftmaxTopKRouter(16, 4, 2), experts, packed_experts=True)
    assert m.native and not hasattr(m, "experts") and m._is_swiglu == (activation == "silu")
    assert torch.equal(m.up_w.detach(), up) and torch.equal(m.down_w.detach(), down)
    assert hasattr(m, "gate_w") == (activation == "silu")
    x = torch.randn(1, 6, 16)
    ref = hmoe.MoEMLP(hmoe.SoftmaxTopKRouter(16, 4, 2), nn.ModuleList([hmoe._build_mlp(16, 24, activation)
                                                                       for _ in range(4)]), packed_experts=True)
    ref.load_state_dict(m.state_dict())
    with torch.no_grad():
        assert torch.equal(m(x), ref(x))


# ---- Cause 2: KempnerForge's modules, foreign modules, registries ----


@pytest.mark.parametrize("router_type", ["softmax_topk", "sigmoid_topk"])
@pytest.mark.parametrize("packed", [False, True])
def test_kempnerforges_modules_run_in_the_cpp_layer_with_its_numbers(router_type, packed):
    """A layer of KempnerForge-named modules is native and gives the same y, losses, counts, router state and
    gradients as hymoe's own modules with the same weights; the results land on KempnerForge's router as its
    plain tensor attributes."""
    torch.manual_seed(2)
    sig = router_type == "sigmoid_topk"
    kw = dict(sequence_aux_loss_weight=0.05, bias_schedule="linear_warmup") if sig else {}
    router = (KF_ROUTER.SigmoidTopKRouter if sig else KF_ROUTER.SoftmaxTopKRouter)(16, 6, 2, **kw)
    m = hmoe.MoEMLP(router, kf_experts(6, 16, 20), KF_MLP.SwiGLUMLP(16, 20), gradient_scale=True,
                    packed_experts=packed)
    assert m.native, m.native_reason
    ref = hmoe.build_moe(16, 20, 6, 2, router_type=router_type, shared_experts=1, gradient_scale=True,
                         packed_experts=packed, **kw)
    ref.load_state_dict(m.state_dict(), strict=True)
    if sig:  # KempnerForge's Transformer calls set_step on its own sigmoid routers
        router.set_step(3, 10)
        ref.router.set_step(3, 10)
    x, g = torch.randn(2, 7, 16), torch.randn(2, 7, 16)
    y, gx, gp = grads_of(m, x, g)
    y_ref, gx_ref, gp_ref = grads_of(ref, x, g)
    assert torch.equal(y, y_ref) and torch.equal(gx, gx_ref)
    assert set(gp) == set(gp_ref)
    for n in gp:
        assert (gp[n] is None) == (gp_ref[n] is None) and (gp[n] is None or torch.equal(gp[n], gp_ref[n])), n
    for name in ("aux_loss", "z_loss", "expert_counts"):
        assert type(router.__dict__[name]) is torch.Tensor, name  # a plain attribute, as KempnerForge keeps it
        assert torch.equal(getattr(m, name).detach(), getattr(ref, name).detach()), name
    assert torch.equal(m.state_dict()["router.expert_bias" if sig else "router.gate.weight"],
                       ref.state_dict()["router.expert_bias" if sig else "router.gate.weight"])


def test_set_step_on_kempnerforges_router_moves_the_bias_schedule():
    """The step KempnerForge's set_moe_step gives its router is the one the C++ layer's schedule uses: the bias
    after a train forward is the linear_warmup rule at that step (0 at step 0)."""
    torch.manual_seed(3)
    for step, rate in ((0, 0.0), (5, 0.001 * min(1.0, 10 * 5 / 100))):
        router = KF_ROUTER.SigmoidTopKRouter(16, 4, 2, bias_schedule="linear_warmup")
        m = hmoe.MoEMLP(router, kf_experts(4, 16, 20))
        assert m.native
        router.set_step(step, 100)
        with torch.no_grad():
            m.train()(torch.randn(3, 11, 16))
        ema = 0.25 + 0.01 * (m.expert_counts.double() / (33 * 2 + 1e-8) - 0.25)
        assert torch.allclose(router.expert_ema.double(), ema, rtol=1e-6, atol=1e-9)
        assert torch.allclose(router.expert_bias.detach().double(), rate * (0.25 - ema), rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("packed", [False, True])
def test_a_foreign_router_runs_in_torch_and_agrees_with_the_cpp_layer(packed):
    """A router of another class (a user's registry entry) makes the layer call the modules themselves in torch;
    with the softmax rule it gives the C++ layer's y and gradients to float32 rounding, capacity included."""
    torch.manual_seed(4)
    m = hmoe.MoEMLP(ForeignRouter(16, 5, 2), kf_experts(5, 16, 20, "gelu"), capacity_factor=0.8,
                    gradient_scale=True, packed_experts=packed)
    assert not m.native and "ForeignRouter" in m.native_reason and "backend=torch" in repr(m)
    ref = hmoe.build_moe(16, 20, 5, 2, activation="gelu", capacity_factor=0.8, gradient_scale=True,
                         packed_experts=packed)
    ref.load_state_dict(m.state_dict(), strict=True)
    x, g = torch.randn(2, 9, 16), torch.randn(2, 9, 16)
    y, gx, gp = grads_of(m, x, g)
    y_ref, gx_ref, gp_ref = grads_of(ref, x, g)
    close(y, y_ref, "y")
    close(gx, gx_ref, "grad x")
    close(m.aux_loss, ref.aux_loss, "aux_loss")
    assert torch.equal(m.expert_counts, ref.expert_counts)
    for n in gp_ref:
        assert (gp[n] is None) == (gp_ref[n] is None), n
        if gp[n] is not None:
            close(gp[n], gp_ref[n], "grad " + n)


def test_packed_expert_helper_and_expert_parallel_without_a_group():
    torch.manual_seed(9)
    m = hmoe.build_moe(8, 12, 3, 2, packed_experts=True)
    x = torch.randn(4, 8)
    e = hmoe.SwiGLUMLP(8, 12)
    with torch.no_grad():
        for name, w in (("gate_proj", m.gate_w), ("up_proj", m.up_w), ("down_proj", m.down_w)):
            getattr(e, name).weight.copy_(w[1].t())
    close(m._apply_packed_expert(x, 1), e(x), "packed expert 1")
    m.ep_world_size = 2  # without apply_expert_parallel's group (tests/torch/test_expert_parallel.py runs it)
    with pytest.raises(ValueError, match="ep_world_size=2 but ep_group is None"):
        m(torch.randn(1, 2, 8))


def test_a_foreign_routing_rule_is_honoured():
    torch.manual_seed(5)
    router = ForeignRouter(8, 4, 2, rule="first")
    experts = kf_experts(4, 8, 12)
    m = hmoe.MoEMLP(router, experts)
    x = torch.randn(1, 5, 8)
    y = m(x)
    xf = x.reshape(5, 8)
    w = torch.softmax(router.gate(xf)[:, :2], dim=-1)
    exp = w[:, :1] * experts[0](xf) + w[:, 1:] * experts[1](xf)
    close(y.reshape(5, 8), exp, "y")
    assert m.expert_counts.tolist() == [5.0, 5.0, 0.0, 0.0]
    y.sum().backward()
    assert router.gate.weight.grad is not None and experts[2].up_proj.weight.grad is None


def test_a_sigmoid_router_with_other_constants_runs_in_torch():
    """The C++ layer has KempnerForge's default bias_update_rate and ema_decay built in; another value is
    computed by the router module itself rather than silently with the defaults."""
    torch.manual_seed(6)
    router = KF_ROUTER.SigmoidTopKRouter(8, 4, 2, bias_update_rate=0.01)
    m = hmoe.MoEMLP(router, kf_experts(4, 8, 12))
    assert not m.native and "bias_update_rate" in m.native_reason
    with torch.no_grad():
        m.train()(torch.randn(2, 8, 8))
    ema = router.expert_ema.double()
    assert torch.allclose(router.expert_bias.detach().double(), 0.01 * (0.25 - ema), rtol=1e-5, atol=1e-12)


def test_build_moe_composes_from_the_registry(monkeypatch):
    """A router and an MLP a user registered are what build_moe builds (run in torch)."""
    class TanhMLP(nn.Module):
        def __init__(self, dim, hidden_dim):
            super().__init__()
            self.up_proj = nn.Linear(dim, hidden_dim, bias=False)
            self.down_proj = nn.Linear(hidden_dim, dim, bias=False)

        def forward(self, x):
            return self.down_proj(torch.tanh(self.up_proj(x)))

    stores = {c: dict(s) for c, s in hmoe.registry._stores.items()}
    monkeypatch.setattr(hmoe.registry, "_stores", stores)
    hmoe.registry.register("router", "first", lambda d, e, k: ForeignRouter(d, e, k, rule="first"))
    hmoe.registry.register("mlp", "tanh", TanhMLP)
    with pytest.raises(ValueError, match="already registered"):
        hmoe.registry.register("mlp", "tanh", TanhMLP)
    m = hmoe.build_moe(8, 12, 4, 2, activation="tanh", router_type="first", shared_experts=1)
    assert isinstance(m.router, ForeignRouter) and all(isinstance(e, TanhMLP) for e in m.experts)
    assert isinstance(m.shared_expert, TanhMLP) and not m.native
    x = torch.randn(2, 3, 8)
    xf = x.reshape(6, 8)
    w = torch.softmax(m.router.gate(xf)[:, :2], dim=-1)
    exp = w[:, :1] * m.experts[0](xf) + w[:, 1:] * m.experts[1](xf) + m.shared_expert(xf)
    close(m(x).reshape(6, 8), exp, "y")
    with pytest.raises(ValueError, match="registry"):
        hmoe.build_moe(8, 12, 4, 2, router_type="nope")
    assert isinstance(hmoe.build_moe(8, 12, 4, 2).router, hmoe.SoftmaxTopKRouter)


def test_build_moe_uses_kempnerforges_registry_when_importable(monkeypatch):
    """With KempnerForge importable, build_moe takes its registry, so its own classes (and its users' entries)
    come out, computed natively."""
    reg = hmoe.Registry()
    reg.register("router", "softmax_topk", KF_ROUTER.SoftmaxTopKRouter)
    reg.register("router", "sigmoid_topk", KF_ROUTER.SigmoidTopKRouter)
    reg.register("mlp", "swiglu", KF_MLP.SwiGLUMLP)
    reg.register("mlp", "standard_gelu", lambda d, h: KF_MLP.StandardMLP(d, h, "gelu"))
    registry_module = types.ModuleType("kempnerforge.config.registry")
    registry_module.registry = reg
    for name, mod in [("kempnerforge", types.ModuleType("kempnerforge")),
                      ("kempnerforge.config", types.ModuleType("kempnerforge.config")),
                      ("kempnerforge.config.registry", registry_module),
                      ("kempnerforge.model", types.ModuleType("kempnerforge.model")),
                      ("kempnerforge.model.router", KF_ROUTER), ("kempnerforge.model.mlp", KF_MLP)]:
        monkeypatch.setitem(sys.modules, name, mod)
    m = hmoe.build_moe(8, 12, 4, 2, router_type="sigmoid_topk", bias_schedule="cosine_decay", shared_experts=1)
    assert type(m.router) is KF_ROUTER.SigmoidTopKRouter and m.router.bias_schedule == "cosine_decay"
    assert all(type(e) is KF_MLP.SwiGLUMLP for e in m.experts) and type(m.shared_expert) is KF_MLP.SwiGLUMLP
    assert m.native
    g = hmoe.build_moe(8, 12, 4, 2, activation="gelu")
    assert all(type(e) is KF_MLP.StandardMLP for e in g.experts) and g.native


# ---- Cause 3: differentiable grouped helpers ----


def loop_reference(x_sorted, counts, experts):
    out, offset = [], 0
    for e, n in zip(experts, counts):
        if n:
            out.append(e(x_sorted[offset:offset + n]))
        offset += n
    return torch.cat(out) if out else torch.zeros_like(x_sorted)


def packed_loop_reference(x_sorted, counts, up, down, gate, act):
    out, offset = [], 0
    for e, n in enumerate(counts):
        h = x_sorted[offset:offset + n]
        offset += n
        if n:
            mid = F.silu(h @ gate[e]) * (h @ up[e]) if gate is not None else act(h @ up[e])
            out.append(mid @ down[e])
    return torch.cat(out) if out else torch.zeros_like(x_sorted)


@pytest.mark.parametrize("activation", ["silu", "gelu", "relu"])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("counts", [[4, 0, 6, 1], [0, 0, 3, 0], [1, 1, 1, 1]])
def test_grouped_helpers_gradients_match_eager_autograd(activation, packed, counts):
    """x and every weight: the gradients of hymoe's helpers against torch's autograd through a plain loop over
    the experts (an expert with no rows: zero gradients, as KempnerForge's stacked weights give); tolerance from
    float32 and the reduction length (dim 16, hidden 24)."""
    torch.manual_seed(7)
    act = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}[activation]
    experts = nn.ModuleList([hmoe._build_mlp(16, 24, activation) for _ in range(4)])
    x = torch.randn(sum(counts), 16)
    g = torch.randn(sum(counts), 16)
    if packed:
        def stack(name):
            return torch.stack([getattr(e, name).weight.detach().t() for e in experts]).requires_grad_(True)

        up, down = stack("up_proj"), stack("down_proj")
        gate = stack("gate_proj") if activation == "silu" else None
        weights = [w for w in (up, down, gate) if w is not None]

        def ref_fn(xx):
            return packed_loop_reference(xx, counts, up, down, gate, act)

        def fn(xx):
            return hmoe.grouped_expert_forward_packed(xx, counts, up, down, gate, act)
    else:
        weights = list(experts.parameters())

        def ref_fn(xx):
            return loop_reference(xx, counts, experts)

        def fn(xx):
            return hmoe.grouped_expert_forward(xx, counts, experts)
    xr = x.clone().requires_grad_(True)
    y_ref = ref_fn(xr)
    ref = torch.autograd.grad(y_ref, [xr] + weights, g, allow_unused=True)
    xh = x.clone().requires_grad_(True)
    y = fn(xh)
    got = torch.autograd.grad(y, [xh] + weights, g)
    close(y, y_ref, "y")
    for i, (a, b) in enumerate(zip(got, ref)):
        close(a, torch.zeros_like(a) if b is None else b, f"grad {i}")


def test_grouped_helpers_backward_fills_module_grads_and_keeps_dtype():
    torch.manual_seed(8)
    experts = nn.ModuleList([hmoe.SwiGLUMLP(8, 12) for _ in range(3)]).double()
    x = torch.randn(12, 8, dtype=torch.float64, requires_grad=True)
    y = hmoe.grouped_expert_forward(x, [4, 6, 2], experts)
    assert y.dtype == torch.float64
    y.sum().backward()
    assert x.grad.dtype == torch.float64 and x.grad.abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in experts.parameters())
    with pytest.raises(ValueError, match="tokens_per_expert"):
        hmoe.grouped_expert_forward(x, [4, 6, 3], experts)


def test_grouped_helpers_build_no_graph_under_no_grad():
    """Under no_grad the helpers build no graph (no saved tensors)."""
    experts = nn.ModuleList([hmoe.SwiGLUMLP(8, 12) for _ in range(2)])
    with torch.no_grad():
        y = hmoe.grouped_expert_forward(torch.randn(3, 8), [1, 2], experts)
    assert y.grad_fn is None and not y.requires_grad


# ---- Cause 4: _apply_capacity ----


def capacity_loop(weights, indices, num_experts, factor):
    """The rule as KempnerForge states it: capacity = ceil(T * K / E * factor), at least 1; per top-k slot and
    expert, the tokens after the first `capacity` (in token order) get weight 0."""
    T, K = indices.shape
    cap = max(1, math.ceil(T * K / num_experts * factor))
    out = weights.clone()
    for k in range(K):
        for e in range(num_experts):
            rows = [t for t in range(T) if indices[t, k] == e]
            for t in rows[cap:]:
                out[t, k] = 0.0
    return out


@pytest.mark.parametrize("T,K,E,factor", [(100, 2, 4, 1.0), (17, 3, 5, 0.6), (9, 1, 3, 1.25), (5, 2, 8, 0.01)])
def test_apply_capacity_matches_the_rule(T, K, E, factor):
    torch.manual_seed(T)
    indices = torch.stack([torch.randperm(E)[:K] for _ in range(T)]) if K <= E else None
    skewed = indices.clone()
    skewed[: T // 2, 0] = 0  # half the tokens' first choice on expert 0: over capacity
    for idx in (indices, skewed):
        weights = torch.rand(T, K, requires_grad=True)
        before = weights.detach().clone()
        new_w, new_i = hmoe._apply_capacity(weights, idx, E, factor)
        assert torch.equal(new_w.detach(), capacity_loop(before, idx, E, factor))
        assert new_i is idx and torch.equal(weights.detach(), before)  # the router's output is not mutated
        new_w.sum().backward()
        assert torch.equal(weights.grad, (new_w.detach() != 0).float())


def test_apply_capacity_all_tokens_on_one_expert():
    indices = torch.zeros(100, 2, dtype=torch.long)
    w, _ = hmoe._apply_capacity(torch.full((100, 2), 0.5), indices, 4, 1.0)
    assert [(w[:, k] > 0).sum().item() for k in range(2)] == [50, 50]
    assert (w[:50] == 0.5).all() and (w[50:] == 0).all()
