"""`benchmarks/gpu.py`'s device worker: torch's device, its name and its matrix-product rates."""

import os
import time


def sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def device_name(torch, cuda):
    if cuda:
        return torch.cuda.get_device_name(0)
    name = "CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} logical CPUs, torch {torch.get_num_threads()} threads)"


def matmul_tflops(torch, device, dtype, n):
    """TFLOP/s of an n^3 matrix product, repeated for about a second."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    a @ b
    sync(torch, device)
    repeats, seconds = 0, 0.0
    began = time.perf_counter()
    while repeats < 3 or (seconds < 1.0 and repeats < 200):
        a @ b
        repeats += 1
        if repeats % 5 == 0 or repeats < 3:
            sync(torch, device)
            seconds = time.perf_counter() - began
    sync(torch, device)
    return 2 * n**3 * repeats / (time.perf_counter() - began) / 1e12


def device_worker(args):
    """The device torch computes on and its bfloat16 and float32 matrix-product rates.

    float32 with TF32 allowed, as JAX's default matrix-product precision
    computes float32 on H100/H200 (and as the torch workers run float32).
    """
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    n = args.matmul_size or (8192 if cuda else 2048)
    rates = {str(dtype).removeprefix("torch."): matmul_tflops(torch, device, dtype, n)
             for dtype in (torch.bfloat16, torch.float32)}
    return {
        "device": device,
        "name": device_name(torch, cuda),
        "matmul_size": n,
        "matmul_tflops": rates,
        "float32_matmul": "TF32 allowed (torch.backends.cuda.matmul.allow_tf32)",
        "torch": torch.__version__,
    }
