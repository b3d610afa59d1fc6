"""mugraph.from_torch (python/mugraph/torch_frontend.py)."""

import numpy as np
import pytest

import mugraph
from conftest import assert_close_f16, needs_cuda, needs_torch

pytestmark = needs_torch


def make_rmsnorm_linear(k=256, n=64):
    import torch

    class RMSNormLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.RMSNorm(k, eps=1e-6)
            self.proj = torch.nn.Linear(k, n, bias=False)

        def forward(self, x):
            return self.proj(self.norm(x))

    torch.manual_seed(0)
    m = RMSNormLinear().half()
    with torch.no_grad():
        m.norm.weight.uniform_(0.5, 1.5)
    return m


@needs_cuda
def test_a_cuda_module_is_captured_from_cpu_examples():
    import torch

    m = make_rmsnorm_linear().cuda()
    p = mugraph.from_torch(m, (torch.randn(16, 256, dtype=torch.float16),))  # moved to the module's device
    assert p.outputs() == [("out", [16, 64], "f16")]
    x = torch.randn(16, 256, dtype=torch.float16)
    want = m(x.cuda()).float().detach().cpu().numpy()
    assert_close_f16(p(x).float().numpy(), want)  # the interpreter, on the weights brought over


def gated_mlp_fn(x, w1, w2):
    import torch
    import torch.nn.functional as F

    return F.silu(torch.matmul(x, w1)) * (x @ w2)


def test_rmsnorm_linear_module_becomes_a_program_with_bound_weights():
    import torch

    m = make_rmsnorm_linear()
    x = torch.randn(16, 256, dtype=torch.float16)
    p = mugraph.from_torch(m, (x,))
    names = [n for n, _, _ in p.inputs()]
    assert names == ["x", "norm_weight", "proj_weight_t"]
    assert p.inputs()[2][1] == [256, 64]  # the Linear's weight, transposed for matmul
    assert set(p.bindings) == {"norm_weight", "proj_weight_t"}
    assert p.outputs() == [("out", [16, 64], "f16")]
    want = m.float()(x.float()).detach().numpy()
    m.half()
    # The program itself, then its superoptimized μGraph, called with the module's argument only.
    assert_close_f16(p(x).float().numpy(), want)
    best = mugraph.superoptimize(p, time_limit=30, threads=2, top=2)
    assert best.graph.graph_defined_kernels() >= 1
    out = best(x)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16
    assert_close_f16(out.float().numpy(), want)
    assert best.verify().verdict == "equivalent"
    # Bound weights are re-read when the module changes.
    with torch.no_grad():
        m.proj.weight.mul_(2)
    assert_close_f16(best(x).float().numpy(), 2 * want)


def test_hugging_face_rmsnorm_with_its_float32_upcast_is_superoptimized():
    # LlamaRMSNorm's forward casts to float32 and back: the casts map to nothing (kernels compute
    # in f32 registers), and the norm with its projection fuses as the plain form does.
    import torch

    class LlamaRMSNorm(torch.nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)

    class NormProj(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = LlamaRMSNorm(256)
            self.proj = torch.nn.Linear(256, 64, bias=False)

        def forward(self, x):
            return self.proj(self.norm(x))

    torch.manual_seed(4)
    m = NormProj().half()
    x = torch.randn(16, 256, dtype=torch.float16)
    p = mugraph.from_torch(m, (x,))
    assert p.outputs() == [("out", [16, 64], "f16")]
    best = mugraph.superoptimize(p, time_limit=30, threads=2, top=2)
    assert best.report["top"][0]["kernels"] == 1
    want = m.float()(x.float()).detach().numpy()
    assert_close_f16(best(x).float().numpy(), want)

    # A cast that would change an output's dtype cannot be honoured: refused with the reason.
    with pytest.raises(mugraph.MugraphError, match="output 0 is torch.float32 in PyTorch but f16"):
        mugraph.from_torch(lambda y: (y * 2).float(), (x,))


def test_a_transformer_mlp_block_always_gets_a_ugraph():
    # Hugging Face's LlamaRMSNorm, LlamaMLP and the residual add. The whole search finds two
    # kernels (the norm with the gated MLP, then the down projection with the add) in about 3 s
    # on 2 cores. Had it found nothing in half the time, it would cut the program before the down
    # projection (docs/search.md, "Programs too large to search whole"), and each part is one
    # kernel too. Either way the result is a verified callable of at most two kernels.
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(256))
            self.gate_proj = torch.nn.Linear(256, 512, bias=False)
            self.up_proj = torch.nn.Linear(256, 512, bias=False)
            self.down_proj = torch.nn.Linear(512, 256, bias=False)

        def forward(self, x):
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            h = self.weight * h.to(x.dtype)
            return x + self.down_proj(torch.nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))

    torch.manual_seed(5)
    m = Block().half()
    x = torch.randn(8, 256, dtype=torch.float16)
    p = mugraph.from_torch(m, (x,))
    assert p.text.count("matmul(") == 3
    best = mugraph.superoptimize(p, time_limit=20, threads=2, top=2)
    if "cut_at" in best.report:
        assert len(best.report["parts"]) == 2
    assert best.report["top"][0]["kernels"] <= 2
    want = m.float()(x.float()).detach().numpy()
    assert_close_f16(best(x).float().numpy(), want)
    assert best.verify().verdict == "equivalent"


