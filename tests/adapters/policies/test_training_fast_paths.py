"""The training-only shortcuts compute what the plain modules compute: attention's fused
projections, the frozen norms folded into convolutions, the CVAE reading its cls token alone,
3x3 convolutions' weight gradients as matrix products; `cpu_kernels=auto` and `torch` train to
the same values and gradients, and `torch` takes none of the speed paths."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from rlctl.adapters.policies import act_training, backbones, conv_training, dropout
from rlctl.adapters.policies.act import ACTPolicy, TransformerEncoder
from rlctl.adapters.policies.attention import TrainingAttention
from rlctl.adapters.policies.cpu_kernels import use_cpu_kernels
from rlctl.adapters.policies.mlp import MLPPolicy
from rlctl.adapters.policies.resnet import FrozenBatchNorm2d
from rlctl.domain.features import typed_feature
from rlctl.domain.policies import ACTConfig, MLPConfig

DIM, HEADS = 32, 4


def _pair(dropout: float = 0.0) -> tuple[TrainingAttention, nn.MultiheadAttention]:
    torch.manual_seed(0)
    ours = nn.MultiheadAttention(DIM, HEADS, dropout=dropout, batch_first=True)
    use_cpu_kernels(ours)
    assert isinstance(ours, TrainingAttention)
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(DIM, HEADS, dropout=dropout, batch_first=True)
    return ours, theirs


def test_attention_has_torchs_parameters_names_and_initial_values() -> None:
    ours, theirs = _pair()
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    for key, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key


@pytest.mark.parametrize("kind", ["self", "cross", "first query", "padded"])
def test_attention_in_training_matches_torchs_values_and_gradients(kind: str) -> None:
    ours, theirs = _pair()
    ours.train(), theirs.train()
    x = torch.randn(3, 7, DIM)
    memory = torch.randn(3, 11, DIM)
    mask = None
    if kind == "self":
        q = k = x
        v = x
    elif kind == "cross":
        q, k, v = x, memory + 1, memory
    elif kind == "first query":
        q, k, v = x[:, :1], x, x
    else:
        q = k = v = x
        mask = torch.zeros(3, 7, dtype=torch.bool)
        mask[:, 5:] = True
    got = ours(q, k, v, key_padding_mask=mask, need_weights=False)[0]
    expected = theirs(q, k, v, key_padding_mask=mask, need_weights=False)[0]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    got.square().sum().backward()
    expected.square().sum().backward()
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_attention_dropout_in_training_keeps_the_expected_share_and_scale() -> None:
    ours, _ = _pair(dropout=0.5)
    ours.train()
    # Values of one everywhere: each output is the sum of its kept, rescaled weights.
    with torch.no_grad():
        ours.in_proj_weight.zero_()
        ours.in_proj_bias.fill_(1.0)
        ours.out_proj.weight.copy_(torch.eye(DIM))
        ours.out_proj.bias.zero_()
    torch.manual_seed(1)
    out = ours(*(torch.randn(64, 600, DIM),) * 3, need_weights=False)[0]
    assert out.mean().item() == pytest.approx(1.0, abs=0.01)  # unbiased
    assert out.std().item() > 0.02  # some weights were dropped
    ours.eval()
    torch.testing.assert_close(
        ours(*(torch.randn(2, 5, DIM),) * 3, need_weights=False)[0],
        torch.ones(2, 5, DIM),
        rtol=0,
        atol=1e-6,
    )


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_self_attention_of_zero_tokens_from_their_positions_alone(dropout: float) -> None:
    ours, _ = _pair(dropout=dropout)
    ours.train()
    with torch.no_grad():
        ours.in_proj_bias.normal_(), ours.out_proj.bias.normal_()  # biases carry the values
    positions = torch.randn(1, 6, DIM, requires_grad=True)
    queries = positions.expand(5, 6, DIM)  # zeros + positions, as ACT's first decoder layer
    torch.manual_seed(3)
    expected = ours(queries, queries, torch.zeros(5, 6, DIM), need_weights=False)[0]
    expected.square().sum().backward()
    grads = [p.grad.clone() for p in (positions, *ours.parameters())]
    positions.grad = None
    ours.zero_grad()
    torch.manual_seed(3)  # the same dropout draws
    got = ours.attend_from_positions(positions, batch=5)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    got.square().sum().backward()
    for expected_grad, param in zip(grads, (positions, *ours.parameters())):
        torch.testing.assert_close(param.grad, expected_grad, rtol=1e-4, atol=1e-5)


def test_frozen_norms_folded_in_training_give_the_inference_outputs() -> None:
    torch.manual_seed(0)
    net = backbones.resnet("resnet18", None, load_weights=False, norm_layer=FrozenBatchNorm2d)
    for module in net.modules():
        if isinstance(module, FrozenBatchNorm2d):  # statistics that are not the identity
            module.weight.uniform_(0.5, 1.5), module.bias.normal_()
            module.running_mean.normal_(), module.running_var.uniform_(0.5, 2.0)
    x = torch.rand(2, 3, 64, 64)
    expected = net.eval()(x)
    got = net.train()(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    got.sum().backward()
    folded = net.conv1.weight.grad.clone()
    net.zero_grad()
    net.eval()(x).sum().backward()
    torch.testing.assert_close(folded, net.conv1.weight.grad, rtol=1e-3, atol=1e-3)


def test_the_cvae_reads_the_same_cls_output_from_its_first_token_alone() -> None:
    config = ACTConfig(
        input_features={"observation.state": typed_feature("STATE", (4,))},
        output_features={"action": typed_feature("ACTION", (2,))},
        dim_model=16, n_heads=2, dim_feedforward=32, n_vae_encoder_layers=3, dropout=0.0,
        pre_norm=True,
    )  # fmt: skip
    torch.manual_seed(0)
    encoder = TransformerEncoder(config, 3).train()
    x, positions = torch.randn(2, 9, 16), torch.randn(1, 9, 16)
    mask = torch.zeros(2, 9, dtype=torch.bool)
    mask[1, 6:] = True
    full = encoder(x, positions, mask)[:, :1]
    first = encoder(x, positions, mask, first_only=True)
    assert first.shape == (2, 1, 16)
    torch.testing.assert_close(first, full, rtol=1e-5, atol=1e-6)


def test_act_trains_through_the_fast_paths() -> None:
    config = ACTConfig(
        input_features={
            "observation.state": typed_feature("STATE", (4,)),
            "observation.images.top": typed_feature("VISUAL", (3, 32, 32)),
        },
        output_features={"action": typed_feature("ACTION", (2,))},
        chunk_size=4, n_action_steps=4, dim_model=16, n_heads=2, dim_feedforward=32,
        n_encoder_layers=1, n_vae_encoder_layers=2, latent_dim=4,
        pretrained_backbone_weights=None,
    )  # fmt: skip
    torch.manual_seed(0)
    policy = ACTPolicy(config, load_backbone_weights=False).train()
    use_cpu_kernels(policy)
    batch = {
        "observation.state": torch.randn(3, 4),
        "observation.images.top": torch.rand(3, 3, 32, 32),
        "action": torch.randn(3, 4, 2),
        "action_is_pad": torch.zeros(3, 4, dtype=torch.bool),
    }
    loss, parts = policy(batch)
    loss.backward()
    grads = [p.grad for p in policy.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert set(parts) == {"l1_loss", "kld_loss"}


@pytest.mark.parametrize(
    ("batch", "channels", "out_channels", "size", "stride", "padding", "slab_bytes", "bias"),
    [
        (1, 3, 5, (7, 9), 1, 1, 6_000_000, False),
        (5, 8, 4, (6, 11), 1, 1, 4 * 6 * 11 * 9 * 8 * 2, True),  # two images a slab, one last
        (4, 16, 16, (5, 5), 1, 1, 1, False),  # one image a slab even past the budget
        (3, 6, 10, (9, 8), 2, 1, 6_000_000, False),  # a stride leaves the last row over
        (2, 4, 4, (7, 10), (2, 1), (0, 2), 6_000_000, True),
    ],
)
def test_conv3x3_weight_gradient_as_a_matrix_product_matches_torchs(
    monkeypatch: pytest.MonkeyPatch,
    batch: int,
    channels: int,
    out_channels: int,
    size: tuple[int, int],
    stride: int | tuple[int, int],
    padding: int | tuple[int, int],
    slab_bytes: int,
    bias: bool,
) -> None:
    monkeypatch.setattr(conv_training, "_PATCH_SLAB_BYTES", slab_bytes)
    torch.manual_seed(0)
    conv = nn.Conv2d(channels, out_channels, 3, stride=stride, padding=padding, bias=bias)
    conv = conv.train().to(memory_format=torch.channels_last)
    use_cpu_kernels(conv)
    x = torch.randn(batch, channels, *size).contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    got = conv(x)
    assert type(got.grad_fn).__name__ == "_Conv3x3Backward"
    upstream = torch.randn_like(got)
    got_grads = torch.autograd.grad(got, [x, *conv.parameters()], upstream)
    expected = F.conv2d(x, conv.weight, conv.bias, conv.stride, conv.padding)
    expected_grads = torch.autograd.grad(expected, [x, *conv.parameters()], upstream)
    torch.testing.assert_close(got, expected)
    for a, b in zip(got_grads, expected_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert got_grads[1].is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize(
    "case", ["inference", "dilated", "contiguous input", "frozen weights", "double precision"]
)
def test_conv_training_keeps_torchs_path_where_the_matrix_product_does_not_apply(
    case: str,
) -> None:
    dilation = 2 if case == "dilated" else 1
    conv = nn.Conv2d(4, 4, 3, padding=dilation, dilation=dilation)
    conv = conv.to(memory_format=torch.channels_last)
    use_cpu_kernels(conv)
    assert isinstance(conv, conv_training.Conv3x3)
    conv.train(case != "inference")
    conv.weight.requires_grad_(case != "frozen weights")
    x = torch.randn(2, 4, 6, 6)
    if case != "contiguous input":
        x = x.contiguous(memory_format=torch.channels_last)
    if case == "double precision":
        conv, x = conv.double(), x.double()
    out = conv(x)
    assert out.grad_fn is None or type(out.grad_fn).__name__ != "_Conv3x3Backward"
    plain = F.conv2d(x, conv.weight, conv.bias, conv.stride, conv.padding, conv.dilation)
    torch.testing.assert_close(out, plain)


def _act(pre_norm: bool = False, dropout: float = 0.0) -> ACTConfig:
    return ACTConfig(
        input_features={
            "observation.state": typed_feature("STATE", (4,)),
            "observation.images.top": typed_feature("VISUAL", (3, 32, 32)),
        },
        output_features={"action": typed_feature("ACTION", (2,))},
        chunk_size=4, n_action_steps=4, dim_model=16, n_heads=2, dim_feedforward=32,
        n_encoder_layers=2, n_decoder_layers=2, n_vae_encoder_layers=2, latent_dim=4,
        pretrained_backbone_weights=None, pre_norm=pre_norm, dropout=dropout,
    )  # fmt: skip


def _act_batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    images = torch.rand(3, 3, 32, 32, generator=generator)
    is_pad = torch.zeros(3, 4, dtype=torch.bool)
    is_pad[2, 3:] = True
    return {
        "observation.state": torch.randn(3, 4, generator=generator),
        # channels-last, as the training session hands images over: the convolutions' path
        "observation.images.top": images.contiguous(memory_format=torch.channels_last),
        "action": torch.randn(3, 4, 2, generator=generator),
        "action_is_pad": is_pad,
    }


def _loss_and_grads(model: nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(11)  # the same latent sample for both
    loss, _ = model(batch)
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def _act_pair(config: ACTConfig) -> tuple[ACTPolicy, ACTPolicy]:
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        model = ACTPolicy(config, load_backbone_weights=False).train()
        models.append(model.to(memory_format=torch.channels_last))
    return models[0], models[1]


@pytest.mark.parametrize("pre_norm", [False, True])
def test_act_trains_to_the_same_values_and_gradients_with_auto_and_torch_kernels(
    pre_norm: bool,
) -> None:
    fast, plain = _act_pair(_act(pre_norm=pre_norm))
    assert use_cpu_kernels(fast, "auto") is not None
    assert use_cpu_kernels(plain, "torch") is None
    assert fast.state_dict().keys() == plain.state_dict().keys()
    first = fast.model.decoder.layers[0]
    assert isinstance(first, act_training.ZeroInputDecoderLayer) is (not pre_norm)
    batch = _act_batch()
    fast_loss, fast_grads = _loss_and_grads(fast, batch)
    plain_loss, plain_grads = _loss_and_grads(plain, batch)
    torch.testing.assert_close(fast_loss, plain_loss, rtol=1e-5, atol=1e-6)
    assert fast_grads.keys() == plain_grads.keys() and len(fast_grads) > 50
    for name, grad in plain_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, rtol=1e-3, atol=1e-5, msg=name)
    # At inference both are the plain model, to the bit.
    fast.eval(), plain.eval()
    with torch.no_grad():
        assert torch.equal(fast.model(batch)[0], plain.model(batch)[0])


@pytest.mark.parametrize("kernels", ["auto", "torch"])
def test_mlp_dropout_keeps_torchs_share_and_scale_with_either_kernels(kernels: str) -> None:
    config = MLPConfig(
        input_features={"observation.state": typed_feature("STATE", (4,))},
        output_features={"action": typed_feature("ACTION", (2,))},
        chunk_size=2, n_action_steps=2, hidden_dims=(600_000,), dropout=0.25,
    )  # fmt: skip
    model = MLPPolicy(config).train()
    threads = use_cpu_kernels(model, kernels)
    layer = model.network[2]
    assert type(layer) is (dropout.ThreadedDropout if kernels == "auto" else nn.Dropout)
    torch.manual_seed(2)
    y = layer(torch.ones(600_000))
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.003
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.75))
    if threads is not None:
        threads.close()


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often each speed path ran; every mask is large enough for the threads."""
    calls = {"im2col": 0, "threads": 0, "zero queries": 0}

    def counted(name: str, function):
        def spy(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return spy

    monkeypatch.setattr(
        conv_training, "weight_grad_3x3", counted("im2col", conv_training.weight_grad_3x3)
    )
    monkeypatch.setattr(dropout, "_draw", counted("threads", dropout._draw))
    monkeypatch.setattr(
        TrainingAttention,
        "attend_from_positions",
        counted("zero queries", TrainingAttention.attend_from_positions),
    )
    monkeypatch.setattr(dropout, "PARALLEL_MIN_ELEMENTS", 1)
    monkeypatch.setattr(dropout.DrawThreads, "workers", property(lambda self: 2))
    return calls


def _dropout_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("rlctl-dropout")]


def test_torch_kernels_take_no_speed_path(spies: dict[str, int]) -> None:
    fast, plain = _act_pair(_act(dropout=0.1))
    use_cpu_kernels(plain, "torch")
    threads_before = _dropout_threads()
    _loss_and_grads(plain, _act_batch())
    assert spies == {"im2col": 0, "threads": 0, "zero queries": 0}
    assert _dropout_threads() == threads_before
    plain_types = (nn.Conv2d, nn.Dropout, nn.MultiheadAttention)
    for module in plain.modules():
        if isinstance(module, plain_types):
            assert type(module) in plain_types, type(module)
    # The same spies see every path taken with `auto`, in the same process: nothing leaked
    # from one model to the other.
    threads = use_cpu_kernels(fast, "auto")
    assert threads is not None
    _loss_and_grads(fast, _act_batch())
    assert all(count > 0 for count in spies.values()), spies
    assert len(_dropout_threads()) > len(threads_before)
    _loss_and_grads(plain, _act_batch())
    assert spies["zero queries"] == 1  # the plain model still takes none
    threads.close()
    assert _dropout_threads() == threads_before
