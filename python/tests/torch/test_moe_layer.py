"""hymoe.torch against KempnerForge's MoE layer: every MoE conformance case (forward, and the train cases'
gradients) through the module, a gradient check against torch's own autograd on a pure-PyTorch port of the
reference, a short AdamW training run, state_dict round trips, the expert helpers, and a Hugging Face layer."""

import itertools
import json
import math
import struct
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import hymoe.torch as hmoe  # noqa: E402

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "conformance"
MOE_CASES = sorted(p.name for p in (DATA / "moe").iterdir() if p.is_dir())
CONFIG_KEYS = ("dim", "hidden_dim", "num_experts", "top_k", "activation", "router_type", "shared_experts",
               "capacity_factor", "gradient_scale", "sequence_aux_loss_weight", "bias_schedule", "packed_experts")


def read_safetensors(path):
    """name -> torch tensor (F32, or I64 for the Hugging Face cases' route.indices)."""
    raw = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = {"F32": "<f4", "I64": "<i8"}[info["dtype"]]
        b, e = info["data_offsets"]
        arr = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=dtype).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def assert_matches(got, exp, what, rtol=1e-4):
    """The conformance README's rule: |got - exp| <= atol + rtol |exp|, atol = 2e-5 max(1, max|exp|)."""
    got, exp = got.detach().float(), exp.float()
    assert got.shape == exp.shape, (what, got.shape, exp.shape)
    atol = 2e-5 * max(1.0, exp.abs().max().item() if exp.numel() else 1.0)
    bad = (got - exp).abs() > atol + rtol * exp.abs()
    assert not bad.any(), f"{what}: max |diff| {(got - exp).abs().max().item():.3g} (atol {atol:.3g})"


def load_case(name):
    d = DATA / "moe" / name
    cfg = json.loads((d / "config.json").read_text())
    return (cfg, read_safetensors(d / "weights.safetensors"), read_safetensors(d / "input.safetensors"),
            read_safetensors(d / "expected.safetensors"))


def module_for(cfg, weights):
    m = hmoe.build_moe(**{k: cfg[k] for k in CONFIG_KEYS})
    m.load_state_dict(weights, strict=True)
    m.train(cfg["train"])
    m.router.set_step(cfg["step"], cfg["max_steps"])
    return m


@pytest.mark.parametrize("name", MOE_CASES)
def test_conformance_forward(name):
    cfg, weights, inp, exp = load_case(name)
    m = module_for(cfg, weights)
    with torch.no_grad():
        y = m(inp["x"])
    assert_matches(y, exp["y"], "y")
    assert_matches(m.aux_loss, exp["aux_loss"], "aux_loss")
    assert_matches(m.z_loss, exp["z_loss"], "z_loss")
    assert torch.equal(m.expert_counts, exp["expert_counts"])
    state = {k[len("state."):]: v for k, v in exp.items() if k.startswith("state.")}
    assert (len(state) == 2) == (cfg["router_type"] == "sigmoid_topk")
    sd = m.state_dict()
    for k, v in state.items():  # the router buffers after the forward, within the README's state rule
        assert torch.allclose(sd[k], v, rtol=1e-6, atol=1e-9), k


@pytest.mark.parametrize("step", [0, 5])
def test_max_steps_zero_is_one_step_as_in_kempnerforge(step):
    """SigmoidTopKRouter.set_step keeps max(max_steps, 1): progress step / 1, so linear_warmup's rate is
    0.001 * min(1, 10 * step), 0 at step 0. The router state after a train forward is that formula on the counts."""
    cfg, weights, inp, exp = load_case("sigmoid_warmup_early")
    assert cfg["bias_schedule"] == "linear_warmup"
    m = module_for(cfg, weights)
    m.router.set_step(step, 0)
    with torch.no_grad():
        y = m(inp["x"])
    assert_matches(y, exp["y"], "y")
    assert torch.equal(m.expert_counts, exp["expert_counts"])
    B, L, _ = inp["x"].shape
    E, K = cfg["num_experts"], cfg["top_k"]
    rate = 0.001 * min(1.0, step / max(0, 1) * 10.0)
    ema0, bias0 = weights["router.expert_ema"].double(), weights["router.expert_bias"].double()
    ema = ema0 + (1.0 - 0.99) * (m.expert_counts.double() / (B * L * K + 1e-8) - ema0)
    bias = bias0 + rate * (1.0 / E - ema)
    sd = m.state_dict()
    assert torch.allclose(sd["router.expert_ema"].double(), ema, rtol=1e-6, atol=1e-9)
    assert torch.allclose(sd["router.expert_bias"].double(), bias, rtol=1e-6, atol=1e-9)
    if step == 0:
        assert torch.equal(sd["router.expert_bias"], weights["router.expert_bias"])


