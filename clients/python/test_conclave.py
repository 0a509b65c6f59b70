"""Tests of conclave.py against a real cluster: three `agent run` processes
(majority) with temporary configurations on loopback.

    cd clients/python && python3 -m unittest -v

$CONCLAVE_AGENT_BIN names the agent binary; without it the tests build one
with `go build` (scripts/test passes the one it built).
"""

import http.server
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import conclave

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NAMES = ["n1", "n2", "n3"]

_tmp = None
_procs = {}
_sockets = {}


def free_port():
    """A loopback port free for TCP and UDP (gossip uses both)."""
    for _ in range(50):
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            u.close()
            t.close()
    raise RuntimeError("no free loopback port")


def agent_binary():
    b = os.environ.get("CONCLAVE_AGENT_BIN")
    if b:
        return b
    out = os.path.join(_tmp, "agent")
    subprocess.run(["go", "build", "-o", out, "./cmd/agent"], cwd=REPO, check=True)
    return out


def eventually(what, cond, within=30.0):
    deadline = time.monotonic() + within
    while True:
        try:
            v = cond()
            if v:
                return v
        except conclave.AgentError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("%s: not within %.0f s" % (what, within))
        time.sleep(0.05)


def setUpModule():
    global _tmp
    _tmp = tempfile.mkdtemp(prefix="conclave-py-")
    binary = agent_binary()
    gossip = {n: free_port() for n in NAMES}
    for i, n in enumerate(NAMES):
        d = os.path.join(_tmp, n)
        os.makedirs(d)
        sock = os.path.join(d, "agent.sock")
        join = "" if i == 0 else 'join = ["127.0.0.1:%d"]' % gossip["n1"]
        cfg = os.path.join(d, "agent.toml")
        with open(cfg, "w") as f:
            f.write("""
[node]
name = "%s"
id = %d
data_dir = "%s"
[gossip]
bind = "127.0.0.1:%d"
profile = "local"
%s
[transport]
listen = "/ip4/127.0.0.1/tcp/%d"
[election]
protocol = "majority"
voters = ["n1", "n2", "n3"]
[api]
socket = "%s"
""" % (n, i + 1, d, gossip[n], join, free_port(), sock))
        log = open(os.path.join(d, "agent.log"), "w")
        _procs[n] = subprocess.Popen([binary, "run", "-config", cfg], stdout=log, stderr=log)
        log.close()
        _sockets[n] = sock
    try:
        eventually("a leader", lambda: leader_name())
    except BaseException:
        tearDownModule()
        raise


def tearDownModule():
    for n, p in _procs.items():
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for n, p in _procs.items():
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    _procs.clear()
    if os.environ.get("CONCLAVE_KEEP_LOGS"):
        print("agent logs kept in %s" % _tmp, file=sys.stderr)
    else:
        shutil.rmtree(_tmp, ignore_errors=True)


def leader_name():
    """The node whose agent says it leads, or None."""
    for n in NAMES:
        try:
            if conclave.Client(_sockets[n]).status().is_leader:
                return n
        except conclave.AgentError:
            pass
    return None


