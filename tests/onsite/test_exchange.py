"""Tensors between the judge's processes by reference (issue 50): sealed shared-memory segments
(accelopt_core.onsite.runtime.exchange) passed as descriptors over the peers' channel
(accelopt_core.onsite.runtime.channel). The trust rules of the README's "The tensor exchange",
one test each, and the checks on what a peer sends."""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import socket

import numpy as np
import pytest
import torch

from accelopt_core.onsite.runtime import exchange
from accelopt_core.onsite.runtime.channel import Channel, ChannelError, segment_socketpair


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_value_keeps_its_structure_and_foreign_types_are_marked():
    class Sub(torch.Tensor):
        pass

    value = (torch.arange(4.0), [np.arange(3), 2, None], {"k": torch.ones(2).as_subclass(Sub)})
    seg = exchange.share(value, torch=torch, numpy=np)
    back = seg.value(torch)
    assert type(back) is tuple and type(back[1]) is list and type(back[2]) is dict
    assert type(back[0]) is torch.Tensor and torch.equal(back[0], value[0])
    assert type(back[1][0]) is np.ndarray and back[1][0].tolist() == [0, 1, 2]
    assert back[1][1:] == [2, None]
    where, name = exchange.foreign(back)
    assert where == " #2 #k" and name.endswith(".Sub")
    assert exchange.foreign(back[:2]) is None
    seg.close()