TRAIN_CASES = [n for n in MOE_CASES if json.loads((DATA / "moe" / n / "config.json").read_text())["train"]]


@pytest.mark.parametrize("name", TRAIN_CASES)
@pytest.mark.parametrize("objective", ["grad.", "grad_aux.", "grad_z."])
def test_conformance_gradients(name, objective):
    cfg, weights, inp, exp = load_case(name)
    m = module_for(cfg, weights)
    x = inp["x"].clone().requires_grad_(True)
    y = m(x)
    loss = {"grad.": lambda: (y * inp["grad_output"]).sum(), "grad_aux.": lambda: m.aux_loss,
            "grad_z.": lambda: m.z_loss}[objective]()
    if not loss.requires_grad:  # aux_loss of a sigmoid router without sequence aux loss is a constant 0
        loss = loss + 0.0 * y.sum()
    loss.backward()
    got = {"x": x.grad}
    for pname, p in m.named_parameters():
        got[pname] = p.grad if p.grad is not None else torch.zeros_like(p)
    compared = 0
    for key, value in exp.items():
        if key.startswith(objective):
            assert_matches(got[key[len(objective):]], value, key)
            compared += 1
    if objective == "grad.":
        assert compared == len(got)  # every parameter and x, and nothing else
    else:
        assert compared >= 2


# ---- A pure-PyTorch port of KempnerForge's MoEMLP forward, differentiated by torch's autograd ----


def reference_forward(params, cfg, x, train=True, step=0, max_steps=1):
    """y, aux_loss, z_loss of KempnerForge's layer (sequential expert loop), from a hymoe.torch state dict."""
    B, L, D = x.shape
    E, K = cfg["num_experts"], cfg["top_k"]
    xf = x.reshape(B * L, D)
    T = xf.shape[0]
    logits = xf @ params["router.gate.weight"].t()
    if cfg["router_type"] == "softmax_topk":
        probs = F.softmax(logits, dim=-1)
        weights, indices = torch.topk(probs, K, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        counts = F.one_hot(indices, E).float().sum((0, 1))
        aux = E * ((counts / (T * K)) * probs.mean(0)).sum()
    else:
        scores = torch.sigmoid(logits + params["router.expert_bias"])
        weights, indices = torch.topk(scores, K, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)
        counts = F.one_hot(indices, E).float().sum((0, 1))
        w_seq = cfg["sequence_aux_loss_weight"]
        aux = w_seq * E * ((counts / (T * K + 1e-8)) * scores.mean(0)).sum() if w_seq > 0 else torch.tensor(0.0)
    z = (torch.logsumexp(logits, -1) ** 2).mean()
    if cfg["capacity_factor"] > 0:
        cap = max(1, math.ceil(T * K / E * cfg["capacity_factor"]))
        keep = torch.ones_like(weights)
        for k in range(K):
            for e in range(E):
                rows = (indices[:, k] == e).nonzero(as_tuple=True)[0]
                keep[rows[cap:], k] = 0.0
        weights = weights * keep
    act = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}[cfg["activation"]]

    def mlp(prefix, h, e=None):
        if cfg["packed_experts"] and e is not None:
            up = h @ params["up_w"][e]
            mid = F.silu(h @ params["gate_w"][e]) * up if cfg["activation"] == "silu" else act(up)
            return mid @ params["down_w"][e]
        up = h @ params[prefix + "up_proj.weight"].t()
        mid = F.silu(h @ params[prefix + "gate_proj.weight"].t()) * up if cfg["activation"] == "silu" else act(up)
        return mid @ params[prefix + "down_proj.weight"].t()

    out = torch.zeros_like(xf)
    for e in range(E):
        mask = (indices == e).any(-1)
        if not mask.any():
            continue
        h = mlp(f"experts.{e}.", xf[mask], e)
        if cfg["gradient_scale"] and train:
            h = h * ((T * K / E) / (indices == e).sum().float().clamp(min=1.0))
        w = (weights * (indices == e).float()).sum(-1)
        out = out.index_add(0, mask.nonzero(as_tuple=True)[0], w[mask].unsqueeze(-1) * h)
    if cfg["shared_experts"] > 0:
        out = out + mlp("shared_expert.", xf)
    return out.reshape(B, L, D), aux, z


