"""What this CPU makes of float32 and bfloat16: the two dtypes VLA checkpoints come in.

    uv run python benchmarks/cpu_dtypes.py [--threads 1]

A model figure measured on one host does not carry to another when the hosts' vector units
differ, and the dtype decides by how much. Prints, per dtype, the CPU seconds of a matrix product
at a SigLIP width (2048 tokens x 768 -> 768) and of one SigLIP encoder layer at SmolVLA's image
size (two 512 px images, 1024 tokens each), and whether oneDNN has native bfloat16 here.

On an AMD EPYC with AVX2 only (no AVX-512 BF16, no AMX), one thread, load ~5: the product took
45 ms in float32 and 1640 ms in bfloat16 (36x), the layer 0.63 s and 4.62 s (7.4x). SmolVLA's
real-size checkpoint that `benchmarks/smolvla_real_size.py` builds holds float32 weights, so both
tools run float32 there and the training step is the same products in both (22-23 s each on that
host); a SmolVLA on a pretrained VLM (`load_vlm_weights=true`), GR00T (`model_dtype=bfloat16`)
or a π0/X-VLA with `dtype=bfloat16` runs its backbone in bfloat16 in both tools, which a CPU with
AMX runs faster than float32 and an AVX2 one several times slower. rlctl therefore computes such
a model in float32 where bfloat16 is emulated (`--policy.compute_dtype=auto`, the default;
`benchmarks/vla_compute_dtype.py` times a real-size SmolVLA both ways beside LeRobot).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from real_size import host_line


def cpu_seconds(call: Callable[[], object], repeat: int) -> float:
    call()
    tick = time.process_time()
    for _ in range(repeat):
        call()
    return (time.process_time() - tick) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args()

    import torch
    from transformers import SiglipVisionConfig
    from transformers.models.siglip.modeling_siglip import SiglipEncoderLayer

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(host_line())
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), CPU capability "
        f"{torch.backends.cpu.get_cpu_capability()}, oneDNN native bfloat16: "
        f"{torch.ops.mkldnn._is_mkldnn_bf16_supported()}"
    )
    x, weight, bias = torch.randn(2048, 768), torch.randn(768, 768), torch.randn(768)
    config = SiglipVisionConfig(hidden_size=768, intermediate_size=3072, num_attention_heads=12)
    config._attn_implementation = "sdpa"
    layer = SiglipEncoderLayer(config).eval()
    tokens = torch.randn(2, 1024, 768)
    rows = {}
    with torch.no_grad():
        for dtype in (torch.float32, torch.bfloat16):
            a, w, b = x.to(dtype), weight.to(dtype), bias.to(dtype)
            product = cpu_seconds(lambda a=a, w=w, b=b: torch.addmm(b, a, w), 5)
            layer.to(dtype)
            hidden = tokens.to(dtype)
            encoder = cpu_seconds(lambda hidden=hidden: layer(hidden, None), 2)
            rows[str(dtype).removeprefix("torch.")] = (product, encoder)
    print(f"{'':10}{'product ms':>12}{'GFLOP/s':>10}{'SigLIP layer s':>16}")
    for name, (product, encoder) in rows.items():
        flops = 2 * 2048 * 768 * 768 / product / 1e9
        print(f"{name:10}{product * 1e3:12.1f}{flops:10.1f}{encoder:16.3f}")
    (p32, e32), (p16, e16) = rows["float32"], rows["bfloat16"]
    print(f"bfloat16 / float32: product {p16 / p32:.1f}x, layer {e16 / e32:.1f}x")


if __name__ == "__main__":
    main()