def test_views_keep_strides_offsets_aliasing_and_alignment():
    wide = torch.randn(16, 80)
    sliced = wide[:, 8:72]  # a slice of a wider buffer, with a storage offset
    col = torch.randn(64, 16).t()  # column-major
    alias = wide[3]  # shares wide's storage
    bf = torch.randn(5, 7).to(torch.bfloat16)
    flags = torch.tensor([True, False, True])
    empty = torch.empty(0, 4)
    value = (sliced, col, alias, bf, flags, empty, torch.tensor(3.5))
    back = exchange.share(value, torch=torch).value(torch)
    for got, want in zip(back, value, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.stride() == want.stride() and got.storage_offset() == want.storage_offset()
        assert torch.equal(got, want)
    assert back[0].untyped_storage().data_ptr() == back[2].untyped_storage().data_ptr()
    assert back[0].untyped_storage().nbytes() == wide.untyped_storage().nbytes()
    assert all(t.untyped_storage().data_ptr() % exchange.ALIGN == 0 for t in back if t.numel())


def test_views_keep_strides_and_aliasing_when_mapped_onto_another_device():
    """On a GPU each storage is copied to the device once and the tensors view the copy, so a
    sliced or column-major derived input reaches a CUDA candidate as the same view. Shown here
    on torch's ``meta`` device (no data, the same code path as ``cuda``)."""
    wide = torch.randn(16, 80)
    value = (wide[:, 8:72], torch.randn(64, 16).t(), wide[3])
    back = exchange.share(value, torch=torch).value(torch, "meta")
    for got, want in zip(back, value, strict=True):
        assert got.device.type == "meta" and got.shape == want.shape
        assert got.stride() == want.stride() and got.storage_offset() == want.storage_offset()
    assert back[0].untyped_storage().nbytes() == wide.untyped_storage().nbytes()


def test_a_segment_is_sealed_so_nobody_can_write_it_after_it_was_sent():
    """The sender keeps its descriptor: writing through it, growing it or mapping it writable
    and shared all fail (the kernel's seals), so what the judge reads cannot change later."""
    seg = exchange.share((torch.ones(1024),), torch=torch)
    assert seg.sealed
    with pytest.raises(OSError) as err:
        os.pwrite(seg.fd, b"\0" * 8, 0)
    assert err.value.errno == errno.EPERM
    with pytest.raises(OSError):
        os.ftruncate(seg.fd, 1)
    with pytest.raises(OSError):
        mmap.mmap(seg.fd, seg.nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    with pytest.raises(OSError):  # nor can the seals be lifted
        fcntl.fcntl(seg.fd, fcntl.F_ADD_SEALS, 0)
    assert torch.equal(seg.value(torch)[0], torch.ones(1024))


def test_a_receivers_writes_stay_in_its_own_pages():
    """A candidate that writes into its inputs changes its private mapping only: the judge's
    mapping of the same segment, and the segment, keep the original values."""
    seg = exchange.share((torch.ones(4096),), torch=torch)
    (candidates,) = seg.value(torch)
    (judges,) = seg.value(torch)
    candidates.fill_(7.0)
    assert torch.equal(judges, torch.ones(4096))
    assert torch.equal(seg.value(torch)[0], torch.ones(4096))


def test_an_unsealed_segment_is_copied_when_it_is_received():
    """Where a segment cannot be sealed (no memfd), or a hostile sender did not seal it, the
    receiver copies it at once: the sender's later writes do not reach the copy."""
    layout = exchange.share((torch.ones(8),), torch=torch).layout
    fd = os.memfd_create("unsealed")
    os.write(fd, torch.ones(8).numpy().tobytes())
    seg = exchange.adopt(os.dup(fd), layout)
    assert not seg.sealed
    (got,) = seg.value(torch)
    os.pwrite(fd, torch.zeros(8).numpy().tobytes(), 0)  # the sender writes after sending
    assert torch.equal(got, torch.ones(8))
    os.close(fd)


def test_only_the_bytes_of_an_output_view_are_sent():
    """An output that views a larger buffer (a kernel that wrote past its output into the
    rest of the buffer) is sent as its own values: the rest never reaches the judge."""
    from accelopt_core.onsite.contestant.process import _compact

    buf = torch.full((2048,), float("nan"))
    out = buf[:1024].fill_(1.0)
    seg = exchange.share(_compact(torch, out), torch=torch)
    assert seg.nbytes == 1024 * 4
    assert torch.equal(seg.value(torch), torch.ones(1024))


def _raw(size: int, data: bytes = b"") -> int:
    fd = os.memfd_create("raw", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if data:
        os.pwrite(fd, data, 0)
    return fd


def _layout(**tensor) -> dict:
    t = {"s": 0, "dtype": "float32", "shape": [4], "stride": [1], "offset": 0, **tensor}
    return {"size": 16, "spec": {"t": 0}, "storages": [[0, 16]], "tensors": [t]}


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (_layout(shape=[5]), "past the end of its storage"),
        (_layout(offset=1), "past the end of its storage"),
        (_layout(shape=[2, 2], stride=[4, 1]), "past the end of its storage"),
        (_layout(dtype="object"), "dtype 'object' is not accepted"),
        (_layout(s=1), "storage index 1 out of range"),
        (_layout(stride=[-1]), "malformed layout: stride"),
        ({**_layout(), "storages": [[8, 16]]}, "past the end of the segment"),
        ({**_layout(), "size": 32}, "the layout says 32 bytes"),
        ({**_layout(), "spec": {"t": 3}}, "tensor index 3 out of range"),
        ({**_layout(), "extra": 1}, "malformed layout"),
    ],
)
def test_a_malformed_layout_is_refused(layout, message):
    before = _fds()
    with pytest.raises(exchange.ExchangeError, match=message):
        exchange.adopt(_raw(16), layout).value(torch)
    assert _fds() == before  # the descriptor was closed


def test_a_descriptor_that_is_not_a_file_is_refused():
    r, w = os.pipe()
    with pytest.raises(exchange.ExchangeError, match="not a regular file"):
        exchange.adopt(r, _layout())
    os.close(w)
    with pytest.raises(OSError):
        os.fstat(r)  # closed by adopt


def _pair() -> tuple[Channel, Channel]:
    a_r, b_w = os.pipe()
    b_r, a_w = os.pipe()
    a_s, b_s = segment_socketpair()
    return Channel(a_r, a_w, a_s), Channel(b_r, b_w, b_s)


def test_segments_cross_a_channel_between_processes_without_leaking_descriptors():
    judge, peer = _pair()
    before = _fds()
    pid = os.fork()
    if pid == 0:
        try:
            judge.close()
            msg = peer.recv()
            (x,) = msg["inputs"].value(torch)
            # no parallel torch op here: a thread pool the parent started is not in the fork
            head = x[:8] * 2
            out = exchange.share((x, head, float(head.sum())), torch=torch)
            peer.send({"done": True, "outputs": out, "list": [out, out]})
        finally:
            os._exit(0)
    peer.close()
    x = torch.arange(1 << 20, dtype=torch.float32)
    seg = exchange.share((x,), torch=torch)
    judge.send({"op": "check", "inputs": seg})
    answer = judge.recv(30)
    os.waitpid(pid, 0)
    same, head, total = answer["outputs"].value(torch)
    assert torch.equal(same, x) and torch.equal(head, x[:8] * 2) and total == float(x[:8].sum() * 2)
    assert all(isinstance(s, exchange.Segment) for s in answer["list"])
    for s in (seg, answer["outputs"], *answer["list"]):
        s.close()
    judge.close()
    assert _fds() <= before  # every segment, socket and pipe closed


def test_a_peer_that_announces_more_descriptors_than_it_sends_is_invalid():
    judge, peer = _pair()
    seg = exchange.share((torch.ones(2),), torch=torch)
    with socket.socket(fileno=os.dup(peer.sock)) as sock:
        socket.send_fds(sock, [b"s"], [seg.fd])
    os.write(peer.wfd, b'{"done":true,"a":{"$seg":0,"layout":null},"$nfds":2}\n')
    before = _fds()
    with pytest.raises(ChannelError) as err:
        judge.recv(5)
    assert err.value.kind == "invalid" and "1 descriptors where 2" in str(err.value)
    assert _fds() == before


def test_a_segment_entry_without_descriptors_is_invalid():
    judge, peer = _pair()
    os.write(peer.wfd, b'{"done":true,"a":{"$seg":0,"layout":{}}}\n')
    with pytest.raises(ChannelError, match="malformed segment entry"):
        judge.recv(5)


def test_a_peer_that_announces_descriptors_and_sends_none_times_out():
    judge, peer = _pair()
    os.write(peer.wfd, b'{"done":true,"$nfds":1}\n')
    with pytest.raises(ChannelError) as err:
        judge.recv(0.3)
    assert err.value.kind == "timeout"


def _tree(root: int) -> set[int]:
    """``root`` and every process descending from it."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = open(f"/proc/{name}/stat").read()
                parents[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def _segments_held(pids: set[int]) -> list[str]:
    """The exchange's memfds open in ``pids`` (``pid:fd``); processes whose fds this user cannot
    read are skipped."""
    held = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if "accelopt-exchange" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                    held.append(f"{pid}:{fd}")
            except OSError:
                pass
    return held


@pytest.mark.slow
@pytest.mark.parametrize("store_mb", [0, None], ids=["store off", "store on"])
def test_crashing_candidates_leave_no_shared_memory_behind(store_mb):
    """Issue 50: candidates that die mid-call (a segfault, an exit) on a warm worker leave no
    segment open in the worker's processes and nothing in /dev/shm; the next evaluation on the
    same worker is judged as usual. With the reference store on (item 4) the warm worker
    itself holds the inputs and references it keeps, and nothing more: the second crash,
    on the same cases, adds none."""
    from tests.onsite.runs import WarmRunner, make_request, src

    shm_before = {n for n in os.listdir("/dev/shm") if n.startswith("accelopt")}
    runner = WarmRunner()
    zygote = runner.proc.pid
    kept = []
    try:
        for name, status in (("segfault.py", "runtime_error"), ("exit3.py", "runtime_error")):
            result = runner.run(make_request(src(name), reference_store_mb=store_mb))
            assert result.status == status, result.message
            held = _segments_held(_tree(zygote))
            assert [h for h in held if not h.startswith(f"{zygote}:")] == []
            kept.append(len(held))
        assert kept[0] == kept[1] and (kept[0] == 0) == (store_mb == 0)
        result = runner.run(make_request(src("add.py"), reference_store_mb=store_mb))
        assert result.status == "ok", result.message
        held = _segments_held(_tree(zygote))
        assert [h for h in held if not h.startswith(f"{zygote}:")] == []
        assert (len(held) == 0) == (store_mb == 0)
    finally:
        assert runner.close() == 0
    assert {n for n in os.listdir("/dev/shm") if n.startswith("accelopt")} <= shm_before


def test_a_stream_socket_carries_segments_where_sequenced_packets_are_missing():
    """macOS has no SOCK_SEQPACKET for Unix sockets: :func:`segment_socketpair` falls back to a
    stream, on which each message's descriptors still arrive with that message."""
    a_r, b_w = os.pipe()
    b_r, a_w = os.pipe()
    a_s, b_s = (s.detach() for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
    judge, peer = Channel(a_r, a_w, a_s), Channel(b_r, b_w, b_s)
    for i in range(3):
        judge.send({"i": i, "x": exchange.share((torch.full((4,), float(i)),), torch=torch)})
        got = peer.recv()
        assert got["i"] == i and torch.equal(got["x"].value(torch)[0], torch.full((4,), float(i)))
        peer.send({"back": [exchange.share(torch.ones(i + 1), torch=torch)] * 2})
        back = judge.recv(5)["back"]
        assert [s.value(torch).numel() for s in back] == [i + 1, i + 1]
    judge.close()
    peer.close()