GRADCHECK_CONFIGS = [
    dict(dim=12, hidden_dim=20, num_experts=6, top_k=2, shared_experts=1, gradient_scale=True),
    dict(dim=12, hidden_dim=16, num_experts=5, top_k=3, activation="gelu", capacity_factor=0.8),
    dict(dim=12, hidden_dim=16, num_experts=6, top_k=2, router_type="sigmoid_topk", sequence_aux_loss_weight=0.1,
         packed_experts=True),
    dict(dim=12, hidden_dim=16, num_experts=4, top_k=1, activation="relu", packed_experts=True, shared_experts=1),
]


@pytest.mark.parametrize("kwargs", GRADCHECK_CONFIGS, ids=lambda k: "-".join(f"{a}={b}" for a, b in k.items()))
def test_gradients_match_torch_autograd_on_a_port(kwargs):
    torch.manual_seed(7)
    m = hmoe.build_moe(**kwargs)
    cfg = {k: getattr(m, "_config")[k] for k in CONFIG_KEYS}
    params = {k: v.detach().clone().requires_grad_(k != "router.expert_ema") for k, v in m.state_dict().items()}
    x = torch.randn(2, 9, kwargs["dim"])
    g = torch.randn(2, 9, kwargs["dim"])
    aux_w, z_w = 0.3, 0.05

    xr = x.clone().requires_grad_(True)
    y_ref, aux_ref, z_ref = reference_forward(params, cfg, xr)
    (y_ref * g).sum().add(aux_w * aux_ref + z_w * z_ref).backward()

    xh = x.clone().requires_grad_(True)
    y = m(xh)
    assert_matches(y, y_ref, "y")
    assert_matches(m.aux_loss, aux_ref, "aux_loss")
    assert_matches(m.z_loss, z_ref, "z_loss")
    (y * g).sum().add(aux_w * m.aux_loss + z_w * m.z_loss).backward()
    assert_matches(xh.grad, xr.grad, "grad x")
    for name, p in m.named_parameters():
        ref = params[name].grad
        assert (p.grad is None) == (ref is None), name  # None for an expert that got no token, as torch leaves it
        if ref is not None:
            assert_matches(p.grad, ref, "grad " + name)


def test_adamw_training_loss_falls():
    """A student layer learns a fixed random teacher layer (docs/training.md's imitation set-up, smaller)."""
    torch.manual_seed(0)
    kwargs = dict(dim=16, hidden_dim=32, num_experts=4, top_k=2)
    teacher = hmoe.build_moe(**kwargs).eval()
    student = hmoe.build_moe(**kwargs)
    opt = torch.optim.AdamW(student.parameters(), lr=3e-3)
    mses = []
    for _ in range(300):
        x = torch.randn(4, 16, 16)
        with torch.no_grad():
            target = teacher(x)
        mse = F.mse_loss(student(x), target)
        loss = mse + 0.01 * student.aux_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        mses.append(mse.item())
    first, last = sum(mses[:20]) / 20, sum(mses[-20:]) / 20
    assert last < 0.5 * first, (first, last)  # about 1.0e-2 -> 3.7e-3


def test_state_dict_round_trip_is_strict_and_exact():
    torch.manual_seed(1)
    a = hmoe.build_moe(8, 12, 4, 2, router_type="sigmoid_topk", shared_experts=1)
    assert list(a.state_dict()) == (  # torch's order, as KempnerForge's: a module's own tensors, then its children's
        ["router.expert_bias", "router.expert_ema", "router.gate.weight"]
        + [f"shared_expert.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj")]
        + [f"experts.{e}.{p}.weight" for e in range(4) for p in ("gate_proj", "up_proj", "down_proj")])
    b = hmoe.build_moe(8, 12, 4, 2, router_type="sigmoid_topk", shared_experts=1).eval()
    a.eval()
    x = torch.randn(1, 5, 8)
    with torch.no_grad():
        assert not torch.equal(a(x), b(x))
        b.load_state_dict(a.state_dict(), strict=True)
        assert torch.equal(a(x), b(x))
    with pytest.raises(RuntimeError, match="Missing key"):
        b.load_state_dict({k: v for k, v in a.state_dict().items() if k != "router.gate.weight"}, strict=True)
    packed = hmoe.build_moe(8, 12, 4, 2, packed_experts=True)
    assert {k: tuple(v.shape) for k, v in packed.state_dict().items()} == {
        "router.gate.weight": (4, 8), "up_w": (4, 8, 12), "down_w": (4, 12, 8), "gate_w": (4, 8, 12)}


