"""The allowlisted environment of every process that runs candidate or harness code (issue 34).

A worker (cold, warm zygote, or one started by the ssh agent or a Ray task) is started with
:func:`confined_environ` of its starter's environment, and scrubs its own ``os.environ`` the
same way at start (:func:`.policy.setup_worker`); the judge then points ``HOME`` and
``TMPDIR`` at the evaluation's scratch directory (:func:`scratch_environ`). Kept:

- the names in :data:`NAMES` (``PATH``, the locale, ``LD_LIBRARY_PATH``, ``PYTHONPATH``, the
  thread counts, ``CC``/``CXX`` for Triton's launcher build, ...);
- names starting with one of :data:`PREFIXES` (``LC_``, ``PYTHON``, ``TRITON_``, ``CUDA_``,
  ``NVIDIA_``, ``NEURON_``, ``NKI_``, ``PYTORCH_``, ``TORCH_``, ``ACCELOPT_``) unless the name
  looks like a secret (:data:`SECRET`: ``NVIDIA_API_KEY``, ``TRITON_TOKEN``, ...);
- the names the user adds (``accelopt.evaluation.environment``, carried to the target in
  :data:`KEEP_VAR`): an exact name is kept as given, a ``PREFIX_*`` pattern like the built-in
  prefixes (secrets excluded).

Everything else, the LLM API key (``OPENAI_API_KEY`` or whatever ``llm.apiKeyEnv`` names) and
``SSH_AUTH_SOCK`` included, is absent. Standard library only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

#: Extra names the user's setting adds (comma-separated), in the environment of a starter and
#: of the workers it starts.
KEEP_VAR = "ACCELOPT_SANDBOX_ENV"

#: Sandbox parts not to use, comma-separated (``landlock``, ``bwrap``, ``netns``,
#: ``seccomp``, or ``all``): troubleshooting and tests; every evaluation then warns.
OFF_VAR = "ACCELOPT_SANDBOX_OFF"

#: Exact names passed on.
NAMES = frozenset(
    {
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "USER",
        "LOGNAME",
        "HOME",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "LD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CC",
        "CXX",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
    }
)

#: Name prefixes passed on (names that look like secrets excepted).
PREFIXES = ("LC_", "PYTHON", "TRITON_", "CUDA_", "NVIDIA_", "NEURON_", "NKI_", "PYTORCH_")
PREFIXES += ("TORCH_", "ACCELOPT_")

#: A name that looks like it holds a secret; never passed on through a prefix.
SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE", re.IGNORECASE)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")

#: Compiler-cache variables and their directory under the cache root (:func:`compile_caches`).
CACHE_VARS = {
    "TRITON_CACHE_DIR": "triton",
    "CUDA_CACHE_PATH": "cuda",
    "NEURON_COMPILE_CACHE_URL": "neuron",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "PYTORCH_KERNEL_CACHE_PATH": "torch-kernels",
}


def keep_names(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """The valid names and ``PREFIX_*`` patterns of ``spec`` (comma- or space-separated text,
    or a list), in order, without duplicates; anything else is ignored."""
    if spec is None:
        return ()
    items = re.split(r"[,\s]+", spec) if isinstance(spec, str) else list(spec)
    return tuple(dict.fromkeys(i.strip() for i in items if _NAME.match(i.strip())))


def allowed(name: str, keep: Iterable[str] = ()) -> bool:
    """True when the variable ``name`` is passed to candidate processes (see the module)."""
    for item in keep:
        if item == name:
            return True
        if item.endswith("*") and name.startswith(item[:-1]) and not SECRET.search(name):
            return True
    if SECRET.search(name):
        return False
    return name in NAMES or name.startswith(PREFIXES)


def confined_environ(
    environ: Mapping[str, str], keep: Iterable[str] | None = None
) -> dict[str, str]:
    """The allowlisted copy of ``environ``; ``keep``: the user's extra names (default: those
    in ``environ[KEEP_VAR]``), recorded in :data:`KEEP_VAR` of the copy."""
    names = keep_names(environ.get(KEEP_VAR) if keep is None else keep)
    out = {k: v for k, v in environ.items() if allowed(k, names)}
    out.pop(KEEP_VAR, None)
    if names:
        out[KEEP_VAR] = ",".join(names)
    return out


def cache_root(environ: Mapping[str, str]) -> str:
    """The compiler caches' root: ``$XDG_CACHE_HOME/accelopt/compile`` (default
    ``~/.cache/accelopt/compile``), shared by every candidate of this user."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(
        environ.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "accelopt", "compile")


def compile_caches(environ: Mapping[str, str], fallback: bool = True) -> dict[str, str]:
    """``{variable: value}`` of the compiler caches (:data:`CACHE_VARS`): a variable the user
    set is kept, the others point into :func:`cache_root` (Triton's own default, ``~/.triton``,
    would be the scratch directory once ``HOME`` points there), or into :func:`fallback_root`
    when that cannot be made or written (a read-only ``HOME``). Without the fallback every
    kernel's compile failed with the cache's ``Permission denied``, a verdict on the candidate
    for the machine's fault. Without ``fallback`` the root stays where it is (read-only
    under bubblewrap, where evaluations compile into caches of their own, :mod:`.caches`)."""
    root = cache_root(environ)
    unset = not all(environ.get(var) for var in CACHE_VARS)
    if fallback and unset and not _writable_dir(root):
        root = fallback_root(environ)
    return {var: environ.get(var) or os.path.join(root, sub) for var, sub in CACHE_VARS.items()}


def _writable_dir(path: str) -> bool:
    """``path`` is a directory this process could make (mode 0700) and can write."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def fallback_root(environ: Mapping[str, str]) -> str:
    """The compiler caches' root when :func:`cache_root` is unusable:
    ``$TMPDIR/accelopt-compile-<uid>`` (default ``/tmp``), kept between evaluations until the
    temporary directory is cleaned. It must be this user's own directory, mode 0700 and not a
    link (in a shared ``/tmp`` another user could have made it to plant cache entries);
    otherwise a new private directory (no cache between processes)."""
    import stat
    import tempfile

    tmp = environ.get("TMPDIR") or "/tmp"
    path = os.path.join(tmp, f"accelopt-compile-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
        if (
            stat.S_ISDIR(info.st_mode)
            and info.st_uid == os.getuid()
            and stat.S_IMODE(info.st_mode) & 0o077 == 0
        ):
            return path
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="accelopt-compile-")


def cache_dirs(caches: Mapping[str, str]) -> list[str]:
    """The local directories of ``caches`` (a URL such as ``s3://...`` is none), made."""
    out = []
    for value in caches.values():
        if "://" in value or not os.path.isabs(value):
            continue
        try:
            os.makedirs(value, mode=0o700, exist_ok=True)
        except OSError:
            continue
        out.append(value)
    return out


def scratch_environ(home: str, tmp: str) -> dict[str, str]:
    """``HOME`` = ``home`` and ``TMPDIR``/``TEMP``/``TMP`` = ``tmp`` (the scratch directory's
    working and temporary directories)."""
    return {"HOME": home, "TMPDIR": tmp, "TEMP": tmp, "TMP": tmp}
