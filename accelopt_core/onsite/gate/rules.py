"""The static gate's rules: each rule's name and why, the forbidden modules, names, builtins and
attributes (:data:`RULES` lists every rule name a rejection can carry)."""

from __future__ import annotations

import ast
import re

from .stack import STACK_ATTRIBUTES, STACK_DENIED, STACK_EXCEPTIONS

#: A rule broken: ``(rule, message, 1-based candidate line or None)``.
Violation = tuple[str, str, int | None]


CONCURRENCY = ("gate: concurrency", "no threads or processes")


DYNAMIC_IMPORT = (
    "gate: dynamic import",
    "no imports by name at run time: the gate must see every module the candidate uses",
)


FILE_IO = ("gate: file I/O", "no file I/O: a result kept in a file outlives the call")


NETWORK = ("gate: network", "no network access")


LOGGING = (
    "gate: logging handlers",
    "no logging handlers or logging set-up: a handler writes files, sockets or mail outside "
    "the evaluation",
)


ENVIRONMENT = (
    "gate: environment",
    "no reads of the environment: a kernel must not depend on it, and it holds the user's secrets",
)


PROCESS = (
    "gate: process control",
    "no process control: a candidate must not change or end the process that evaluates it",
)


INTROSPECTION = (
    "gate: introspection",
    "no stack, frame or heap inspection: a candidate must not find out whether it is timed",
)


NATIVE = ("gate: ctypes", "no native code the gate cannot read")


CACHE = ("gate: output cache", "no result caches: a timed call must compute its result")


GLOBALS = (
    "gate: globals lookup",
    "no lookups in namespaces by name: the gate must see every name the candidate uses",
)


WORKER = ("gate: worker access", "a candidate must not reach into the evaluation worker")


SWALLOW = ("gate: exception swallowing", "no fallbacks that hide a failing kernel")


DYNAMIC_GETATTR = (
    "gate: dynamic getattr",
    "no attribute lookups by computed name: the gate must see every function the candidate calls",
)


EVAL = (
    "gate: eval",
    "no eval/exec/compile: code built from strings at run time is hidden from the gate",
)


SHELL = ("gate: shell", "no shells or child processes")


STREAMS = ("gate: streams", "no streams or CUDA graphs: the timing must see all the work")


MODULE_NOT_ALLOWED = (
    "gate: module not allowed",
    "a candidate imports the modules its original file imports, the kernel stack (torch, "
    "triton, numpy, math, nki) and modules without side effects (typing, dataclasses, enum, "
    "itertools, collections, functools, operator); the setting accelopt.gate.allowModules "
    "allows more",
)


def rule_table(**groups: tuple[tuple[str, str], str]) -> dict[str, tuple[str, str]]:
    """``{dotted name: (rule, why)}`` from ``group=((rule, why), "name name ...")``."""
    return {name: rule for rule, names in groups.values() for name in names.split()}


#: Modules and dotted names (canonical, after the imports) that are not allowed, with every
#: name under them: ``importlib`` covers ``importlib.import_module``.
FORBIDDEN_NAMES = rule_table(
    concurrency=(
        CONCURRENCY,
        "threading _thread multiprocessing concurrent subprocess asyncio sched "
        "torch.multiprocessing",
    ),
    imports=(
        DYNAMIC_IMPORT,
        "importlib imp runpy pkgutil zipimport code codeop sys.meta_path sys.path_hooks",
    ),
    files=(
        FILE_IO,
        "io pathlib pickle _pickle cPickle shelve sqlite3 tempfile mmap shutil dbm marshal glob "
        "fileinput fcntl zipfile tarfile gzip bz2 lzma os.open os.read os.write os.fdopen "
        "os.remove os.unlink os.rename os.replace os.makedirs os.mkdir os.rmdir os.removedirs "
        "os.listdir os.scandir os.walk os.pipe os.dup os.dup2 os.truncate os.ftruncate os.link "
        "os.symlink os.utime os.mkfifo os.mknod os.sendfile os.memfd_create os.path.exists "
        "os.path.lexists os.path.isfile os.path.isdir os.path.getsize os.path.getmtime "
        "torch.save torch.load torch.from_file numpy.save numpy.savez numpy.savez_compressed "
        "numpy.load numpy.memmap numpy.fromfile numpy.savetxt numpy.loadtxt numpy.genfromtxt "
        "numpy.fromregex numpy.DataSource numpy.lib.format numpy.lib.npyio torch.jit.save "
        "torch.jit.load torch.serialization torch.package torch.utils.tensorboard codecs.open "
        "netrc mailbox",
    ),
    network=(
        NETWORK,
        "socket http urllib urllib3 requests ssl ftplib smtplib xmlrpc selectors select "
        "socketserver httpx aiohttp telnetlib imaplib poplib nntplib webbrowser "
        "torch.distributed",
    ),
    logging=(
        LOGGING,
        "logging.FileHandler logging.StreamHandler logging.Handler logging.basicConfig "
        "logging.handlers logging.config",
    ),
    environment=(
        ENVIRONMENT,
        "os.environ os.environb os.getenv os.getenvb os.path.expandvars posix.environ",
    ),
    process=(
        PROCESS,
        "signal atexit resource pty posix os.kill os.killpg os._exit os.abort os.setsid "
        "os.setpgid os.setpgrp os.nice os.chdir os.fchdir os.chroot os.putenv os.unsetenv "
        "os.setuid os.setgid os.seteuid os.setegid os.setreuid os.setregid os.wait os.waitpid "
        "os.sched_setaffinity os.register_at_fork os.environ.update os.environ.setdefault "
        "os.environ.pop os.environ.popitem os.environ.clear os.environ.__setitem__ "
        "os.environ.__delitem__ sys.exit sys.setrecursionlimit sys.setswitchinterval "
        "sys.addaudithook sys.setdlopenflags",
    ),
    introspection=(
        INTROSPECTION,
        "inspect gc traceback dis tracemalloc faulthandler sys._getframe sys._current_frames "
        "sys.settrace sys.setprofile sys.gettrace sys.getprofile sys.monitoring sys.call_tracing",
    ),
    native=(NATIVE, "ctypes _ctypes cffi torch.utils.cpp_extension torch.ops.load_library"),
    cache=(
        CACHE,
        "functools.lru_cache functools.cache functools.cached_property cachetools joblib "
        "diskcache weakref",
    ),
    globals=(GLOBALS, "builtins __builtin__ __main__ sys.modules"),
    worker=(WORKER, "accelopt_core accelopt_cli accelopt_server"),
    swallow=(SWALLOW, "contextlib.suppress contextlib.ExitStack contextlib.AsyncExitStack"),
    getattr=(DYNAMIC_GETATTR, "operator.attrgetter operator.methodcaller"),
    # issue 53: the parts of torch, triton and numpy that load native code, start processes, or
    # read or write files and caches (what was read, and why: .stack)
    stack_native=(NATIVE, STACK_DENIED["native"]),
    stack_files=(FILE_IO, STACK_DENIED["files"]),
    stack_concurrency=(CONCURRENCY, STACK_DENIED["concurrency"]),
    streams=(
        STREAMS,
        "torch.cuda.Stream torch.cuda.stream torch.cuda.set_stream torch.cuda.graph "
        "torch.cuda.CUDAGraph torch.cuda.graphs torch.Stream",
    ),
)