def test_in_place_and_replaced_weights_reach_the_layer():
    torch.manual_seed(2)
    m = hmoe.build_moe(8, 12, 4, 2).eval()
    x = torch.randn(1, 6, 8)
    with torch.no_grad():
        y0 = m(x)
        m.experts[0].up_proj.weight.mul_(2.0)  # in place: aliases the C++ tensor
        m.experts[1].up_proj.weight.mul_(2.0)
        m.experts[2].up_proj.weight.mul_(2.0)
        m.experts[3].up_proj.weight.mul_(2.0)
        y1 = m(x)
        assert not torch.allclose(y0, y1)
        for e in range(4):  # replaced: a new tensor, copied in on the next forward
            m.experts[e].up_proj.weight = torch.nn.Parameter(m.experts[e].up_proj.weight / 2.0)
        assert_matches(m(x), y0, "y after restoring")
        for e in range(4):  # through .data, which bypasses the version counter: weights_changed() says so
            m.experts[e].up_proj.weight.data.mul_(2.0)
        m.weights_changed()
        assert_matches(m(x), y1, "y after .data writes")


@pytest.mark.parametrize("packed", [False, True])
def test_every_kind_of_weight_change_is_seen_by_the_next_forward(packed):
    """The per-forward check reads one flag and one version counter shared by the parameters, not each tensor:
    each way a weight can change (one tensor in place, an optimizer step, a replaced parameter, an in-place change
    to that replacement) must still reach the layer, which a module built afresh from the state_dict shows."""
    torch.manual_seed(8)
    kwargs = dict(dim=8, hidden_dim=12, num_experts=4, top_k=2, router_type="sigmoid_topk", shared_experts=1,
                  packed_experts=packed)
    m = hmoe.build_moe(**kwargs).eval()
    x = torch.randn(2, 32, 8)

    def assert_layer_sees_the_weights(what):
        fresh = hmoe.build_moe(**kwargs).eval()
        fresh.load_state_dict(m.state_dict(), strict=True)
        with torch.no_grad():
            assert torch.equal(m(x), fresh(x)), what

    with torch.no_grad():
        y0 = m(x)
        m.router.gate.weight[1, 2] += 0.5  # one element of one tensor, in place
    assert not torch.equal(m(x).detach(), y0)
    assert_layer_sees_the_weights("in place")
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m(x).pow(2).sum().backward()
    opt.step()
    m.eval()
    assert_layer_sees_the_weights("optimizer step")
    if packed:
        m.down_w = torch.nn.Parameter(m.down_w.detach() * 1.5)
        replaced = m.down_w
    else:
        m.shared_expert.down_proj.weight = torch.nn.Parameter(m.shared_expert.down_proj.weight.detach() * 1.5)
        replaced = m.shared_expert.down_proj.weight
    assert_layer_sees_the_weights("replaced")
    with torch.no_grad():
        replaced.mul_(-1.0)  # the replacement has its own version counter
    assert_layer_sees_the_weights("replacement changed in place")
    m.router.expert_bias = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 4))
    assert_layer_sees_the_weights("router bias replaced")


def test_bfloat16_input_and_parameters():
    torch.manual_seed(3)
    m = hmoe.build_moe(16, 24, 4, 2).eval()
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        y32 = m(x)
        y16 = m(x.bfloat16())
        assert y16.dtype == torch.bfloat16
        assert torch.allclose(y16.float(), y32, rtol=2e-2, atol=2e-2)
    m.train().bfloat16()
    xb = x.bfloat16().requires_grad_(True)
    y = m(xb)
    y.float().sum().backward()
    assert xb.grad.dtype == torch.bfloat16
    assert all(p.grad is not None and p.grad.dtype == torch.bfloat16 for p in m.parameters())


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="activation"):
        hmoe.build_moe(8, 8, 4, 2, activation="tanh")
    with pytest.raises(ValueError, match="top_k"):
        hmoe.build_moe(8, 8, 4, 5)
    with pytest.raises(Exception, match="bias_schedule"):
        hmoe.build_moe(8, 8, 4, 2, router_type="sigmoid_topk", bias_schedule="exponential")
    m = hmoe.build_moe(8, 8, 4, 2)
    with pytest.raises(ValueError, match="batch, seq_len, dim"):
        m(torch.randn(3, 8))
    with pytest.raises(TypeError, match="floating"):
        m(torch.ones(1, 2, 8, dtype=torch.int32))
    with pytest.raises(Exception, match="dim=8"):
        m(torch.randn(1, 2, 7))
    m.train()
    y1 = m(torch.randn(1, 2, 8, requires_grad=True))
    m(torch.randn(1, 2, 8))  # a second train forward replaces the layer's saved state
    with pytest.raises(Exception, match="saved state"):
        y1.sum().backward()


