"""``accelopt profile PATH``: evaluate a kernel file as it is (correctness + latency).

One evaluation through :class:`accelopt_core.engine.Engine` on the configured target; prints the
result's summary and the latency median with p20/p80 (ms), or one JSON object with ``--json``.
Exit status 0 when the kernel came back correct, or when the CPU interpreter cannot run it but
it compiles for the GPU (``metrics["not_timed"]``: its device facts are shown, "not timed"), 1
otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from rich.console import Console

from accelopt_cli import render
from accelopt_cli.kernel_args import choose_kernel, load_kernel
from accelopt_core import devicefacts
from accelopt_core.kernelfile import KernelFile
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.settings import Settings


def run_profile_command(
    args: argparse.Namespace, settings: Settings, out: Console, err: Console
) -> int:
    """Run ``accelopt profile`` as parsed into ``args``; returns the exit status (0 or 1).

    Never raises for a bad file or an unusable target: the reason is printed on ``err``."""
    return asyncio.run(profile(args, settings, out, err))


async def profile(args: argparse.Namespace, settings: Settings, out: Console, err: Console) -> int:
    """The body of :func:`run_profile_command`, on a running event loop."""
    kf = load_kernel(args.path, err, getattr(args, "harness", None), getattr(args, "dataset", None))
    if kf is None:
        return 1
    kernel = choose_kernel(kf, args.kernel, err) if args.kernel else None
    if args.kernel and kernel is None:
        return 1
    result = await _evaluate(settings, kf, kernel, err)
    if result is None:
        return 1
    if args.json:
        data = {"path": args.path, "kernel": kernel, "target": settings.target}
        data["gpu"] = settings.gpu_name  # the configured GPU; metrics["gpu"] has its facts
        data.update(render.workload_fields(kf))
        print(json.dumps({**data, **result.to_dict()}, indent=2))
    else:
        render.print_workload(out, kf)
        render.print_profile(out, err, result, args.path)
    return 0 if result.ok or devicefacts.not_timed(result.metrics) else 1


async def _evaluate(
    settings: Settings, kf: KernelFile, kernel: str | None, err: Console
) -> EvalResult | None:
    """Profile ``kernel`` of ``kf`` (None: the harness's entry); None (reason printed) when the
    file cannot be evaluated or the target failed."""
    from accelopt_core.engine import Engine

    engine = Engine(settings, log=render.engine_log(err))
    try:
        return await engine.profile(kf, kernel)
    except (ValueError, KeyError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return None
    except Exception as exc:  # target unusable (TargetError), ...: a message, never a traceback
        err.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
        return None
    finally:
        await engine.close()