SHELL_NAMES = re.compile(r"^os\.(system|popen|fork|forkpty|spawn\w*|exec\w*|posix_spawn\w*)$")


#: Builtins by their bare name (unless the module binds the name itself).
BUILTINS = {
    "eval": EVAL,
    "exec": EVAL,
    "compile": EVAL,
    "__import__": DYNAMIC_IMPORT,
    "open": FILE_IO,
    "globals": GLOBALS,
    "vars": GLOBALS,
    "locals": GLOBALS,
    "__builtins__": GLOBALS,
    "breakpoint": INTROSPECTION,
    "exit": PROCESS,
    "quit": PROCESS,
}


#: Attributes not allowed on any object.
ATTRIBUTES = {
    **{a: INTROSPECTION for a in "f_back f_locals f_globals f_code f_builtins tb_frame".split()},
    **{a: INTROSPECTION for a in "gi_frame cr_frame ag_frame __traceback__".split()},
    **{a: GLOBALS for a in "__globals__ __builtins__ __dict__ __subclasses__".split()},
    **{a: GLOBALS for a in "__code__ __closure__".split()},
    "tofile": FILE_IO,
    "from_file": FILE_IO,
    "dump": FILE_IO,
    # issue 53: an alias the gate cannot resolve (``m = np; m.ctypeslib``) still names these
    **dict.fromkeys(STACK_ATTRIBUTES["native"].split(), NATIVE),
    **dict.fromkeys(STACK_ATTRIBUTES["files"].split(), FILE_IO),
    # the lookups that reach any attribute or module by a string
    **dict.fromkeys("__getattribute__ __getattr__".split(), DYNAMIC_GETATTR),
    **dict.fromkeys("__loader__ __spec__".split(), DYNAMIC_IMPORT),
    "__self__": GLOBALS,
}


LOW_PRECISION = re.compile(r"^(float16|bfloat16|half|fp16|bf16|float8\w*|fp8\w*)$", re.I)


LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the line ends the tokenizer knows (not \f, \v, ...)


#: Every rule name the gate emits (``EvalResult.rule`` of a gate rejection).
RULES = (
    "gate: no entry",
    "gate: no kernel",
    "gate: no launch",
    CONCURRENCY[0],
    STREAMS[0],
    SHELL[0],
    CACHE[0],
    "gate: try/except",
    SWALLOW[0],
    EVAL[0],
    DYNAMIC_IMPORT[0],
    DYNAMIC_GETATTR[0],
    GLOBALS[0],
    FILE_IO[0],
    NETWORK[0],
    LOGGING[0],
    ENVIRONMENT[0],
    PROCESS[0],
    INTROSPECTION[0],
    NATIVE[0],
    WORKER[0],
    MODULE_NOT_ALLOWED[0],
    "gate: monkey-patching",
    "gate: shadowed import",
    "gate: mutable default",
    "gate: module state",
    "gate: function attribute",
    "gate: global state",
    "gate: module-level callable",
    "gate: dead code",
    "gate: torch compute",
    "gate: precision downcast",
    "gate: unreadable",
)


def name_rule(name: str) -> tuple[str, str] | None:
    """``(rule, why)`` for a canonical dotted name (or a module) the table forbids: the name or
    a module it is under; None when it is allowed."""
    if SHELL_NAMES.match(name):
        return SHELL
    parts = name.split(".")
    if any(".".join(parts[:i]) in STACK_EXCEPTIONS for i in range(2, len(parts) + 1)):
        return None  # a part of the kernel stack that kernels use and that is harmless
    while True:
        found = FORBIDDEN_NAMES.get(name)
        if found is not None or "." not in name:
            return found
        name = name.rsplit(".", 1)[0]


def imported_paths(node: ast.Import | ast.ImportFrom) -> list[str]:
    """What an import statement names: ``import a.b`` -> ``a.b``; ``from a import b`` -> ``a``
    and ``a.b``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    mod = node.module or ""
    return [mod] + [f"{mod}.{a.name}" for a in node.names]


def short_source(node: ast.AST, limit: int = 60) -> str:
    """The source of ``node``, shortened for a message."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."