def test_expert_helpers_match_a_torch_loop():
    torch.manual_seed(4)
    m = hmoe.build_moe(8, 12, 3, 2)
    counts = [2, 0, 3]
    xs = torch.randn(5, 8)
    ref = torch.cat([m.experts[0](xs[:2]), m.experts[2](xs[2:])])
    with torch.no_grad():
        assert_matches(hmoe.grouped_expert_forward(xs, counts, m.experts), ref, "grouped")
        up = torch.stack([e.up_proj.weight.t() for e in m.experts])
        down = torch.stack([e.down_proj.weight.t() for e in m.experts])
        gate = torch.stack([e.gate_proj.weight.t() for e in m.experts])
        assert_matches(hmoe.grouped_expert_forward_packed(xs, counts, up, down, gate, F.silu), ref, "packed")
        scaled = hmoe.scale_by_expert_load(ref, counts, 3)
        avg = 5 / 3
        assert_matches(scaled, torch.cat([ref[:2] * (avg / 2), ref[2:] * (avg / 3)]), "scaled")


def test_gil_is_released_during_forward():
    """With a switch interval far beyond the test, another thread gets the GIL only when the main thread releases
    it: a thread that ticks (and sleeps, releasing the GIL itself) ticks during the forwards only if they do."""
    torch.manual_seed(5)
    m = hmoe.build_moe(256, 512, 8, 2).eval()
    x = torch.randn(8, 64, 256)
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.0001)

    interval = sys.getswitchinterval()
    t = threading.Thread(target=tick)
    with torch.no_grad():
        m(x)  # warm: packs the weights
        sys.setswitchinterval(100.0)
        try:
            t.start()
            before = len(ticks)
            # Forwards for at least 100 ms (5 at the least), so the count does not depend on how fast they run.
            start = time.perf_counter()
            for n in itertools.count():
                m(x)
                if n >= 4 and time.perf_counter() - start >= 0.1:
                    break
            during = len(ticks) - before
        finally:
            stop.set()
            sys.setswitchinterval(interval)
            t.join()
    assert during >= 50, during  # a few hundred when the forwards release it; none when they do not


def test_load_moe_layer_runs_a_hugging_face_layer():
    d = DATA / "hf" / "mixtral_e8_k2"
    meta = json.loads((d / "meta.json").read_text())
    layer = hmoe.load_moe_layer(d, meta["layer"])
    assert (layer.family, layer.num_experts, layer.top_k) == ("mixtral", 8, 2)
    inp, exp = read_safetensors(d / "input.safetensors"), read_safetensors(d / "expected.safetensors")
    with torch.no_grad():
        y = layer(inp["x"])
    assert_matches(y, exp["y"], "y")
    with pytest.raises(Exception):
        hmoe.load_moe_layer(d, 99)


