"""What the lens, the hover and ``accelopt.showMemory`` say about a profile (present.py): NKI
profile metrics, and results timed on the host (the Triton interpreter, the NKI simulator)
labelled as such."""

from __future__ import annotations

from pathlib import Path

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.onsite.protocol import EvalResult
from accelopt_server import present
from tests.cli.test_render import NKI_METRICS

TENSOR_ADD = Path(__file__).resolve().parents[3] / "examples" / "nki" / "tensor_add.py"


def kernel():
    kf = parse_kernel_file(TENSOR_ADD.read_text(), str(TENSOR_ADD))
    return kf.kernels[0]


def neuron_result() -> EvalResult:
    return EvalResult(
        status="ok", latency_ms=0.02, p20_ms=0.019, p80_ms=0.021, timing="neuron",
        device="trn1.2xlarge NeuronCore", metrics=dict(NKI_METRICS),
    )  # fmt: skip


def test_lens_names_the_busiest_engine_of_an_nki_profile() -> None:
    assert present.lens_summary(neuron_result()) == ("0.02 ms · correct · vector engine 62% active")
    simulated = EvalResult(status="ok", timing="simulated", device="cpu (NKI simulator)")
    assert present.lens_summary(simulated) == "untimed · correct · simulated"
    interp = EvalResult(status="ok", latency_ms=1.5, timing="interpreter", device="cpu")
    assert present.lens_summary(interp) == "1.5 ms · correct · interpreter"


def test_hover_shows_nki_metrics_and_what_simulated_means() -> None:
    k = kernel()
    assert k.backend == "nki"
    text = present.kernel_hover(k, neuron_result(), 3, 3, "_memory_", None)
    assert "Last profile: 0.02 ms · correct on trn1.2xlarge NeuronCore" in text
    assert "- memory: HBM 2.0 MiB read, 1.0 MiB written" in text
    assert "engines active: tensor 0% · vector 62%" in text
    assert "NKI simulator" not in text
    simulated = EvalResult(status="ok", timing="simulated", device="cpu (NKI simulator, trn1)")
    text = present.kernel_hover(k, simulated, 3, 4, "_memory_", None)
    assert "untimed · correct · simulated" in text and "(before your latest edits)" in text
    assert "_Run by the NKI simulator on CPU (nki.simulate)" in text
    assert "memory:" not in text  # the simulator gives no profile metrics
    interp = EvalResult(status="ok", latency_ms=1.5, timing="interpreter", device="cpu")
    text = present.kernel_hover(k, interp, 1, 1, "_memory_", None)
    assert "_Timed under the Triton interpreter on CPU" in text
    failed = EvalResult(status="incorrect", timing="simulated", message="max error 3.0")
    assert "NKI simulator" not in present.kernel_hover(k, failed, 1, 1, "", None)
