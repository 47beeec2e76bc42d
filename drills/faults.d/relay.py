#!/usr/bin/env python3
"""A TCP relay on 127.0.0.1 that a fault drill controls: forward, cut, heal.

    relay.py serve --target PORT --ports-file FILE [--max-seconds S]
        Listens on a free 127.0.0.1 port and forwards every connection to 127.0.0.1:PORT.
        Writes "LISTEN_PORT CONTROL_PORT" to FILE once both are bound. Exits by itself after
        --max-seconds (default 900), so a drill that dies cannot leave it behind.
    relay.py ctl --port CONTROL_PORT COMMAND
        Sends one command and prints the relay's answer; exits 1 unless it starts with "ok".

Commands on the control port (one line each, answered with one line):
    cut [blackhole|refuse]  reset every open connection (both sides see RST) and, until heal,
                            hold new connections open without forwarding a byte (blackhole: the
                            peer connects, then hears nothing, as behind a dropped route) or
                            reset them at once (refuse: as a firewall that rejects)
    heal                    forward again; connections held by a blackhole are forwarded now,
                            with whatever their peers wrote meanwhile, as after a healed route
    status                  "ok forwarding|cut-blackhole|cut-refuse open=N held=M cuts=K"

Python standard library only; one thread pumps each direction of each connection.
"""

import argparse
import os
import socket
import struct
import sys
import threading
import time

LOCALHOST = "127.0.0.1"


def reset(sock):
    """Close with RST rather than FIN: the peer learns at once that the connection is gone."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class Pair:
    """One relayed connection: the accepted client side and, once forwarded, the upstream."""

    def __init__(self, client):
        self.client = client
        self.upstream = None
        self.closed = False


class Relay:
    def __init__(self, target_port):
        self.target_port = target_port
        self.lock = threading.Lock()
        self.mode = "forwarding"
        self.pairs = set()
        self.held = []
        self.cuts = 0

    # ---- data path ----------------------------------------------------------------------------

    def accept_loop(self, listener):
        while True:
            client, _ = listener.accept()
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                mode = self.mode
                if mode == "cut-blackhole":
                    self.held.append(client)
                    continue
            if mode == "cut-refuse":
                reset(client)
                continue
            self.forward(Pair(client))

    def forward(self, pair):
        try:
            upstream = socket.create_connection((LOCALHOST, self.target_port), timeout=5)
        except OSError:
            reset(pair.client)
            return
        upstream.settimeout(None)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            if self.mode != "forwarding":
                # A cut arrived while connecting: this connection is cut too.
                reset(upstream)
                reset(pair.client)
                return
            pair.upstream = upstream
            self.pairs.add(pair)
        for src, dst in ((pair.client, upstream), (upstream, pair.client)):
            threading.Thread(target=self.pump, args=(pair, src, dst), daemon=True).start()

    def pump(self, pair, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        self.close_pair(pair, hard=False)

    def close_pair(self, pair, hard):
        with self.lock:
            if pair.closed:
                return
            pair.closed = True
            self.pairs.discard(pair)
        for sock in (pair.client, pair.upstream):
            if sock is None:
                continue
            if hard:
                reset(sock)
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    # ---- control ------------------------------------------------------------------------------

    def cut(self, how):
        with self.lock:
            self.mode = "cut-" + how
            self.cuts += 1
            victims = list(self.pairs)
        for pair in victims:
            self.close_pair(pair, hard=True)
        return "ok cut %s: reset %d connections" % (how, len(victims))

    def heal(self):
        with self.lock:
            self.mode = "forwarding"
            held, self.held = self.held, []
        for client in held:
            self.forward(Pair(client))
        return "ok heal: forwarding again, %d held connections forwarded" % len(held)

    def status(self):
        with self.lock:
            return "ok %s open=%d held=%d cuts=%d" % (self.mode, len(self.pairs), len(self.held),
                                                      self.cuts)

    def command(self, line):
        words = line.split()
        if not words:
            return "error: empty command"
        if words[0] == "cut" and len(words) <= 2:
            how = words[1] if len(words) == 2 else "blackhole"
            if how not in ("blackhole", "refuse"):
                return "error: cut takes blackhole or refuse"
            return self.cut(how)
        if words == ["heal"]:
            return self.heal()
        if words == ["status"]:
            return self.status()
        return "error: unknown command %r" % line

    def control_loop(self, listener):
        while True:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(5)
                try:
                    line = conn.makefile("r").readline().strip()
                    conn.sendall((self.command(line) + "\n").encode())
                except OSError:
                    pass


def bind_free():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((LOCALHOST, 0))
    s.listen(128)
    return s


def serve(args):
    relay = Relay(args.target)
    listener = bind_free()
    control = bind_free()
    with open(args.ports_file + ".tmp", "w") as f:
        f.write("%d %d\n" % (listener.getsockname()[1], control.getsockname()[1]))
    # Renamed into place so that a reader never sees half a line.
    os.replace(args.ports_file + ".tmp", args.ports_file)
    threading.Thread(target=relay.accept_loop, args=(listener,), daemon=True).start()
    threading.Thread(target=relay.control_loop, args=(control,), daemon=True).start()
    time.sleep(args.max_seconds)
    print("relay: exiting after %d s" % args.max_seconds, file=sys.stderr)
    return 0


def ctl(args):
    try:
        with socket.create_connection((LOCALHOST, args.port), timeout=10) as s:
            s.sendall((" ".join(args.command) + "\n").encode())
            answer = s.makefile("r").readline().strip()
    except OSError as e:
        print("relay unreachable: %s" % e)
        return 1
    print(answer)
    return 0 if answer.startswith("ok") else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("--target", type=int, required=True, help="port on 127.0.0.1 to forward to")
    p.add_argument("--ports-file", required=True)
    p.add_argument("--max-seconds", type=int, default=900)
    p = sub.add_parser("ctl")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("command", nargs="+")
    args = parser.parse_args()
    return serve(args) if args.cmd == "serve" else ctl(args)


if __name__ == "__main__":
    sys.exit(main())