def test_the_documented_swap_runs_as_written():
    """docs/python.md's KempnerForge swap snippet (the README's Python section quotes it)."""
    text = (DATA.parents[2] / "docs" / "python.md").read_text()
    section = text[text.index("## The MoE layer"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[:code.index("```")]
    scope = {}
    exec(compile(code, "docs/python.md", "exec"), scope)
    moe = scope["moe"]
    assert all(p.grad is not None for p in moe.parameters())
    assert scope["y"].shape == (4, 128, 512)


def test_an_idle_expert_gets_no_gradient_as_under_torch():
    torch.manual_seed(6)
    m = hmoe.build_moe(8, 12, 8, 1)
    y = m(torch.randn(1, 2, 8))
    y.sum().backward()
    used = set(torch.nonzero(m.expert_counts).flatten().tolist())
    assert 1 <= len(used) <= 2
    for e in range(8):
        grads = [p.grad for p in m.experts[e].parameters()]
        if e in used:
            assert all(g is not None and g.abs().sum() > 0 for g in grads), e
        else:
            assert all(g is None for g in grads), e
    assert m.router.gate.weight.grad is not None


def test_bench_runs_and_reports_every_measurement(tmp_path, capsys):
    from hymoe import bench

    out = tmp_path / "bench.jsonl"
    assert bench.main(["--shape", "tiny", "--tokens", "1,3", "--repeats", "2", "--backward", "--json", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["tokens"], r["mode"], r["who"]) for r in rows} == {
        (t, mode, who) for t in (1, 3) for mode in ("forward", "forward+backward") for who in ("cpp", "module", "eager")}
    assert all(r["ms"] > 0 for r in rows)
    assert all(r["overhead_ms"] < r["ms"] for r in rows if r["who"] == "module")
    assert "overhead" in capsys.readouterr().out


def torch_core_built():
    """Whether the build made hymoe._torch_core (it does where PyTorch's C++ headers are installed)."""
    import hymoe

    return any(Path(d).glob("_torch_core*.so") for d in hymoe.__path__)


def test_fast_forward_is_on_when_torch_core_was_built():
    assert hmoe.FAST_FORWARD == torch_core_built()
    if not torch_core_built():
        pytest.skip("hymoe._torch_core was not built (no PyTorch C++ headers): the numpy-based path is the only one")


@pytest.mark.parametrize("router_type", ["softmax_topk", "sigmoid_topk"])
def test_torch_core_forward_gives_the_numpy_paths_bits(monkeypatch, router_type):
    """Every float32 forward goes through hymoe._torch_core when it is built: the same y, losses, counts, router
    state and gradients as the numpy-based path."""
    if not hmoe.FAST_FORWARD:
        pytest.skip("hymoe._torch_core was not built")

    def run(fast, train, x):
        if not fast:
            monkeypatch.setattr(hmoe, "_torch_core", None)
        try:
            torch.manual_seed(11)
            m = hmoe.build_moe(24, 20, 6, 2, router_type=router_type, shared_experts=1,
                               sequence_aux_loss_weight=0.01 if router_type == "sigmoid_topk" else 0.0)
            m.train(train)
            xr = x.clone().requires_grad_(train)
            out = []
            for step in range(2):  # the second forward sees the router state the first one moved
                y = m(xr)
                out += [y.detach().clone(), m.aux_loss.detach().clone(), m.z_loss.detach().clone(),
                        m.expert_counts.clone()]
                if train:
                    (y.square().sum() + m.aux_loss + m.z_loss).backward()
            if train:
                out += [xr.grad] + [p.grad for p in m.parameters()]
            out += [b.clone() for b in m.buffers()]
            return out
        finally:
            monkeypatch.undo()

    for shape in [(1, 1, 24), (2, 7, 24), (3, 1, 24)]:
        x = torch.randn(*shape)
        for train in (False, True):
            fast, slow = run(True, train, x), run(False, train, x)
            assert len(fast) == len(slow)
            for i, (a, b) in enumerate(zip(fast, slow)):
                assert (a is None) == (b is None), (shape, train, i)
                if a is not None:
                    assert torch.equal(a, b), (shape, train, i)


def test_torch_core_forward_leaves_other_inputs_to_the_general_path():
    """What the layer cannot read in place (another dtype, a strided view, another rank) gets the general path's
    conversion or its error; a bad dim from C++ comes back as ValueError; y owns its memory."""
    if not hmoe.FAST_FORWARD:
        pytest.skip("hymoe._torch_core was not built")
    torch.manual_seed(12)
    m = hmoe.build_moe(8, 8, 4, 2).eval()
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        y = m(x)
        handle = m._layer_handle
        assert hmoe._torch_core.forward(handle, x.double(), False, 0, 1) is None
        assert hmoe._torch_core.forward(handle, x.transpose(0, 1), False, 0, 1) is None
        assert hmoe._torch_core.forward(handle, x[0], False, 0, 1) is None
        assert torch.equal(m(x.double()), y.double())
        assert torch.equal(m(x.transpose(0, 1).contiguous().transpose(0, 1)), y)
        with pytest.raises(ValueError, match="batch, seq_len, dim"):
            m(x[0])
        with pytest.raises(ValueError, match="dim=8"):
            m(torch.randn(1, 2, 7))
        with pytest.raises(ValueError, match="no tokens"):
            m(torch.randn(1, 0, 8))
        with pytest.raises(TypeError, match="_handle"):
            hmoe._torch_core.forward(m._layer, x, False, 0, 1)
        y2 = m(x)
    assert y2.data_ptr() != y.data_ptr() and torch.equal(y2, y)
    del m, handle
    y2.add_(1.0)  # the layer is gone; y's buffer is its own
    assert torch.equal(y2, y + 1.0)
