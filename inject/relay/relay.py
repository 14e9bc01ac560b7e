"""shadowgate's owner-only relay for the reverse tunnel, run by the job with python3 -I.

A port on a loopback address is open to every user of the compute node. The shadow's ssh
session therefore ends each forward in a unix socket, DIR/rev-<port>.sock, that only the
job's user can open, and this relay holds the TCP port in front of it: it passes a
connection on only when the connecting socket belongs to the user running the relay.

A relay's command line is readable by every user of the node (ps, /proc/<pid>/cmdline), so
serve and wait take their arguments on standard input, one a line, and run with DIR as their
working directory, which only the job's user can read (/proc/<pid>/cwd): the command line
says only "rev-relay.py serve" or "rev-relay.py wait", never the address, ports or directory.

serve, stdin: DIR BIND SHELL_PID PORTS HOSTS_FILE
    Binds every port of PORTS (comma-separated) on BIND first, failing if one is taken, then
    creates DIR/rev-relay.ready. Runs until the job's shell (SHELL_PID) or DIR goes, then
    removes DIR and HOSTS_FILE. The job holds its address for its whole life, so while the
    tunnel is down connections are refused rather than left for another user to take.
wait, stdin: DIR PORTS SOCKS TIMEOUT
    Waits up to TIMEOUT seconds until every DIR/rev-<port>.sock answers and, when SOCKS is
    a port, until the listener on 127.0.0.1:SOCKS belongs to this user. Exit 2 when that
    listener is on a wildcard address. Refuses to run as root.
connect HOST PORT
    Relays stdin and stdout to HOST:PORT until either side ends. With Reverse.NodeExec srun
    the shadow's session to the node's sshd travels this way: srun runs it on the batch host
    from DIR, so the session ends up on the host that holds the relay, and needs no ssh to
    the node.
"""

import errno
import ipaddress
import os
import selectors
import shutil
import signal
import socket
import struct
import sys
import threading
import time

PREFIX = "interLink reverse tunnel:"
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
# The states, in that column, of a client end whose owner is known: ESTABLISHED, or FIN_WAIT1 and
# FIN_WAIT2 of a client that has only shut down its writing. A client end that has been closed
# is an orphan, shown as uid 0 with inode 0, which would pass for root's.
CLIENT_STATES = ("01", "04", "05")
POLL = 1.0
BUFFER = 65536
# SHADOW_RELAY_NODELAY=0 leaves Nagle's algorithm on for the relay's TCP sockets. It exists only
# so that the tunnel benchmark (inject/reverse_bench_test.go) can measure what TCP_NODELAY
# saves; a job has no reason to set it. Read once, at start-up.
NODELAY = os.environ.get("SHADOW_RELAY_NODELAY", "1") != "0"