def test_gated_mlp_function():
    import torch

    torch.manual_seed(1)
    x = torch.randn(8, 256, dtype=torch.float16)
    w1 = (torch.randn(256, 128) * 0.05).half()
    w2 = (torch.randn(256, 128) * 0.05).half()
    p = mugraph.from_torch(gated_mlp_fn, (x, w1, w2))
    text = p.text
    assert "silu(" in text and text.count("matmul(") == 2 and "mul(" in text
    best = mugraph.superoptimize(p, time_limit=30, threads=2, top=2)
    want = gated_mlp_fn(x.float(), w1.float(), w2.float()).numpy()
    assert_close_f16(best(x, w1, w2).float().numpy(), want)


def test_a_module_with_reshapes_is_superoptimized_in_parts():
    # Multi-head RMS norm after a projection, as PyTorch code writes it: the views are kept as
    # pre-defined kernels and the projection and the norm are searched around them.
    import torch

    def heads_norm(x, w):
        y = (x @ w).view(4, 4, 16)
        return y / torch.sqrt((y * y).sum(-1, keepdim=True) / 16)

    torch.manual_seed(2)
    x = torch.randn(4, 64, dtype=torch.float16)
    w = (torch.randn(64, 64) * 0.1).half()
    p = mugraph.from_torch(heads_norm, (x, w))
    assert "reshape(" in p.text
    best = mugraph.superoptimize(p, time_limit=30, threads=2, top=2)
    assert best.report["kept_ops"][0].startswith("reshape")
    assert len(best.report["parts"]) == 2
    assert all(part["searched"] for part in best.report["parts"])
    want = heads_norm(x.float(), w.float()).numpy()
    assert_close_f16(best(x, w).float().numpy(), want)
    assert best.verify().verdict == "equivalent"


@pytest.mark.parametrize("form", ["expand", "repeat_interleave"])
def test_group_query_attention_with_repeated_keys_is_one_kernel(form):
    # Hugging Face's repeat_kv (x[:, :, None].expand(...).reshape(...)) and repeat_interleave:
    # the search reads the key/value heads through a broadcast and never writes the copies.
    import torch

    def repeat_kv(x, n_rep):
        b, h, s, d = x.shape
        if form == "expand":
            return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)
        return torch.repeat_interleave(x, n_rep, dim=1)

    def attention(q, k_t, v):  # K stored transposed: the program format has no transpose op
        s = torch.exp((q @ repeat_kv(k_t, 4)) * 0.125)
        return (s @ repeat_kv(v, 4)) / s.sum(-1, keepdim=True)

    torch.manual_seed(3)
    q = torch.randn(1, 8, 16, 32, dtype=torch.float16)
    k_t = torch.randn(1, 2, 32, 64, dtype=torch.float16)
    v = torch.randn(1, 2, 64, 32, dtype=torch.float16)
    p = mugraph.from_torch(attention, (q, k_t, v))
    assert "repeat(" in p.text
    best = mugraph.superoptimize(p, time_limit=30, threads=2, top=2)
    assert len(best.report["lifted_repeats"]) == 2
    assert best.report["top"][0]["kernels"] == 1
    want = attention(q.float(), k_t.float(), v.float()).numpy()
    assert_close_f16(best(q, k_t, v).float().numpy(), want)
    assert best.verify().verdict == "equivalent"


