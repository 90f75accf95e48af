"""What a candidate may import (issue 53, item 3), and what inside torch, triton and numpy it may
not reach.

Imports by allowlist. A candidate's changed code may import (``import m``, ``from m import x``,
``import m.sub as s``) only a module under one of:

- the modules its original file imports (:func:`.original.original_facts`), and its own
  top-level package when the kernel module lives in one (a sibling helper: ``minikern.utils``);
  relative imports stay governed by the package-depth rule (``gate: worker access``);
- the kernel stack, :data:`KERNEL_STACK`: torch, triton (``triton.language`` under it), numpy,
  math, and NKI's ``neuronxcc.nki`` (``nki`` is canonicalized to it by
  :func:`..names.canonical_module`; the NKI path imports ``nki``, ``nki.language``,
  ``nki.isa``);
- modules without side effects, :data:`SIDE_EFFECT_FREE`: ``__future__``, typing, dataclasses,
  enum, itertools, collections, functools (for ``partial``; its caches stay denied as
  ``gate: output cache``) and operator (its getter factories ``attrgetter`` and
  ``methodcaller``, which reach any attribute by a string, stay denied as
  ``gate: dynamic getattr``);
- the setting ``accelopt.gate.allowModules``.

Anything else is ``gate: module not allowed``. A module that the denylist names
(:data:`.rules.FORBIDDEN_NAMES`) keeps its own, more telling rule (``importlib`` is
``gate: dynamic import``). The same allowlist applies to a module reached through an attribute
of another: torch, triton and numpy hold the modules they import as attributes
(``torch.os``, ``numpy.ctypeslib.ctypes``, ``triton.runtime.build.subprocess``), so a name
whose part after the first is one of :data:`REEXPORTED` is judged as that module's name
(``torch.os.system`` as ``os.system``).

The denylist inside the kernel stack, :data:`STACK_DENIED`, was found by reading the installed
packages (torch 2.13, triton 3.9, numpy 2.4; ``site-packages``), not from an example:

numpy
    ``numpy.ctypeslib`` (``load_library`` dlopens any shared library; ``as_ctypes`` hands out
    raw pointers); an array's ``.ctypes`` attribute (``numpy/_core/_internal.py``: its
    ``_ctypes`` is the ``ctypes`` module itself, so ``a.ctypes._ctypes.CDLL(None)`` is libc);
    ``numpy.lib.stride_tricks.as_strided`` (a view with any strides, unchecked: reads and writes
    outside the array) and the array interfaces ``__array_interface__`` /
    ``__array_struct__`` / ``__cuda_array_interface__``, accessed or defined in a class (an
    object that has one makes ``np.asarray`` / ``torch.as_tensor`` read and write the address
    it names);
    ``numpy.lib.format`` / ``numpy.lib.npyio`` / ``numpy.lib._datasource`` and
    ``np.load/save/savez/savez_compressed/savetxt/loadtxt/genfromtxt/fromregex/fromfile/memmap
    /DataSource``, ``ndarray.tofile``/``dump``, ``numpy.ma`` and ``numpy.rec``'s ``fromfile``
    / ``load`` / ``dump`` (files and pickles); ``numpy.f2py`` and ``numpy.distutils`` (run a
    compiler, build and import extension modules); ``numpy.testing`` (``extbuild`` compiles
    and imports C code, ``tempdir``/``temppath`` make files, ``runstring`` execs a string) and
    ``numpy.test`` (runs pytest).
torch
    ``torch.utils.cpp_extension`` (``load``/``load_inline``: compile and load C++/CUDA),
    ``torch.ops.load_library`` / ``torch.classes.load_library`` / ``torch._ops`` (dlopen),
    ``torch.cuda.jiterator`` and ``torch.cuda._compile_kernel`` (compile CUDA source strings
    at run time through NVRTC), ``torch.cuda._utils`` (``ctypes.CDLL`` handles of libcuda,
    the runtime and NVRTC; ``_cuda_load_module`` loads PTX or a cubin),
    ``torch.cuda.memory.CUDAPluggableAllocator`` / ``change_current_allocator`` (loads an
    allocator from a ``.so``), ``torch.cuda.memory._dump_snapshot`` / ``_save_segment_usage``
    / ``_save_memory_usage`` / ``_record_memory_history`` (write snapshot files),
    ``torch.cuda.tunable`` (reads and writes its results file), ``torch.cuda.gds`` (GPUDirect
    Storage file reads and writes), ``torch.cuda._memory_viz``; ``torch.hub`` and
    ``torch.utils.model_zoo`` (download and run code), ``torch.save/load/from_file``,
    ``torch.serialization``, ``torch.jit.save/load``, ``torch.jit.CompilationUnit`` (compiles a
    source string), ``torch.package``, ``torch.export`` / ``torch._export`` / ``torch.onnx``
    (write model files); ``torch.compile``, ``torch.compiler`` (``save_cache_artifacts``),
    ``torch._dynamo`` and ``torch._inductor`` (``codecache``: ``CppCodeCache.load`` compiles and
    dlopens C++, ``PyCodeCache.load`` writes and imports Python; the compile cache under the
    user's cache directory; compile worker subprocesses), ``torch.fx`` (generates and execs
    Python source), ``torch._logging`` (log files), ``torch._strobelight`` and
    ``torch.utils._strobelight`` / ``torch.utils.collect_env`` / ``torch.utils.benchmark``
    (subprocesses; the benchmark's valgrind wrapper compiles C++), ``torch.utils.data``
    (``DataLoader`` worker processes), ``torch.utils.file_baton`` / ``_filelock`` /
    ``_content_store`` / ``hipify`` / ``show_pickle`` / ``model_dump`` / ``bundled_inputs`` /
    ``mobile_optimizer`` / ``viz`` / ``_get_clean_triton`` / ``tensorboard`` (files),
    ``torch.profiler`` / ``torch.autograd.profiler`` (trace files; and they observe the
    timing), ``torch.testing._internal`` (subprocesses, files), ``torch.distributed`` and
    ``torch.multiprocessing`` (processes, sockets); in ``torch._C``: ``PyTorchFileReader`` /
    ``PyTorchFileWriter`` (zip files), ``_load_for_lite_interpreter``,
    ``_load_jit_module_from_file``, ``_load_mobile_module_from_file``, ``_save_jit_module``,
    ``_save_mobile_module``, ``_pickle_save``, ``_pickle_load_obj``, ``_gds_load_storage``,
    ``_gds_save_storage``, ``_cuda_tunableop_*``, ``_valgrind_toggle_and_dump_stats``,
    ``import_ir_module``, ``_dispatch_library``; a tensor's or storage's shared-memory file
    methods (``share_memory_``, ``_share_filename_cpu_``, ``_share_fd_cpu_``,
    ``_new_shared*``, ``_new_using_*``: files in /dev/shm and the ``torch_shm_manager``
    process).
triton
    ``triton.runtime.cache`` (``get_cache_manager`` / ``get_override_manager`` /
    ``get_dump_manager`` and ``FileCacheManager.put``: write into the compile cache under the
    user's cache directory, which later evaluations and the compile stage trust;
    ``RemoteCacheBackend`` / ``RedisRemoteCacheBackend``: network), ``triton.runtime.build``
    (``compile_module_from_src`` and friends run the C compiler and import the ``.so``),
    ``triton.backends`` (``*.driver``: ``compile_module_from_src``, ``load_binary`` loads a
    cubin), ``triton.compile`` / ``triton.compiler`` (compile any source or IR file into the
    cache; ``make_launcher`` builds a native launcher), ``triton.tools`` except
    ``tensor_descriptor`` (``compile``/``link`` write C files, ``disasm`` runs cuobjdump,
    ``build_extern`` runs clang), ``triton.knobs``' cache / build / compilation / autotuning /
    nvidia / amd / proton parts, ``setenv`` and launch / load / JIT hooks (cache directories,
    the compiler binaries run, environment writes, code run around every launch),
    ``triton.profiler`` (proton: profile files, hooks), ``triton.testing``'s ``nvsmi``,
    ``set_gpu_clock``, ``cuda_memcheck``, ``get_dram_gbps``, ``get_max_tensorcore_tflops``,
    ``get_max_simd_tflops`` (run nvidia-smi / cuda-memcheck) and ``perf_report`` / ``Mark`` /
    ``Benchmark`` (write result files), ``triton._C`` and ``triton._filecheck`` /
    ``triton._test_runner`` (subprocesses).

:data:`STACK_ATTRIBUTES` are attribute names distinctive enough to deny on any object, so that
an alias the gate cannot resolve (``m = np; m.ctypeslib.load_library``) is caught too.
"""