class ClusterTest(unittest.TestCase):

    def test_status_one_leader_and_leads_now(self):
        lead = eventually("a leader", leader_name)
        sts = {n: conclave.Client(_sockets[n]).status() for n in NAMES}
        leaders = [n for n, st in sts.items() if st.is_leader]
        self.assertEqual(leaders, [lead], "agents saying they lead: %r" % sts)
        st = sts[lead]
        self.assertEqual(st.protocol, "majority")
        self.assertEqual(st.node, lead)
        self.assertGreater(st.epoch, 0)
        self.assertEqual(st.quorum.voters, 3)
        # The leader's fresh answer vouches for it; the same answer later
        # than its lease (or STALE_AFTER) no longer does.
        st = conclave.Client(_sockets[lead]).status()
        self.assertTrue(st.is_leader)
        self.assertGreater(st.lease_ms, 0, "majority leader without a lease: %r" % st)
        self.assertTrue(st.leads_now(now=st.asked_at))
        self.assertFalse(st.leads_now(now=st.asked_at + st.lease_ms / 1000.0 + 0.001))
        for n in NAMES:
            if n != lead:
                self.assertFalse(sts[n].is_leader)
                self.assertFalse(sts[n].leads_now())
                # A follower learns the leader from its first heartbeat.
                eventually("%s to know the leader" % n,
                           lambda: conclave.Client(_sockets[n]).status().leader == lead)

    def test_consistent_status_and_members(self):
        lead = eventually("a leader", leader_name)
        st = eventually("a consistent answer from the leader",
                        lambda: conclave.Client(_sockets[lead]).status(consistent=True))
        self.assertEqual(st.node, lead)
        ms = conclave.Client(_sockets[lead]).members()
        self.assertEqual(sorted(m.name for m in ms), NAMES)
        conclave.Client(_sockets[lead]).health()

    def test_blocking_leader(self):
        lead = eventually("a leader", leader_name)
        c = conclave.Client(_sockets[lead])
        l = c.leader()
        self.assertEqual(l.leader, lead)
        self.assertTrue(l.is_self)
        # Nothing changes: the wait passes and the same epoch comes back.
        same = c.leader(index=l.epoch, wait=0.3)
        self.assertEqual(same.epoch, l.epoch)
        # An index below the epoch answers at once with the current leader.
        self.assertEqual(c.leader(index=l.epoch - 1, wait=60).epoch, l.epoch)
        self.assertEqual(c.wait_for_leader(timeout=30).leader, lead)

    def test_watch_and_resign(self):
        lead = eventually("a leader", leader_name)
        c = conclave.Client(_sockets[lead])
        follower = next(n for n in NAMES if n != lead)
        with self.assertRaises(conclave.NotLeaderError) as cm:
            conclave.Client(_sockets[follower]).resign()
        self.assertEqual(cm.exception.status, 409)

        # A blocking wait on a follower, answered by the handover.
        old = conclave.Client(_sockets[follower]).leader()
        blocked = {}
        t = threading.Thread(target=lambda: blocked.update(
            l=conclave.Client(_sockets[follower]).leader(index=old.epoch, wait=60)))
        t.start()

        with c.watch() as w:
            first = next(w)
            self.assertTrue(first.is_leader, "first watch line %r" % first)
            epoch = first.epoch
            c.resign()
            for st in w:
                if not st.is_leader or st.epoch != epoch:
                    break
        self.assertFalse(st.is_leader and st.epoch == epoch)
        t.join(70)
        self.assertFalse(t.is_alive(), "blocking leader query still waiting after the handover")
        self.assertGreater(blocked["l"].epoch, old.epoch)
        new = conclave.Client(_sockets[follower]).wait_for_leader(timeout=30)
        self.assertGreater(new.epoch, epoch)

    def test_elections(self):
        lead = eventually("a leader", leader_name)
        c = conclave.Client(_sockets[lead])
        # These agents run the default election alone.
        es = c.elections()
        self.assertEqual([e.election for e in es], ["default"])
        self.assertEqual(es[0].node, lead)
        self.assertTrue(es[0].is_leader)
        st = c.election("default").status()
        self.assertEqual((st.election, st.node), ("default", lead))
        self.assertEqual(c.status().election, "default")
        # An election the agent does not run: a 404 that says how to list them.
        nope = c.election("nope")
        for call in (nope.status, nope.leader, nope.resign, nope.watch):
            with self.assertRaises(conclave.NoElectionError) as cm:
                call()
            self.assertEqual(cm.exception.status, 404)
            self.assertIn('no election "nope" on this agent', cm.exception.message)
            self.assertIn("agent elections", cm.exception.message)

    def test_example_works_while_leading(self):
        lead = eventually("a leader", leader_name)
        r = subprocess.run([sys.executable, os.path.join(HERE, "example.py"), "--socket", _sockets[lead],
                            "--rounds", "3", "--interval", "0.05"],
                           capture_output=True, text=True, timeout=60)
        out = r.stdout
        if "lost leadership" in out:
            self.skipTest("leadership moved during the example run: %s" % out)
        self.assertEqual(r.returncode, 0, "example.py: %s %s" % (out, r.stderr))
        self.assertIn("leading in epoch", out)
        self.assertIn("round 3 in epoch", out)