def test_views_expand_and_repeat_interleave_map():
    import torch

    def f(x):
        a = x[:, None].expand(4, 3, 8).flatten(0, 1)  # each row 3 times in a row
        b = torch.repeat_interleave(x, 3, dim=0)
        c = x.unsqueeze(0).expand(3, 4, 8).reshape(12, 8)  # x tiled 3 times
        return (a + b.unsqueeze(1).squeeze(1)) * c, x.repeat_interleave(2)

    x = torch.randn(4, 8)
    p = mugraph.from_torch(f, (x,))
    for got, want in zip(p(x), f(x)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)

    with pytest.raises(mugraph.MugraphError, match="indexing a tensor is not supported"):
        mugraph.from_torch(lambda y: y[0] * 2, (x,))


def test_more_ops_map():
    import torch

    def f(x, y):
        a = torch.exp(x) - x.mean(dim=-1, keepdim=True)
        b = torch.sqrt(torch.relu(x) + 1.0) / 2 + x ** 2
        c = torch.cat([a, b], dim=1).view(4, -1)
        d = y.repeat(1, 2) * torch.rsqrt(y.sum(1, keepdim=True) + 3)
        return c.reshape(8, 16) + torch.nn.functional.gelu(d), x.sum(0)

    x = torch.randn(8, 8)
    y = torch.rand(8, 8) + 0.5
    p = mugraph.from_torch(f, (x, y))
    got = p(x, y)
    want = f(x, y)
    assert [o[0] for o in p.outputs()] == ["out0", "out1"]
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-4, atol=1e-4)


def test_unsupported_ops_name_the_op_and_the_source_line():
    import torch

    def f(x):
        y = x * 2
        return torch.sin(y)  # the line the error names

    with pytest.raises(mugraph.MugraphError) as info:
        mugraph.from_torch(f, (torch.randn(4, 4),))
    message = str(info.value)
    assert "sin is not supported" in message
    assert "test_torch_frontend.py:" in message and "torch.sin(y)" in message

    with pytest.raises(mugraph.MugraphError, match="torch.int64"):
        mugraph.from_torch(lambda x: x + 1, (torch.ones(4, dtype=torch.int64),))

    class Conv(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 4, 1)

        def forward(self, x):
            return self.conv(x)

    with pytest.raises(mugraph.MugraphError, match="Conv1d"):
        mugraph.from_torch(Conv(), (torch.randn(1, 4, 8),))