from __future__ import annotations

#: The kernel stack: every module under these may be imported (the denylist still applies).
KERNEL_STACK = ("torch", "triton", "numpy", "math", "neuronxcc.nki")

#: Modules without side effects that any candidate may import.
SIDE_EFFECT_FREE = (
    "__future__",
    "typing",
    "dataclasses",
    "enum",
    "itertools",
    "collections",
    "functools",
    "operator",
)

#: Parts of the kernel stack that load native code, start processes, or read or write files and
#: caches, by the rule each is denied under (module docstring): ``{rule group: names}``; the
#: groups are those of :data:`.rules.FORBIDDEN_NAMES`.
STACK_DENIED = {
    "native": (
        "numpy.ctypeslib numpy.f2py numpy.distutils numpy.testing numpy.test "
        "numpy.lib.stride_tricks.as_strided numpy.lib._stride_tricks_impl.as_strided "
        "numpy._core._internal numpy.core._internal "
        "torch.ops.load_library torch.classes.load_library torch._ops torch._classes "
        "torch.cuda.jiterator torch.cuda._compile_kernel torch.cuda._utils "
        "torch.cuda.memory.CUDAPluggableAllocator "
        "torch.cuda.CUDAPluggableAllocator torch.cuda.memory.change_current_allocator "
        "torch.cuda.change_current_allocator torch.compile torch.compiler torch._dynamo "
        "torch._inductor torch.utils.benchmark torch.testing._internal "
        "torch._C._load_for_lite_interpreter torch._C._load_jit_module_from_file "
        "torch._C._load_jit_module_from_bytes torch._C._load_mobile_module_from_file "
        "torch._C._load_mobile_module_from_bytes torch._C.import_ir_module "
        "torch._C._dispatch_library torch._C._valgrind_toggle_and_dump_stats "
        "triton.runtime.build triton.backends triton.compile triton.compiler triton._C "
        "triton.tools.compile triton.tools.link triton.tools.disasm triton.tools.build_extern "
        "triton.tools.extra triton.tools.triton_to_gluon_translator triton.tools.gsan "
        "triton.knobs.build triton.knobs.nvidia triton.knobs.amd "
        "triton.knobs.runtime.launch_enter_hook triton.knobs.runtime.launch_exit_hook "
        "triton.knobs.runtime.kernel_load_start_hook triton.knobs.runtime.kernel_load_end_hook "
        "triton.knobs.runtime.kernel_unload_hook triton.knobs.runtime.jit_cache_hook "
        "triton.knobs.runtime.jit_post_compile_hook "
        "triton.knobs.runtime.add_stages_inspection_hook"
    ),
    "files": (
        "numpy.lib._datasource numpy.lib._format_impl numpy.lib._npyio_impl numpy.ma.dump "
        "numpy.ma.dumps numpy.ma.load numpy.ma.loads numpy.ma.fromfile numpy.ma.core.dump "
        "numpy.ma.core.load numpy.ma.core.fromfile numpy.rec.fromfile numpy._core.records "
        "numpy.core.records numpy._core.multiarray.fromfile numpy.lib.format.open_memmap "
        "torch.hub torch.utils.model_zoo torch.jit.CompilationUnit torch.export torch._export "
        "torch.onnx torch.fx torch._logging torch.cuda.memory._dump_snapshot "
        "torch.cuda.memory._save_segment_usage torch.cuda.memory._save_memory_usage "
        "torch.cuda.memory._record_memory_history torch.cuda._memory_viz torch.cuda.tunable "
        "torch.cuda.gds torch.utils.file_baton torch.utils._filelock torch.utils._content_store "
        "torch.utils.hipify torch.utils.show_pickle torch.utils.model_dump "
        "torch.utils.bundled_inputs torch.utils.mobile_optimizer torch.utils.viz "
        "torch.utils._get_clean_triton torch.utils.serialization torch.profiler "
        "torch.autograd.profiler torch._C.PyTorchFileReader torch._C.PyTorchFileWriter "
        "torch._C._save_jit_module torch._C._save_mobile_module torch._C._pickle_save "
        "torch._C._pickle_load_obj torch._C._gds_load_storage torch._C._gds_save_storage "
        "torch._C._cuda_tunableop_set_filename torch._C._cuda_tunableop_read_file "
        "torch._C._cuda_tunableop_write_file torch._appdirs "
        "triton.runtime.cache triton.knobs.cache triton.knobs.compilation "
        "triton.knobs.autotuning triton.knobs.proton triton.knobs.setenv triton.profiler "
        "triton.testing.perf_report triton.testing.Mark triton.testing.Benchmark"
    ),
    "concurrency": (
        "torch.utils.data torch._strobelight torch.utils._strobelight torch.utils.collect_env "
        "triton.testing.nvsmi triton.testing.set_gpu_clock triton.testing.cuda_memcheck "
        "triton.testing.get_dram_gbps triton.testing.get_max_tensorcore_tflops "
        "triton.testing.get_max_simd_tflops triton._filecheck triton._test_runner "
        "triton._compile_warmup_pool"
    ),
}