class _FakeAgent(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A confused or hostile process on the socket: answers chosen per path."""
    daemon_threads = True


class _FakeHandler(http.server.BaseHTTPRequestHandler):
    answers = {}  # path -> (status, body bytes)

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self._answer()

    def _answer(self):
        status, body = self.answers.get(self.path.split("?")[0], (404, b'{"error":"no such path"}'))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass


class BadAnswersTest(unittest.TestCase):
    """Bad input from the socket is a clear AgentError, never a crash or an
    unbounded read."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="conclave-py-fake-")
        self.sock = os.path.join(self.dir, "agent.sock")
        _FakeHandler.answers = {
            "/v1/status": (500, b"boom: not json"),
            "/v1/resign": (409, b'{"error":"this node does not lead"}'),
            "/v1/members": (200, b"[" + b" " * (conclave.MAX_ANSWER_BYTES + 10) + b"]"),
            "/v1/leader": (200, b"{not json"),
            "/v1/watch": (200, b'{"node":"n1","role":"leader","epoch":4}\n{"error":"watcher lagged"}\n'),
        }
        self.srv = _FakeAgent(self.sock, _FakeHandler)
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()
        self.c = conclave.Client(self.sock)

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()
        self.thread.join()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_errors(self):
        with self.assertRaises(conclave.AgentError) as cm:
            self.c.status()
        self.assertEqual(cm.exception.status, 500)
        self.assertIn("boom", cm.exception.message)
        with self.assertRaises(conclave.NotLeaderError) as cm:
            self.c.resign()
        self.assertEqual(cm.exception.message, "this node does not lead")
        with self.assertRaises(conclave.AgentError) as cm:
            self.c.members()
        self.assertIn("larger than", str(cm.exception))
        with self.assertRaises(conclave.AgentError) as cm:
            self.c.leader()
        self.assertIn("decoding", str(cm.exception))
        with self.assertRaises(conclave.AgentError) as cm:
            self.c.health()
        self.assertEqual(cm.exception.status, 404)

    def test_watch_error_line_ends_stream(self):
        with self.c.watch() as w:
            st = next(w)
            self.assertEqual((st.node, st.role, st.epoch), ("n1", "leader", 4))
            with self.assertRaises(conclave.WatchEnded) as cm:
                next(w)
            self.assertEqual(cm.exception.message, "watcher lagged")

    def test_named_election_paths(self):
        _FakeHandler.answers.update({
            "/v1/elections/db/status": (200, b'{"election":"db","node":"n1","role":"leader","epoch":9}'),
            "/v1/elections/db/leader": (200, b'{"leader":"n2","epoch":9,"is_self":false}'),
            "/v1/elections/db/resign": (404, b'{"error":"no election \\"db\\" on this agent; `agent elections` lists them"}'),
            "/v1/elections/db/watch": (200, b'{"election":"db","node":"n1","role":"follower","epoch":10}\n'),
        })
        db = self.c.election("db")
        self.assertEqual(db.election_name, "db")
        st = db.status()
        self.assertEqual((st.election, st.epoch, st.role), ("db", 9, "leader"))
        self.assertEqual(db.leader().leader, "n2")
        with self.assertRaises(conclave.NoElectionError) as cm:
            db.resign()
        self.assertEqual(cm.exception.path, "/v1/elections/db/resign")
        with db.watch() as w:
            self.assertEqual(next(w).epoch, 10)
            with self.assertRaises(conclave.WatchEnded) as cm:
                next(w)
            self.assertEqual(cm.exception.path, "/v1/elections/db/watch")
        # The default election keeps the unprefixed paths.
        with self.assertRaises(conclave.NotLeaderError):
            self.c.election("default").resign()

    def test_elections_of_an_older_agent(self):
        # No /v1/elections: its status is the one (default) election.
        _FakeHandler.answers["/v1/status"] = (200, b'{"node":"n1","role":"leader","epoch":4}')
        _FakeHandler.answers["/v1/elections"] = (404, b'{"error":"no such endpoint \\"/v1/elections\\""}')
        es = self.c.elections()
        self.assertEqual([(e.election, e.node, e.epoch) for e in es], [("default", "n1", 4)])
        # Any other 404 is an error, not an empty agent.
        _FakeHandler.answers["/v1/elections"] = (404, b'{"error":"gone"}')
        with self.assertRaises(conclave.AgentError):
            self.c.elections()

    def test_watch_line_too_long(self):
        _FakeHandler.answers["/v1/watch"] = (200, b'{"node":"' + b"x" * (conclave.MAX_WATCH_LINE + 1) + b'"}\n')
        with self.c.watch() as w:
            with self.assertRaises(conclave.AgentError) as cm:
                next(w)
            self.assertIn("longer than", str(cm.exception))


class OfflineTest(unittest.TestCase):

    def test_unreachable_agent(self):
        c = conclave.Client(os.path.join(tempfile.gettempdir(), "no-such-conclave.sock"))
        with self.assertRaises(conclave.AgentError) as cm:
            c.status()
        self.assertEqual(cm.exception.status, 0)
        self.assertIn("is the agent running?", str(cm.exception))

    def test_default_socket(self):
        old = os.environ.pop("CONCLAVE_SOCKET", None)
        try:
            self.assertEqual(conclave.Client().socket_path, "data/n1/agent.sock")
            os.environ["CONCLAVE_SOCKET"] = "/run/x.sock"
            self.assertEqual(conclave.Client().socket_path, "/run/x.sock")
        finally:
            os.environ.pop("CONCLAVE_SOCKET", None)
            if old is not None:
                os.environ["CONCLAVE_SOCKET"] = old

    def test_election_names(self):
        for good in ("default", "a", "db-primary", "cron_1", "x" * 32):
            self.assertTrue(conclave.valid_election_name(good), good)
            self.assertEqual(conclave.Client("/x.sock", election=good).election_name, good)
        for bad in ("", "x" * 33, "1st", "-a", "Db", "a/b", "a.b", "caf\u00e9", None, 3):
            self.assertFalse(conclave.valid_election_name(bad), bad)
        with self.assertRaises(ValueError):
            conclave.Client("/x.sock", election="a/../b")
        with self.assertRaises(ValueError):
            conclave.Client("/x.sock").election("Nope")
        self.assertEqual(conclave.Client("/x.sock").election_name, "default")

    def test_leads_now_rule(self):
        def st(role, lease_ms, asked_at=100.0):
            return conclave.Status({"role": role, "lease_ms": lease_ms, "epoch": 3}, asked_at)
        self.assertTrue(st("leader", 200).leads_now(now=100.1))
        self.assertFalse(st("leader", 200).leads_now(now=100.3))   # lease ran out
        self.assertTrue(st("leader", 0).leads_now(now=100.9))      # bully/ring: no lease
        self.assertFalse(st("leader", 0).leads_now(now=101.5))     # older than STALE_AFTER
        self.assertFalse(st("follower", 200).leads_now(now=100.0))
        # A lease under a millisecond: lease_ms is 0, lease_ns is exact.
        short = conclave.Status({"role": "leader", "lease_ms": 0, "lease_ns": 400000, "epoch": 3}, 100.0)
        self.assertTrue(short.leads_now(now=100.0003))
        self.assertFalse(short.leads_now(now=100.001))


class SessionTest(unittest.TestCase):
    """campaign() against one more agent, alone in its cluster, whose
    election stands only while a session is held (session_ttl 3s)."""

    @classmethod
    def setUpClass(cls):
        d = os.path.join(_tmp, "s1")
        os.makedirs(d)
        cls.sock = os.path.join(d, "agent.sock")
        cfg = os.path.join(d, "agent.toml")
        with open(cfg, "w") as f:
            f.write("""
[node]
name = "s1"
id = 1
data_dir = "%s"
[gossip]
bind = "127.0.0.1:%d"
profile = "local"
[transport]
listen = "/ip4/127.0.0.1/tcp/%d"
[election]
protocol = "bully"
voters = ["s1"]
election_timeout = "200ms"
candidacy = "session"
session_ttl = "3s"
[api]
socket = "%s"
""" % (d, free_port(), free_port(), cls.sock))
        log = open(os.path.join(d, "agent.log"), "w")
        cls.proc = subprocess.Popen([agent_binary(), "run", "-config", cfg], stdout=log, stderr=log)
        log.close()
        eventually("the session agent answers", lambda: conclave.Client(cls.sock).health() or True)

    @classmethod
    def tearDownClass(cls):
        cls.proc.send_signal(signal.SIGTERM)
        try:
            cls.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()

    def leads_within(self, s, within):
        deadline = time.monotonic() + within
        for st in s:
            s.heartbeat()  # however long the election takes, the session lives
            if st.is_leader:
                return st
            self.assertLess(time.monotonic(), deadline, "the agent did not lead while its session was held")
        return None

    def test_campaign_leads_and_closes(self):
        c = conclave.Client(self.sock)
        with c.campaign() as s:
            self.assertTrue(s.id)
            self.assertEqual(s.ttl, 3.0)
            self.assertTrue(self.leads_within(s, 20).is_leader)
            s.heartbeat()
            sid = s.id
        self.assertEqual(s.ended, "closed")
        # The agent closes the session once it sees the connection close.
        def gone():
            try:
                c._call("POST", "/v1/heartbeat", {"session": sid})
                return False
            except conclave.SessionEnded as e:
                return e.status == 410
        eventually("the closed session is gone", gone, within=10)

    def test_campaign_expires_without_heartbeats(self):
        c = conclave.Client(self.sock)
        with c.campaign() as s:
            with self.assertRaises(conclave.SessionEnded) as cm:
                for _ in s:
                    pass  # no heartbeat: it expires after its ttl
            self.assertEqual(cm.exception.reason, "expired")
            self.assertEqual(s.ended, "expired")
            with self.assertRaises(conclave.SessionEnded) as cm:
                s.heartbeat()
            self.assertEqual(cm.exception.status, 410)

    def test_campaign_refused_on_an_election_that_stands_always(self):
        with self.assertRaises(conclave.AgentError) as cm:
            conclave.Client(_sockets["n1"]).campaign()
        self.assertEqual(cm.exception.status, 409)
        self.assertNotIsInstance(cm.exception, conclave.NotLeaderError)
        self.assertIn('candidacy = "session"', cm.exception.message)


if __name__ == "__main__":
    unittest.main()
