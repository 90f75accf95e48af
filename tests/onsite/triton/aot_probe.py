"""Run in a fresh process without TRITON_INTERPRET (tests/onsite/triton/test_tools.py): compile
the matmul example's launch for an H100 through the compile stage's driver, then check the
cubin Triton produced with the wheel's own tools, and compile the same launch without the
binder's divisibility attrs. Prints one JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")


def _early_disassembly(cubin, codes: dict, plain: dict) -> dict:
    """The early disassembler (:class:`cubin.EarlyDisassembly`) given the code at once, given
    it after nvdisasm has read its placeholder and exited, and cancelled: each case's answer
    against the plain run's, whether it ran nvdisasm again, and what it left behind."""
    import time

    out = {}
    at_once = cubin.EarlyDisassembly(90)
    out["at_once"] = {"same": at_once.finish(codes) == plain, "reran": at_once.reran}
    late = cubin.EarlyDisassembly(90)
    deadline = time.monotonic() + 60
    while late._proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    placeholder_rc = late._proc.returncode
    out["late"] = {
        "same": late.finish(codes) == plain,
        "reran": late.reran,
        "placeholder_rc": placeholder_rc,
    }
    cancelled = cubin.EarlyDisassembly(90)
    proc, folder = cancelled._proc, cancelled._tmp.name
    cancelled.cancel()
    cancelled.cancel()
    out["cancelled"] = {"rc": proc.returncode, "folder_left": os.path.exists(folder)}
    return out


def main() -> None:
    from accelopt_core.onsite.triton import capture, cubin, facts, sass
    from accelopt_core.onsite.triton.devices import DEVICES

    dev = DEVICES["H100 SXM5"]
    recorder = capture.install(dev)
    sys.path.insert(0, os.path.dirname(__file__))
    import torch
    from variants import MATMUL, tiled

    namespace: dict = {}
    exec(
        compile(
            tiled(64, 64, 32, 4, 3, MATMUL), os.path.abspath("examples/triton/matmul.py"), "exec"
        ),
        namespace,
    )
    a = torch.randn(64, 64, dtype=torch.float16)
    namespace["matmul"](a, a)
    launch = recorder.launches[-1]
    found = facts.tool_facts(launch)
    cache = facts._cache(launch.hash)
    cub = cache.get_file(f"{launch.kernel}.cubin")
    full_sass = subprocess.run(
        [os.path.join(cubin.tool_dir(), "cuobjdump"), "-sass", cub],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with open(cub, "rb") as f:
        code = cubin.text_sections(f.read())[launch.kernel]
    batched = cubin.disassemble({"a": code, "b": code}, 90)  # one nvdisasm run, split back
    early = _early_disassembly(cubin, {"a": code, "b": code}, batched)
    usage = subprocess.run(
        [os.path.join(cubin.tool_dir(), "cuobjdump"), "--dump-resource-usage", cub],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "k.o")
        argv = cubin.ptxas_argv(
            cubin.ptxas_path(90), 90, True, cache.get_file(f"{launch.kernel}.ptx"), out
        )
        verbose = subprocess.run(argv, capture_output=True, text=True, check=True).stderr
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = launch.src
    bare = triton.compile(
        ASTSource(src.fn, src.signature, src.constants, {}),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": 4, "num_stages": 3},
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bare.cubin")
        with open(path, "wb") as f:
            f.write(bare.asm["cubin"])
        bare_sass = subprocess.run(
            [os.path.join(cubin.tool_dir(), "cuobjdump"), "-sass", path],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        bare_usage = cubin.parse_resource_usage(
            subprocess.run(
                [os.path.join(cubin.tool_dir(), "cuobjdump"), "--dump-resource-usage", path],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
    print(
        json.dumps(
            {
                "attrs": {str(k): v for k, v in src.attrs.items()},
                "facts": found,
                "cuobjdump": usage,
                "ptxas": verbose,
                "bare_sass": sass.facts(bare_sass),
                "bare_registers": bare_usage[launch.kernel]["registers"],
                "sass_cuobjdump": sass.facts(full_sass),
                "sass_batched": [sass.facts(batched["a"]), sass.facts(batched["b"])],
                "early": early,
            }
        )
    )


if __name__ == "__main__":
    main()