#: Names under :data:`STACK_DENIED` that kernel libraries use and that do none of it: queries
#: whether a compiler traces the call, the decorators that keep one out, the compile error class.
STACK_EXCEPTIONS = frozenset(
    (
        "torch.compiler.is_compiling",
        "torch.compiler.is_dynamo_compiling",
        "torch.compiler.disable",
        "torch._dynamo.is_compiling",
        "torch._dynamo.disable",
        "triton.compiler.errors",
        "triton.compiler.CompilationError",
    )
)

#: The array interfaces: an object that has one hands numpy / torch a raw address to read and
#: write (``np.asarray``, ``torch.as_tensor``), any address in the process.
RAW_MEMORY = ("__array_interface__", "__array_struct__", "__cuda_array_interface__")

#: Attribute names denied on any object (module docstring): ``{rule group: names}``.
STACK_ATTRIBUTES = {
    "native": (
        f"{' '.join(RAW_MEMORY)} ctypes _ctypes ctypeslib load_library cpp_extension load_inline compile_module_from_src "
        "compile_module_from_file compile_so_from_src compile_so_from_file load_binary jiterator "
        "CUDAPluggableAllocator"
    ),
    "files": (
        "fromfile memmap open_memmap savez savez_compressed savetxt loadtxt genfromtxt fromregex "
        "DataSource get_cache_manager get_override_manager get_dump_manager FileCacheManager "
        "share_memory_ _share_filename_cpu_ _share_fd_cpu_ _new_shared _new_shared_filename_cpu "
        "_new_shared_fd_cpu _new_using_filename_cpu _new_using_fd_cpu _dump_snapshot"
    ),
}

