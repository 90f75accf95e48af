"""The NKI stack on this machine: which API the Neuron SDK provides, whether a NeuronDevice is
attached, the chip, and how an NKI candidate is run (simulated or on the device).

Standard library only; nothing of the SDK is imported here except, when its distribution has no
metadata, the package itself to read its ``__version__``.

- Current SDKs (2.27+): the standalone ``nki`` package (``nki.jit``, ``nki.simulate``; versions
  0.2-0.7 for SDK 2.27-2.33). Legacy SDKs (<= 2.27): ``neuronxcc.nki`` (``simulate_kernel``,
  ``baremetal``, ``benchmark``, ``profile``); used only where it is all the target has.
- A NeuronDevice shows as ``/dev/neuron*``. ``ACCELOPT_NKI_MODE=simulate`` forces the simulator on a
  Trainium machine, ``device`` forces the device path (where the device nodes are not visible).
- The chip: the EC2 instance type (``trn1.2xlarge``) from DMI, else
  ``NEURON_PLATFORM_TARGET_OVERRIDE`` (trn1 / trn2 / trn3, the simulator's and compiler's target).
"""

from __future__ import annotations

import os

#: (api, module, distribution) in order of preference.
_APIS = (("nki", "nki", "nki"), ("neuronxcc.nki", "neuronxcc.nki", "neuronxcc"))


def _has_module(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _version(module: str, dist: str) -> str | None:
    """The distribution's version, else the module's ``__version__`` (None when unknown)."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        pass
    try:
        import importlib

        return str(getattr(importlib.import_module(module.split(".")[0]), "__version__", None))
    except Exception:  # noqa: BLE001 - a broken SDK is reported as version-less
        return None


def detect_api() -> dict:
    """``{"api": "nki" | "neuronxcc.nki", "version": str | None}`` for the SDK found (the current
    ``nki`` package first), else ``{"api": None, "version": None}``."""
    for api, module, dist in _APIS:
        if _has_module(module.split(".")[0]) and _has_module(module):
            return {"api": api, "version": _version(module, dist)}
    return {"api": None, "version": None}


def has_device() -> bool:
    """True when a NeuronDevice is attached (``/dev/neuron*``) or ``ACCELOPT_NKI_MODE=device``."""
    mode = os.environ.get("ACCELOPT_NKI_MODE", "")
    if mode in ("device", "simulate"):
        return mode == "device"
    try:
        return any(d.startswith("neuron") for d in os.listdir("/dev"))
    except OSError:
        return False


def run_mode(timing: str | None) -> str:
    """``"device"`` (real kernel on a NeuronCore) or ``"simulated"`` (``nki.simulate`` on CPU):
    the device when one is attached and the request does not ask for the interpreter."""
    return "device" if has_device() and timing != "interpreter" else "simulated"


def device_name(mode: str) -> str:
    """``trn1.2xlarge NeuronCore`` (DMI instance type) or ``trn2 NeuronCore`` (platform target
    override) on the device; ``cpu (NKI simulator, trn2)`` when simulated."""
    platform = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "")
    if mode == "simulated":
        return f"cpu (NKI simulator{', ' + platform if platform else ''})"
    try:
        with open("/sys/devices/virtual/dmi/id/product_name") as f:
            product = f.read().strip()
    except OSError:
        product = ""
    if product.startswith(("trn", "inf")):
        return product + " NeuronCore"
    return f"{platform} NeuronCore" if platform else "NeuronCore"


def versions_entry() -> dict:
    """What :func:`.runtime.device.versions` records of the NKI stack: ``nki`` or ``neuronxcc`` version
    and ``nki_api``; empty without an SDK."""
    found = detect_api()
    if found["api"] is None:
        return {}
    key = "nki" if found["api"] == "nki" else "neuronxcc"
    return {key: found["version"] or "unknown", "nki_api": found["api"]}


def stack() -> dict:
    """What decides how an NKI candidate runs here, for a target's fingerprint (the evaluation
    cache key must tell a ``simulated`` result from a Trainium one before evaluating):
    :func:`versions_entry` plus ``nki_mode`` (:func:`run_mode`: ``device`` / ``simulated``),
    ``neuron_platform`` (``NEURON_PLATFORM_TARGET_OVERRIDE``) and ``lnc``
    (``NEURON_LOGICAL_NC_CONFIG``) where set; empty without an SDK."""
    out = versions_entry()
    if not out:
        return {}
    out["nki_mode"] = run_mode(None)
    for key, env in (
        ("neuron_platform", "NEURON_PLATFORM_TARGET_OVERRIDE"),
        ("lnc", "NEURON_LOGICAL_NC_CONFIG"),
    ):
        if os.environ.get(env):
            out[key] = os.environ[env]
    return out
