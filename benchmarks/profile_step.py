"""Profile (not a test): where the time of a GG step and of the sampler goes, kernel by kernel, against Opacus's
step on the same model (``benchmarks/step_overhead.py``'s CNN and batch).

    python benchmarks/profile_step.py [--device cuda] [--batch 256] [--beta 1.5] [--n 1000000 10000000] [--top 15]
                                      [--graph]

For each profiled call: wall time, the number of operator calls that run a kernel, and the top operators by
device time (CUDA) or CPU time. On a GPU a step of many small kernels is bound by their launches (≈ 5–10 µs of
host time each), not by the device's bandwidth: the kernel count is the figure to keep down. ``--graph`` (CUDA) also times one replay of ``sample_deferred`` captured
in a CUDA graph (static shapes, no synchronisation: capturable by design), the launch-free lower bound.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_overhead import build, step  # noqa: E402

from opacus_gg import distribution as D  # noqa: E402
from opacus_gg._device import accelerator_path  # noqa: E402

#: operators that only make views or allocate (no kernel)
NO_KERNEL = {"aten::empty", "aten::empty_strided", "aten::view", "aten::slice", "aten::as_strided", "aten::select",
             "aten::_reshape_alias", "aten::reshape", "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::t",
             "aten::transpose", "aten::permute", "aten::alias", "aten::detach", "aten::lift_fresh", "aten::resize_",
             "aten::_unsafe_view", "aten::flatten", "aten::view_as", "aten::empty_like", "aten::result_type",
             "aten::to", "aten::item", "aten::is_nonzero", "aten::detach_", "aten::unbind", "aten::split",
             "aten::chunk", "aten::narrow", "aten::stride", "aten::size", "aten::set_", "aten::_local_scalar_dense"}


def report(label: str, fn, device: torch.device, top: int) -> None:
    """Time ``fn`` (after a warm-up call) and print its kernel-launching operator count and top operators."""
    fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    wall = time.perf_counter() - t0
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        fn()
        sync()
    evs = [e for e in prof.events() if e.name.startswith("aten::")]
    leaf = [e for e in evs if e.name not in NO_KERNEL and not any(
        c.name.startswith("aten::") and c.name not in NO_KERNEL for c in e.cpu_children)]
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"== {label}: {wall * 1e3:.2f} ms wall, {len(leaf)} kernel-launching operator calls")
    rows = sorted(prof.key_averages(), key=lambda e: -getattr(e, key))[:top]
    for e in rows:
        print(f"   {e.key[:48]:48s} calls {e.count:6d}  {key.split('_')[1]} {getattr(e, key) / 1e3:8.2f} ms"
              f"  cpu {e.cpu_time_total / 1e3:8.2f} ms")


def graph_replay(n: int, beta: float, device: torch.device) -> None:
    """Capture ``sample_deferred(n)`` (torch's default CUDA generator) in a CUDA graph; print the time of one replay
    and check its draws (nothing pending, KS against the law)."""
    from scipy import stats

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture: tables on the device, allocator pools
        for _ in range(2):
            D.sample_deferred(n, beta, 1.0, device=device)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        x, fin = D.sample_deferred(n, beta, 1.0, device=device)
    graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        graph.replay()
    torch.cuda.synchronize()
    ks = stats.kstest(x[:200_000].double().cpu().numpy(), stats.gennorm(beta, scale=D.gennorm_scale(beta, 1.0)).cdf)
    print(f"== CUDA graph replay of sample_deferred({n}, beta={beta:g}): {(time.perf_counter() - t0) / 10 * 1e3:.3f} ms;"
          f" pending {bool(fin.pending)}, KS p-value {ks.pvalue:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--beta", type=float, default=1.5)
    ap.add_argument("--n", type=int, nargs="+", default=[10**6, 10**7])
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--graph", action="store_true", help="CUDA: also time a CUDA-graph replay of the sampler")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    dev = torch.device(a.device)
    with accelerator_path(dev.type == "cpu"):  # the accelerator branches, also when profiled on CPU
        for n in a.n:
            g = torch.Generator(device=dev).manual_seed(0)
            report(f"sample({n}, beta={a.beta:g})", lambda: D.sample(n, a.beta, 1.0, generator=g, device=dev), dev, a.top)
            report(f"randn({n})", lambda: torch.randn(n, generator=g, device=dev), dev, 5)
            if a.graph and dev.type == "cuda":
                try:  # an experiment: report why a capture fails rather than stop the profile
                    graph_replay(n, a.beta, dev)
                except Exception as e:  # noqa: BLE001
                    print(f"== CUDA graph capture of sample_deferred({n}) failed: {type(e).__name__}: {e}")
        torch.manual_seed(2)
        x = torch.randn(a.batch, 3, 32, 32, device=dev)
        y = torch.randint(0, 10, (a.batch,), device=dev)
        for name, p in (("opacus", 2.0), ("gg", a.beta)):
            model, opt = build(name, p, "flat", a.batch, dev)
            report(f"{name} step (flat, p={p:g})", lambda: step(model, opt, x, y, dev), dev, a.top)


if __name__ == "__main__":
    main()
