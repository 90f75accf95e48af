"""The programs a target starts (top room: may import every other): ``worker`` (the cold
entry), ``supervisor`` (fork, pipes, timeout, a dead child's classification), ``child`` (the
forked process's set-up and dispatch to the language's evaluation), ``zygote`` (the warm fork
server), ``warmstack`` (what it imports, without CUDA), ``warmhost`` (a zygote kept by the ssh
agent or the Ray actor) and ``agent`` (the long-lived ssh/Ray agent)."""
