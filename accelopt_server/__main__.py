"""``accelopt-lsp`` / ``python -m accelopt_server``: start the language server.

stdio by default (what editors use); ``--tcp HOST:PORT`` listens on a socket for debugging.
In stdio mode the JSON-RPC stream gets its own copy of the standard output and file
descriptor 1 is pointed at standard error, so a stray ``print`` (from a kernel module, a library,
a child process) cannot corrupt the protocol.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (e.g. 127.0.0.1:2087), got {value!r}")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and serve until the client exits. Returns the exit status."""
    from accelopt_core import __version__

    parser = argparse.ArgumentParser(
        prog="accelopt-lsp",
        description="AccelOpt language server for Triton and NKI kernel files (LSP over stdio).",
    )
    parser.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (default)")
    parser.add_argument(
        "--tcp", metavar="HOST:PORT", type=_host_port, help="serve over TCP instead"
    )
    parser.add_argument(
        "--log-file", metavar="FILE", help="also write the server's debug log to FILE"
    )
    parser.add_argument("--version", action="version", version=f"accelopt-lsp {__version__}")
    args = parser.parse_args(argv)

    if args.log_file:
        handler = logging.FileHandler(args.log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(logging.DEBUG)

    from .server import create_server

    server = create_server()
    if args.tcp:
        host, port = args.tcp
        server.start_tcp(host, port)
        return 0
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    server.start_io(sys.stdin.buffer, protocol_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
