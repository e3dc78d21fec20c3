#!/usr/bin/python3
"""Traffic endpoints for fabric tests: TCP sink/sender/echo, UDP sink/sender, ICMP ping.

Run inside a host namespace (`fabric.py exec --state F h0 -- traffic.py ...`). Servers
print READY on stdout once listening, then one JSON line per result; clients print one
JSON line. Only the standard library is used, so no ping binary is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import threading
import time


def endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"bad endpoint '{text}': expected IP:PORT")
    return host, int(port)


def emit(doc: dict) -> None:
    print(json.dumps(doc), flush=True)


def ready() -> None:
    print("READY", flush=True)


def listen_tcp(bind: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((bind, port))
    s.listen(64)
    return s


def cmd_tcp_sink(a) -> int:
    """Counts bytes per connection; the rate is measured from first to last byte."""
    srv = listen_tcp(a.bind, a.port)
    ready()
    for _ in range(a.conns):
        conn, peer = srv.accept()
        with conn:
            total, first, last = 0, None, None
            while True:
                data = conn.recv(1 << 20)
                if not data:
                    break
                now = time.monotonic()
                first = first if first is not None else now
                last = now
                total += len(data)
        secs = (last - first) if first is not None else 0.0
        emit({"peer": list(peer), "bytes": total, "seconds": round(secs, 6),
              "mbit_per_s": round(total * 8 / secs / 1e6, 3) if secs > 0 else 0.0})
    return 0


def connect_tcp(bind: str, sport: int, to: tuple[str, int], timeout: float) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((bind, sport))  # the source port is the path entropy: it picks the spine
    s.settimeout(timeout)
    s.connect(to)
    return s


def cmd_tcp_send(a) -> int:
    chunk = b"\xa5" * 65536
    start = time.monotonic()
    try:
        s = connect_tcp(a.bind, a.sport, a.to, a.timeout)
    except OSError as exc:
        emit({"ok": False, "error": str(exc)})
        return 1
    local = s.getsockname()
    sent = 0
    with s:
        try:
            while True:
                if a.bytes and sent >= a.bytes:
                    break
                if a.seconds and time.monotonic() - start >= a.seconds:
                    break
                n = min(len(chunk), a.bytes - sent) if a.bytes else len(chunk)
                s.sendall(chunk[:n])
                sent += n
        except OSError as exc:
            emit({"ok": False, "error": str(exc), "bytes": sent, "local": list(local)})
            return 1
    emit({"ok": True, "bytes": sent, "seconds": round(time.monotonic() - start, 6), "local": list(local)})
    return 0


def cmd_tcp_echo_server(a) -> int:
    srv = listen_tcp(a.bind, a.port)
    ready()

    def serve(conn: socket.socket) -> None:
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                conn.sendall(data)

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def cmd_tcp_echo_client(a) -> int:
    """Sends a distinct payload to every target and checks that it comes back unchanged."""
    results, ok = [], True
    for bind in a.bind:
        for to in a.to:
            payload = os.urandom(a.size)
            rec = {"from": bind, "to": f"{to[0]}:{to[1]}"}
            try:
                with connect_tcp(bind, 0, to, a.timeout) as s:
                    s.sendall(payload)
                    s.shutdown(socket.SHUT_WR)
                    got = bytearray()
                    while True:
                        data = s.recv(65536)
                        if not data:
                            break
                        got += data
                rec["ok"] = bytes(got) == payload
                if not rec["ok"]:
                    rec["error"] = f"echo mismatch: sent {len(payload)} bytes, got {len(got)}"
            except OSError as exc:
                rec["ok"], rec["error"] = False, str(exc)
            ok &= rec["ok"]
            results.append(rec)
    emit({"ok": ok, "results": results})
    return 0 if ok else 1


def cmd_udp_sink(a) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((a.bind, a.port))
    ready()
    seqs = set()
    s.settimeout(a.wait)
    deadline = time.monotonic() + a.max_seconds
    try:
        while time.monotonic() < deadline:
            data = s.recv(65536)
            if len(data) >= 4:
                seqs.add(struct.unpack("!I", data[:4])[0])
            s.settimeout(a.idle)  # after the first datagram, stop once the sender is quiet
    except socket.timeout:
        pass
    emit({"packets": len(seqs)})
    return 0


def cmd_udp_send(a) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((a.bind, a.sport))
    pad = b"\0" * max(0, a.size - 4)
    gap = 1.0 / a.pps
    start = time.monotonic()
    for i in range(a.count):
        s.sendto(struct.pack("!I", i) + pad, a.to)
        delay = start + (i + 1) * gap - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    emit({"sent": a.count})
    return 0


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def cmd_ping(a) -> int:
    """ICMP echo over a raw socket bound to one NIC address; counts replies by sequence."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.bind((a.bind, 0))
    ident = os.getpid() & 0xFFFF
    replies: set[int] = set()
    for seq in range(a.count):
        body = struct.pack("!d", time.time()) + b"flexiforce"
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        hdr = struct.pack("!BBHHH", 8, 0, checksum(hdr + body), ident, seq)
        s.sendto(hdr + body, (a.to, 0))
        deadline = time.monotonic() + (a.interval if seq < a.count - 1 else a.timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                pkt, src = s.recvfrom(2048)
            except socket.timeout:
                break
            ihl = (pkt[0] & 0x0F) * 4
            typ, _, _, rid, rseq = struct.unpack("!BBHHH", pkt[ihl:ihl + 8])
            if typ == 0 and rid == ident and src[0] == a.to:
                replies.add(rseq)
                if seq == a.count - 1 and len(replies) == a.count:
                    break
    emit({"sent": a.count, "received": len(replies)})
    return 0 if replies else 1


def main() -> int:
    p = argparse.ArgumentParser(prog="traffic.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    q = sub.add_parser("tcp-sink", help="accept N connections, report bytes and rate of each")
    q.add_argument("--bind", default="0.0.0.0")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--conns", type=int, default=1)
    q.set_defaults(fn=cmd_tcp_sink)

    q = sub.add_parser("tcp-send", help="connect from --bind:--sport and send bytes")
    q.add_argument("--bind", required=True)
    q.add_argument("--sport", type=int, default=0, help="source port (0: kernel picks)")
    q.add_argument("--to", type=endpoint, required=True, help="IP:PORT")
    q.add_argument("--bytes", type=int, default=0)
    q.add_argument("--seconds", type=float, default=0.0)
    q.add_argument("--timeout", type=float, default=3.0, help="connect timeout, seconds")
    q.set_defaults(fn=cmd_tcp_send)

    q = sub.add_parser("tcp-echo-server", help="echo every connection until killed")
    q.add_argument("--bind", default="0.0.0.0")
    q.add_argument("--port", type=int, required=True)
    q.set_defaults(fn=cmd_tcp_echo_server)

    q = sub.add_parser("tcp-echo-client", help="check an echo from every --bind to every --to")
    q.add_argument("--bind", action="append", required=True)
    q.add_argument("--to", type=endpoint, action="append", required=True)
    q.add_argument("--size", type=int, default=32768)
    q.add_argument("--timeout", type=float, default=3.0)
    q.set_defaults(fn=cmd_tcp_echo_client)

    q = sub.add_parser("udp-sink", help="count distinct datagrams until the sender goes quiet")
    q.add_argument("--bind", default="0.0.0.0")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--wait", type=float, default=5.0, help="wait for the first datagram, seconds")
    q.add_argument("--idle", type=float, default=0.5, help="quiet time that ends the count, seconds")
    q.add_argument("--max-seconds", type=float, default=20.0)
    q.set_defaults(fn=cmd_udp_sink)

    q = sub.add_parser("udp-send", help="send numbered datagrams at a paced rate")
    q.add_argument("--bind", required=True)
    q.add_argument("--sport", type=int, default=0)
    q.add_argument("--to", type=endpoint, required=True)
    q.add_argument("--count", type=int, default=1000)
    q.add_argument("--pps", type=float, default=10000.0)
    q.add_argument("--size", type=int, default=200)
    q.set_defaults(fn=cmd_udp_send)

    q = sub.add_parser("ping", help="ICMP echo from one NIC address (raw socket, root)")
    q.add_argument("--bind", required=True)
    q.add_argument("--to", required=True)
    q.add_argument("--count", type=int, default=3)
    q.add_argument("--interval", type=float, default=0.01)
    q.add_argument("--timeout", type=float, default=1.0, help="wait after the last request")
    q.set_defaults(fn=cmd_ping)

    a = p.parse_args()
    return a.fn(a)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