def test_argument_and_parameter_names_the_program_cannot_take_are_renamed():
    import torch

    # nn.Linear's forward argument is `input`, a keyword of the program format.
    torch.manual_seed(2)
    lin = torch.nn.Linear(64, 32, bias=False).half()
    x = torch.randn(8, 64, dtype=torch.float16)
    p = mugraph.from_torch(lin, (x,))
    assert [n for n, _, _ in p.inputs()] == ["input_1", "weight_t"]
    assert_close_f16(p(x).float().numpy(), lin.float()(x.float()).detach().numpy())
    lin.half()

    # Parameters at a.c and a_c share a safe name; each keeps its own input and value. A
    # parameter called t1 does not meet the temporaries' names either.
    class Clash(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Module()
            self.a.c = torch.nn.Parameter(torch.full((8,), 2.0))
            self.a_c = torch.nn.Parameter(torch.full((8,), 3.0))
            self.t1 = torch.nn.Parameter(torch.full((8,), 5.0))

        def forward(self, sum):  # an op's name as the argument
            return (sum * self.a.c + self.a_c) * self.t1

    m = Clash()
    s = torch.ones(4, 8)
    p = mugraph.from_torch(m, (s,))
    assert len({n for n, _, _ in p.inputs()}) == 4
    np.testing.assert_allclose(p(s).numpy(), m(s).detach().numpy())  # (2 + 3) · 5 = 25


def test_a_module_program_runs_on_numpy_arrays_too():
    import torch

    m = make_rmsnorm_linear()
    x = torch.randn(16, 256, dtype=torch.float16)
    p = mugraph.from_torch(m, (x,))
    want = p(x).float().numpy()
    got = p(x.numpy())  # the bound weights follow the caller's kind
    assert isinstance(got, np.ndarray) and got.dtype == np.float16
    np.testing.assert_array_equal(got.astype(np.float32), want)


def test_shape_arithmetic_and_negation():
    import torch

    def scaled(q, k):
        return torch.exp(-(q @ k) / q.shape[-1] ** 0.5)

    q, k = torch.randn(8, 16) * 0.5, torch.randn(16, 8) * 0.5
    p = mugraph.from_torch(scaled, (q, k))
    doubled = mugraph.from_torch(lambda x: x * torch.tensor(2.0), (q,))  # a 0-d constant: a number
    np.testing.assert_allclose(doubled(q).numpy(), (q * 2).numpy())
    np.testing.assert_allclose(p(q, k).numpy(), scaled(q, k).numpy(), rtol=1e-5, atol=1e-6)
    x = p.inputs()[0]
    assert x[0] == "q"


def test_arguments_read_transposed_are_bound_to_their_transposes():
    # Attention as PyTorch writes it, q @ k.transpose(-2, -1): the program takes k's transpose as
    # an input of its own, made from the k the callable is given, on every call. k stays an
    # input (unread), so the callable takes the function's own arguments.
    import torch

    def attention(q, k, v):
        e = torch.exp(q @ k.transpose(-2, -1) * 0.125)
        both = q @ k.mT + q @ torch.transpose(k, 1, 2)  # the same transpose: one input
        return (e / e.sum(-1, keepdim=True)) @ v + both.sum(-1, keepdim=True) * 0.01, q.transpose(0, 1) * 2

    torch.manual_seed(5)
    q, k, v = torch.randn(2, 16, 32), torch.randn(2, 24, 32), torch.randn(2, 24, 32)
    p = mugraph.from_torch(attention, (q, k, v))
    assert [(n, s) for n, s, _ in p.inputs()] == [("q", [2, 16, 32]), ("k", [2, 24, 32]), ("v", [2, 24, 32]),
                                                  ("k_t", [2, 32, 24]), ("q_t01", [16, 2, 32])]
    assert sorted(p.bindings) == ["k_t", "q_t01"]
    want = attention(q, k, v)
    for got, ref in zip(p(q, k, v), want):  # CPU tensors
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)
    for got, ref in zip(p(q.numpy(), k.numpy(), v.numpy()), want):  # NumPy arrays, transposed as arrays
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4, atol=1e-4)
    # Each call transposes what it is given: another k gives another result.
    k2 = torch.randn(2, 24, 32)
    np.testing.assert_allclose(p(q, k2, v)[0].numpy(), attention(q, k2, v)[0].numpy(), rtol=1e-4, atol=1e-4)
    # A transposed input given by name is taken as given.
    np.testing.assert_allclose(p(q=q, k=k, v=v)[0].numpy(), want[0].numpy(), rtol=1e-4, atol=1e-4)
    # Transposes of an argument's repeats and reshapes move onto the argument; a repeat along
    # a swapped dim follows it to the other.
    for f in (lambda x: x.expand(2, 4, 8).transpose(-1, -2) * 2, lambda x: x.repeat(1, 3, 2).mT + 1,
              lambda x: x[None].expand(3, 2, 1, 8).reshape(6, 1, 8).transpose(1, 2) * 1):
        x = torch.randn(2, 1, 8)
        p = mugraph.from_torch(f, (x,))
        assert [(n, s) for n, s, _ in p.inputs()] == [("x", [2, 1, 8]), ("x_t", [2, 8, 1])]
        np.testing.assert_allclose(p(x).numpy(), f(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("form", ["expand", "repeat_interleave"])
def test_hugging_face_eager_attention_maps_as_written(form):
    # Hugging Face's eager_attention_forward (no mask, no dropout): repeat_kv, then the keys
    # transposed, softmax in f32 and a cast back. The transpose moves onto k itself (an input
    # bound to k's transpose), and the repeats follow it, so the search still reads them as
    # broadcasts: one kernel, no copies.
    import torch
    import torch.nn.functional as F

    def repeat_kv(x, n_rep):
        b, h, s, d = x.shape
        if form == "expand":
            return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)
        return torch.repeat_interleave(x, n_rep, dim=1)

    def attention(q, k, v):
        key_states, value_states = repeat_kv(k, 4), repeat_kv(v, 4)
        attn_weights = torch.matmul(q, key_states.transpose(2, 3)) * 0.125
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(attn_weights, value_states)

    torch.manual_seed(11)
    q = torch.randn(1, 8, 16, 32, dtype=torch.float16) * 0.5
    k = torch.randn(1, 2, 64, 32, dtype=torch.float16) * 0.5
    v = torch.randn(1, 2, 64, 32, dtype=torch.float16)
    p = mugraph.from_torch(attention, (q, k, v), bounded_softmax=True)
    assert [(n, s) for n, s, _ in p.inputs()][-1] == ("k_t", [1, 2, 32, 64])
    want = attention(q.float(), k.float(), v.float()).numpy()
    assert_close_f16(p(q, k, v).float().numpy(), want)
    best = mugraph.superoptimize(p, time_limit=30, threads=2, top=1, cost_bound="both")
    assert best.report["stop_reason"] == "exhausted"
    assert len(best.report["lifted_repeats"]) == 2 and best.report["top"][0]["kernels"] == 1
    assert_close_f16(best(q, k, v).float().numpy(), want)
    assert best.verify().verdict == "equivalent"


def test_transposes_and_missing_inputs_say_what_is_wrong():
    import torch

    with pytest.raises(mugraph.MugraphError, match=r"the transpose x\.T of a computed tensor is not supported"):
        mugraph.from_torch(lambda x: (x * 2).T @ x, (torch.randn(8, 4),))
    with pytest.raises(mugraph.MugraphError, match=r"transpose\(-1, -2\) of a tensor reshaped across the dims it"):
        mugraph.from_torch(lambda x: x.reshape(2, 8, 8).transpose(-1, -2) * 2, (torch.randn(2, 64),))
    with pytest.raises(mugraph.MugraphError, match=r"x\.T of a rank-3 argument is not supported \(x\.mT"):
        mugraph.from_torch(lambda x: x.T * 2, (torch.randn(2, 8, 4),))
    with pytest.raises(mugraph.MugraphError, match=r"the transpose transpose\(0, 1\) of a computed tensor"):
        mugraph.from_torch(lambda x: torch.transpose(x * 2, 0, 1), (torch.randn(8, 4),))
    with pytest.raises(mugraph.MugraphError, match=r"the transpose x\.t\(\) of a computed tensor"):
        mugraph.from_torch(lambda x: (x + 1).t(), (torch.randn(8, 4),))
    p = mugraph.from_torch(lambda x, y: x + y, (torch.randn(2, 4), torch.randn(2, 4)))
    with pytest.raises(mugraph.MugraphError, match="an input is None"):
        p(np.ones((2, 4)), None)


def test_bound_weights_are_looked_up_as_getattr_does():
    # The callable re-reads each bound tensor from the module on every call, by dict lookups
    # instead of nn.Module.__getattr__: the same object getattr gives, for every kind of attribute.
    import torch
    from mugraph.torch_frontend import _module_attribute

    m = make_rmsnorm_linear()
    m.register_buffer("scale", torch.ones(3))
    m.plain = torch.zeros(2)  # an instance attribute, not registered

    class WithProperty(torch.nn.Module):
        @property
        def doubled(self):
            return 2

    w = WithProperty()
    for obj, part in [(m, "proj"), (m.proj, "weight"), (m, "scale"), (m, "plain"), (m, "training"),
                      (m, "forward"), (w, "doubled"), (m.norm, "eps")]:
        assert _module_attribute(obj, part) is getattr(obj, part) or _module_attribute(obj, part) == getattr(obj, part)
    with pytest.raises(AttributeError):
        _module_attribute(m, "nothing_here")
    # A submodule replaced after capture is the one read on the next call.
    x = torch.randn(16, 256, dtype=torch.float16)
    p = mugraph.from_torch(m, (x,))
    first = p.bindings["proj_weight_t"](None)
    m.proj = torch.nn.Linear(256, 64, bias=False).half()
    second = p.bindings["proj_weight_t"](None)
    assert torch.equal(second, m.proj.weight.detach().t()) and not torch.equal(first, second)


def test_layer_norm_sigmoid_tanh_gelu_tanh_variance_and_dropout_map():
    # GPT-2's pieces: LayerNorm (module and function), gelu's tanh form, and sigmoid, tanh,
    # variance and eval-mode dropout, each written with the program's ops, against PyTorch.
    import torch
    import torch.nn.functional as F

    class Pieces(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(64)
            self.proj = torch.nn.Linear(64, 32)
            self.act = torch.nn.GELU(approximate="tanh")
            self.drop = torch.nn.Dropout(0.1)
            self.g = torch.nn.Parameter(torch.rand(32) + 0.5)
            self.tail = torch.nn.Sequential(torch.nn.Sigmoid(), torch.nn.Tanh(), torch.nn.Identity())

        def forward(self, x):
            h = self.proj(self.ln(x))
            a = self.drop(self.act(h)) + F.gelu(h * 0.5, approximate="tanh")
            b = torch.sigmoid(h) * h.tanh() + self.tail(h) + F.dropout(h, 0.3, training=False)
            c = h.var(-1, keepdim=True) + torch.var(h, dim=0, unbiased=False) + h.var(1, correction=0)[:, None]
            return a + b + c + F.layer_norm(h, (32,), self.g, None, 1e-6) + F.layer_norm(a, [8, 32])

    torch.manual_seed(3)
    m = Pieces().eval()
    with torch.no_grad():
        m.ln.weight.uniform_(0.5, 1.5)
        m.ln.bias.uniform_(-0.5, 0.5)
    x = torch.randn(8, 64) * 2
    p = mugraph.from_torch(m, (x,))
    assert [n for n, _, _ in p.inputs()] == ["x", "ln_weight", "ln_bias", "proj_weight_t", "proj_bias", "g"]
    assert "tanh" not in p.text and "gelu" not in p.text  # written with exp
    want = m(x).detach()
    np.testing.assert_allclose(p(x).numpy(), want.numpy(), rtol=1e-5, atol=1e-5)

    # Far out, the exponentials overflow to inf and the quotients reach their limits: 0, ±1, x.
    edge = torch.tensor([[-1000.0, -100.0, -20.0, 0.0, 1e-3, 20.0, 100.0, 1000.0]])
    far = mugraph.from_torch(lambda x: torch.sigmoid(x) + torch.tanh(x) * 2 + F.gelu(x, approximate="tanh"), (edge,))
    np.testing.assert_allclose(far(edge).numpy(), (torch.sigmoid(edge) + torch.tanh(edge) * 2
                                                   + F.gelu(edge, approximate="tanh")).numpy(), rtol=1e-6, atol=1e-6)


def test_gpt2_mlp_block_is_superoptimized():
    # LayerNorm, Linear with bias, gelu's tanh form, Linear with bias, residual add: the search
    # returns a verified callable that matches the module in f16.
    import torch

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(128)
            self.fc = torch.nn.Linear(128, 256)
            self.proj = torch.nn.Linear(256, 128)

        def forward(self, x):
            return x + self.proj(torch.nn.functional.gelu(self.fc(self.ln(x)), approximate="tanh"))

    torch.manual_seed(7)
    m = Block().half().eval()
    x = torch.randn(8, 128, dtype=torch.float16)
    p = mugraph.from_torch(m, (x,))
    best = mugraph.superoptimize(p, time_limit=20, threads=2, top=2)
    want = m.float()(x.float()).detach().numpy()
    assert_close_f16(best(x).float().numpy(), want)
    verdict = best.verify()
    # gelu's constant 2 √(2/π) is written so that the verifier's bound holds (a guarantee).
    assert verdict.verdict == "equivalent" and verdict.guarantee, verdict.guarantee_note


def test_module_weights_are_bound_transposed_where_a_transpose_reads_them():
    # x @ w.T, w.t(), torch.transpose and w.mT bind the weight transposed (one input, read
    # transposed on each call); a weight also read as it is gets a second input.
    import torch

    class Transposes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(16, 32) * 0.2)
            self.v = torch.nn.Parameter(torch.randn(16, 32) * 0.2)
            self.heads = torch.nn.Parameter(torch.randn(2, 16, 32) * 0.2)
            self.register_buffer("u", torch.randn(32, 16) * 0.2)

        def forward(self, x, y):
            a = x @ self.w.T + x @ self.w.t() + x @ torch.transpose(self.w, dim0=0, dim1=1) + x @ self.u
            b = (y @ self.heads.mT).sum(0) + (y @ self.heads.transpose(-1, -2)).sum(0)
            return a + torch.nn.functional.linear(x, self.v) + b + self.v.sum() + self.w.t().sum(0)[None, :]

    torch.manual_seed(4)
    m = Transposes()
    x, y = torch.randn(4, 32), torch.randn(2, 4, 32)
    p = mugraph.from_torch(m, (x, y))
    names = [n for n, _, _ in p.inputs()]
    assert names == ["x", "y", "w_t", "u", "heads_t", "v_t", "v"], names
    assert p.inputs()[4][1] == [2, 32, 16]
    np.testing.assert_allclose(p(x, y).detach().numpy(), m(x, y).detach().numpy(), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        m.w.mul_(-1)  # updated in place: the callable reads it, transposed, again
    np.testing.assert_allclose(p(x, y).detach().numpy(), m(x, y).detach().numpy(), rtol=1e-5, atol=1e-5)

    class Leading(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = torch.nn.Parameter(torch.randn(2, 16, 32))

        def forward(self, x):
            return x @ torch.transpose(self.heads, 0, 1)

    with pytest.raises(mugraph.MugraphError, match=r"transpose\(0, 1\) of a rank-3 weight is not supported"):
        mugraph.from_torch(Leading(), (torch.randn(16, 2),))


def test_dropout_while_training_and_softmax_say_why_they_are_refused():
    import torch
    import torch.nn.functional as F

    with pytest.raises(mugraph.MugraphError, match=r"dropout while training .* module.eval\(\)"):
        mugraph.from_torch(torch.nn.Dropout(0.2), (torch.randn(4, 8),))
    for f in (lambda x: torch.softmax(x, -1), lambda x: F.softmax(x, dim=-1), lambda x: x.softmax(-1),
              torch.nn.Softmax(dim=-1)):
        with pytest.raises(mugraph.MugraphError, match=r"softmax is not supported: it subtracts each row's maximum"):
            mugraph.from_torch(f, (torch.randn(4, 8),))
        with pytest.raises(mugraph.MugraphError, match=r"pass bounded_softmax=True"):
            mugraph.from_torch(f, (torch.randn(4, 8),))
    for f in (lambda x: torch.log_softmax(x, -1), lambda x: x.log_softmax(-1), torch.nn.LogSoftmax(dim=-1)):
        with pytest.raises(mugraph.MugraphError, match=r"softmax is not supported: it takes a logarithm"):
            mugraph.from_torch(f, (torch.randn(4, 8),), bounded_softmax=True)
    # The rewrite the message suggests maps.
    p = mugraph.from_torch(lambda x: torch.exp(x) / torch.exp(x).sum(-1, keepdim=True), (torch.randn(4, 8),))
    x = torch.randn(4, 8)
    np.testing.assert_allclose(p(x).numpy(), torch.softmax(x, -1).numpy(), rtol=1e-5, atol=1e-6)


def test_bounded_softmax_maps_softmax_and_attention():
    # With bounded_softmax=True the caller asserts its logits are bounded: softmax maps to
    # exp(x) / its sum, and F.scaled_dot_product_attention to that softmax of q @ kᵀ · scale, v.
    import torch
    import torch.nn.functional as F

    torch.manual_seed(7)
    q, k, v = torch.randn(1, 2, 16, 32), torch.randn(1, 2, 24, 32), torch.randn(1, 2, 24, 32)
    forms = [lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) * 0.125, dim=-1) @ v,
             lambda q, k, v: F.softmax(q @ k.transpose(2, 3) / 8, dim=-1, dtype=torch.float32) @ v,
             lambda q, k, v: (q @ k.mT * 0.1).softmax(-1) @ v,
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.2)]
    for f in forms:
        p = mugraph.from_torch(f, (q, k, v), bounded_softmax=True)
        assert "exp(" in p.text and "k_t" in p.bindings
        np.testing.assert_allclose(p(q, k, v).numpy(), f(q, k, v).numpy(), rtol=1e-4, atol=1e-5)

    class WithKeys(torch.nn.Module):  # a module's keys: bound transposed once for both reads
        def __init__(self):
            super().__init__()
            self.keys = torch.nn.Parameter(torch.randn(1, 2, 24, 32))
            self.softmax = torch.nn.Softmax(dim=3)

        def forward(self, q, v):
            return F.scaled_dot_product_attention(q, self.keys, v) + self.softmax(q @ self.keys.mT) @ v

    m = WithKeys()
    p = mugraph.from_torch(m, (q, v), bounded_softmax=True)
    assert [n for n, _, _ in p.inputs()] == ["q", "v", "keys_t"]
    with torch.no_grad():
        np.testing.assert_allclose(p(q, v).numpy(), m(q, v).numpy(), rtol=1e-4, atol=1e-5)
    for f, what in [(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), "with a mask"),
                    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=q @ k.mT), "with a mask"),
                    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.1), "dropout_p=0.1"),
                    (lambda q, k, v: F.softmax(q @ k.mT) @ v, "without dim")]:
        with pytest.raises(mugraph.MugraphError, match=what):
            mugraph.from_torch(f, (q, k, v), bounded_softmax=True)