#: Modules that torch, triton and numpy hold as attributes under these names (read from the
#: installed packages: a module-valued attribute of a ``torch.*`` / ``triton.*`` / ``numpy.*``
#: module whose module is outside the stack; tests/onsite/test_gate_allowlist.py checks the
#: table against the packages installed): ``{attribute: module}``. Names that are also a
#: legitimate part of the stack (``torch.random``, ``torch.signal``, ``numpy.copy``,
#: ``triton.language.math``, ``torch.types``, ``torch.fx.traceback``) are left out.
REEXPORTED = {
    "_collections_abc": "collections.abc",
    "_compat_pickle": "_compat_pickle",
    "_functools": "functools",
    "_operator": "operator",
    "_osp": "os.path",
    "_thread": "_thread",
    "_warnings": "warnings",
    "argparse": "argparse",
    "ast": "ast",
    "atexit": "atexit",
    "base64": "base64",
    "builtins": "builtins",
    "concurrent": "concurrent",
    "contextlib": "contextlib",
    "copymodule": "copy",
    "copyreg": "copyreg",
    "ctypes": "ctypes",
    "dis": "dis",
    "errno": "errno",
    "fnmatch": "fnmatch",
    "gc": "gc",
    "glob": "glob",
    "gzip": "gzip",
    "hashlib": "hashlib",
    "importlib": "importlib",
    "inspect": "inspect",
    "io": "io",
    "json": "json",
    "linecache": "linecache",
    "locale": "locale",
    "logging": "logging",
    "marshal": "marshal",
    "mp": "multiprocessing",
    "multiprocessing": "multiprocessing",
    "os": "os",
    "pathlib": "pathlib",
    "pickle": "pickle",
    "pickletools": "pickletools",
    "pkgutil": "pkgutil",
    "platform": "platform",
    "posixpath": "posixpath",
    "pprint": "pprint",
    "pynvml": "pynvml",
    "python_multiprocessing": "multiprocessing",
    "queue": "queue",
    "reducer": "multiprocessing.reduction",
    "reduction": "multiprocessing.reduction",
    "shutil": "shutil",
    "socket": "socket",
    "subprocess": "subprocess",
    "sys": "sys",
    "sysconfig": "sysconfig",
    "tarfile": "tarfile",
    "tempfile": "tempfile",
    "threading": "threading",
    "tokenize": "tokenize",
    "torchgen": "torchgen",
    "unittest": "unittest",
    "urllib": "urllib",
    "uuid": "uuid",
    "warnings": "warnings",
    "weakref": "weakref",
    "zipfile": "zipfile",
    "zlib": "zlib",
}


def module_allowed(module: str, allowed: frozenset[str]) -> bool:
    """Whether the canonical dotted ``module`` is one of ``allowed`` or under one."""
    parts = module.split(".")
    return any(".".join(parts[:i]) in allowed for i in range(1, len(parts) + 1))


def allowed_modules(
    original_imports: frozenset[str], module: str | None, extra: tuple[str, ...] | list[str]
) -> frozenset[str]:
    """The modules a candidate may import: the original's imports, the kernel module's own
    top-level package (``module``: its dotted name, e.g. ``minikern.ops.rms_norm``), the kernel
    stack, the side-effect-free modules and ``extra`` (the setting ``gate.allowModules``)."""
    own = (module.split(".")[0],) if module and "." in module else ()
    return frozenset((*original_imports, *own, *KERNEL_STACK, *SIDE_EFFECT_FREE, *extra))


def reached_module(name: str) -> tuple[str, str] | None:
    """``(module, name in it)`` when the canonical dotted ``name`` reaches a module through a
    re-exported module attribute (``torch.os.system`` -> ``("os", "os.system")``), else None.
    The first re-exported part after the first one counts."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        module = REEXPORTED.get(parts[i])
        if module is not None:
            return module, ".".join([module, *parts[i + 1 :]])
    return None