def say(msg):
    try:
        print(PREFIX, msg, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # the job's output may be gone by the time the relay stops


class Log:
    """Logs each kind of failure once, then every 1000th time: the log is the job's output,
    which any user of the node could otherwise grow by connecting in a loop."""

    def __init__(self):
        self.counts = {}
        self.lock = threading.Lock()

    def failure(self, kind, msg):
        with self.lock:
            n = self.counts.get(kind, 0) + 1
            self.counts[kind] = n
        if n == 1:
            say(msg)
        elif n % 1000 == 0:
            say("%s (%d times so far)" % (msg, n))


def decode(field):
    """Decodes an address of /proc/net/tcp{,6}: hex words in host byte order, then the port.
    A v4-mapped IPv6 address becomes the IPv4 address it carries."""
    hexip, hexport = field.split(":")
    raw = bytes.fromhex(hexip)
    if sys.byteorder == "little":
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, int(hexport, 16)


def entries(tables):
    """Yields (local, remote, state, uid, inode) for every socket of the given table texts."""
    for text in tables:
        for line in text.splitlines()[1:]:
            f = line.split()
            if len(f) < 10:
                continue
            yield decode(f[1]), decode(f[2]), f[3], int(f[7]), int(f[9])


def read_tables():
    tables = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                tables.append(f.read())
        except FileNotFoundError:
            pass  # a kernel without IPv6 has no tcp6
    return tables


def endpoint(addr):
    ip = ipaddress.ip_address(addr[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip, addr[1]


def owner(tables, client, server):
    """The uid owning the client end of a connection from client to server, or None when no
    live socket holds it (CLIENT_STATES, a non-zero inode). The client may have an IPv6 socket
    (a JVM's default) that reached the IPv4 listener through a v4-mapped address, so tcp6 is
    searched too."""
    for local, remote, state, uid, inode in entries(tables):
        if local == client and remote == server and state in CLIENT_STATES and inode != 0:
            return uid
    return None


# sock_diag (NETLINK_SOCK_DIAG): one exact query per connection for the client end's owner,
# where /proc/net/tcp{,6} is every socket of the node, read and parsed (milliseconds, tens of
# them on a busy node). The structures are linux/inet_diag.h's.
NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NLMSG_HDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
DIAG_NOCOOKIE = b"\xff" * 8
# inet_diag_msg: family, state, timer, retrans, the sockid (48 bytes), expires, rqueue,
# wqueue, uid, inode.
DIAG_MSG = struct.Struct("=BBBB48sIIIII")
CLIENT_STATE_CODES = (1, 4, 5)  # CLIENT_STATES as numbers


class DiagUnavailable(Exception):
    """This kernel or sandbox gives no sock_diag: the relay reads /proc/net/tcp instead."""


def diag_query(family, client, server):
    """The sock_diag answer for the TCP socket whose own end is client and whose peer is
    server, as (state, uid, inode), or None when the kernel has no such socket."""
    # inet_diag_req_v2: family, protocol, ext, pad, states; then inet_diag_sockid: ports and
    # addresses in network order (an IPv4 address in the first 4 of 16 bytes), interface, cookie.
    src, dst = client[0].packed.ljust(16, b"\0"), server[0].packed.ljust(16, b"\0")
    body = (struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 0xffffffff)
            + struct.pack("!HH", client[1], server[1]) + src + dst
            + struct.pack("=I", 0) + DIAG_NOCOOKIE)
    try:
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    except OSError as e:
        raise DiagUnavailable(e.strerror or str(e))
    try:
        s.settimeout(5)
        s.send(NLMSG_HDR.pack(NLMSG_HDR.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST,
                              1, 0) + body)
        reply = s.recv(8192)
    finally:
        s.close()
    length, kind, _, _, _ = NLMSG_HDR.unpack_from(reply)
    if kind == NLMSG_ERROR:
        code = -struct.unpack_from("=i", reply, NLMSG_HDR.size)[0]
        if code == errno.ENOENT:
            return None
        raise OSError(code, os.strerror(code))
    if kind != SOCK_DIAG_BY_FAMILY or length < NLMSG_HDR.size + DIAG_MSG.size:
        raise OSError(errno.EPROTO, "sock_diag answered message type %d" % kind)
    _, state, _, _, _, _, _, _, uid, inode = DIAG_MSG.unpack_from(reply, NLMSG_HDR.size)
    return state, uid, inode


def diag_owner(client, server):
    """owner() by sock_diag. An IPv4 client is looked up as IPv4 first, then as the v4-mapped
    end of an IPv6 socket (a JVM's default); the semantics are owner()'s."""
    queries = [(socket.AF_INET6, client, server)]
    if client[0].version == 4:
        mapped = (ipaddress.IPv6Address("::ffff:" + str(client[0])), client[1])
        peer = (ipaddress.IPv6Address("::ffff:" + str(server[0])), server[1])
        queries = [(socket.AF_INET, client, server), (socket.AF_INET6, mapped, peer)]
    for family, c, s in queries:
        found = diag_query(family, c, s)
        if found is None:
            continue
        state, uid, inode = found
        if state in CLIENT_STATE_CODES and inode != 0:
            return uid
        return None
    return None


class Owners:
    """Finds the owner of a connection's client end: by sock_diag, or, where the kernel gives
    no answer, by /proc/net/tcp{,6}, said once in the log."""

    def __init__(self):
        self.proc = False

    def probe(self, listener):
        """Asks sock_diag once, at start, for the relay's own listener: a kernel without
        sock_diag or inet_diag, or a sandbox refusing netlink, answers no query, and every
        lookup then reads /proc."""
        bind, port = endpoint(listener.getsockname())
        try:
            if diag_query(socket.AF_INET, (bind, port), (ipaddress.ip_address("0.0.0.0"), 0)):
                return
            why = "it does not know the relay's own listener"
        except DiagUnavailable as e:
            why = str(e)
        except OSError as e:
            why = e.strerror or str(e)
        self.fall_back(why)

    def fall_back(self, why):
        self.proc = True
        say("sock_diag is unavailable (%s): finding each connection's owner in /proc/net/tcp "
            "instead, which costs milliseconds a connection" % why)

    def of(self, client, server):
        if not self.proc:
            try:
                return diag_owner(client, server)
            except DiagUnavailable as e:
                self.fall_back(e)
        return owner(read_tables(), client, server)


def socks_listener(tables, port, uid):
    """'ok' when this uid listens on 127.0.0.1:port, 'wildcard' when it listens there on
    0.0.0.0 or ::, else 'waiting'."""
    state = "waiting"
    for local, _, st, owner_uid, _ in entries(tables):
        if st != LISTEN or local[1] != port or owner_uid != uid:
            continue
        if local[0].is_unspecified:
            return "wildcard"
        if local[0] == ipaddress.ip_address("127.0.0.1"):
            state = "ok"
    return state


def pump(src, dst):
    buf = memoryview(bytearray(BUFFER))
    try:
        while True:
            n = src.recv_into(buf)
            if not n:
                break
            dst.sendall(buf[:n])
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def relay(conn, port, directory, log, owners):
    try:
        client, server = endpoint(conn.getpeername()), endpoint(conn.getsockname())
        try:
            uid = owners.of(client, server)
        except OSError as e:
            log.failure("lookup", "refused a connection to port %d: its owner could not be looked "
                        "up (%s)" % (port, e.strerror or e))
            return
        if uid != os.getuid():
            log.failure("foreign", "refused a connection to port %d from uid %s: only uid %d may "
                        "use the tunnel" % (port, uid, os.getuid()))
            return
        if NODELAY:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(os.path.join(directory, "rev-%d.sock" % port))
        except OSError as e:
            up.close()
            log.failure("down", "port %d: the tunnel is not up (%s); the shadow's ssh-reverse "
                        "container reconnects on its own" % (port, e.strerror))
            return
        back = threading.Thread(target=pump, args=(up, conn), daemon=True)
        back.start()
        pump(conn, up)
        back.join()
        up.close()
    except Exception as e:  # a listener outlives any one connection's failure
        log.failure("connection", "a connection to port %d failed: %s" % (port, e))
    finally:
        conn.close()


def serve(directory, bind, shell_pid, ports, hosts_file):
    if os.getuid() == 0:
        say("refusing to run as root: the relay lets only its own user's connections through, "
            "and root's are every daemon's of the node; run the job as its user. The job stops "
            "here rather than run without its tunnel")
        return 1
    log = Log()
    owners = Owners()
    listeners = []
    for port in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((bind, port))
        except OSError as e:
            say("cannot listen on %s:%d: %s. Another process on this node holds it; the job stops "
                "here rather than run without its tunnel" % (bind, port, e.strerror))
            return 1
        s.listen(128)
        s.setblocking(False)
        listeners.append((s, port))
    if listeners:
        owners.probe(listeners[0][0])
    inode = os.stat(directory).st_ino
    ready = os.path.join(directory, "rev-relay.ready")
    with open(ready + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(ready + ".tmp", ready)

    sel = selectors.DefaultSelector()
    for s, port in listeners:
        sel.register(s, selectors.EVENT_READ, port)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    owns_directory = True
    try:
        while True:
            try:
                os.kill(shell_pid, 0)
            except ProcessLookupError:
                say("the job's shell is gone; stopping the relay")
                return 0
            try:
                if os.stat(directory).st_ino != inode:
                    raise FileNotFoundError
            except FileNotFoundError:
                say("%s is gone; stopping the relay, which ends the tunnel" % directory)
                owns_directory = False
                return 0
            for key, _ in sel.select(POLL):
                try:
                    conn, _ = key.fileobj.accept()
                except OSError as e:
                    log.failure("accept", "accepting on port %d failed: %s"
                                % (key.data, e.strerror))
                    continue
                conn.setblocking(True)
                try:
                    threading.Thread(target=relay, args=(conn, key.data, directory, log, owners),
                                     daemon=True).start()
                except RuntimeError as e:
                    conn.close()
                    log.failure("thread", "no thread for a connection to port %d: %s"
                                % (key.data, e))
    finally:
        for s, _ in listeners:
            s.close()
        if owns_directory:
            shutil.rmtree(directory, ignore_errors=True)
        if hosts_file:
            try:
                os.unlink(hosts_file)
            except OSError:
                pass


def answers(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait(directory, ports, socks, timeout):
    deadline = time.monotonic() + timeout
    uid = os.getuid()
    while True:
        missing = [p for p in ports if not answers(os.path.join(directory, "rev-%d.sock" % p))]
        state = socks_listener(read_tables(), socks, uid) if socks else "ok"
        if state == "wildcard":
            say("the SOCKS proxy on port %d listens on a wildcard address, open to other machines: "
                "the node's sshd sets GatewayPorts yes. The job stops here; ask the site for "
                "GatewayPorts no, or use Reverse.Sshd: userspace" % socks)
            return 2
        if not missing and state == "ok":
            return 0
        if not os.path.isdir(directory):
            say("%s is gone: the relay has stopped" % directory)
            return 1
        if time.monotonic() >= deadline:
            waiting = ["rev-%d.sock" % p for p in missing]
            if state != "ok":
                waiting.append("a SOCKS listener of uid %d on 127.0.0.1:%d" % (uid, socks))
            say("still waiting for " + ", ".join(waiting))
            return 1
        time.sleep(POLL)


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def connect(host, port):
    try:
        s = socket.create_connection((host, port), timeout=30)
    except OSError as e:
        say("cannot connect to %s:%d: %s" % (host, port, e.strerror or e))
        return 1
    s.settimeout(None)
    if NODELAY:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def upstream():
        buf = memoryview(bytearray(BUFFER))
        try:
            while True:
                n = os.readv(0, [buf])
                if not n:
                    break
                s.sendall(buf[:n])
        except OSError:
            pass
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    threading.Thread(target=upstream, daemon=True).start()
    buf = memoryview(bytearray(BUFFER))
    try:
        while True:
            n = s.recv_into(buf)
            if not n:
                return 0
            write_all(1, buf[:n])
    except OSError:
        return 1  # the other end went; the session that used it ends with it


def port_list(arg):
    ports = [int(p) for p in arg.split(",") if p]
    if any(p < 1 or p > 65535 for p in ports):
        raise ValueError("port out of range in %r" % arg)
    return ports


def stdin_args(count):
    """The count arguments given one a line on standard input, or None. The first is the
    relay's directory, which must be its working directory: the node's scripts find a relay
    by it, and one started elsewhere would be a relay they cannot find."""
    args = sys.stdin.read().split("\n")
    if args and args[-1] == "":
        args.pop()
    if len(args) != count:
        return None
    try:
        if not os.path.samefile(args[0], "."):
            return None
    except OSError:
        return None
    return args


def main(argv):
    if argv == ["serve"]:
        args = stdin_args(5)
        if args is not None:
            directory, bind, shell, ports, hosts_file = args
            ipaddress.IPv4Address(bind)
            return serve(directory, bind, int(shell), port_list(ports), hosts_file)
    if argv == ["wait"]:
        args = stdin_args(4)
        if args is not None:
            directory, ports, socks, timeout = args
            return wait(directory, port_list(ports), int(socks) if socks else 0, int(timeout))
    if len(argv) == 3 and argv[0] == "connect":
        port, = port_list(argv[2])
        return connect(argv[1], port)
    say("usage: (in DIR) relay.py serve, stdin DIR BIND SHELL_PID PORTS HOSTS_FILE a line each"
        " | (in DIR) relay.py wait, stdin DIR PORTS SOCKS TIMEOUT | relay.py connect HOST PORT")
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
