"""Python client of the conclave agent's local socket API (standard library only).

The agent answers HTTP/1.1 and JSON on a Unix socket. This module is the
Python counterpart of the Go package ``client``: copy it next to your program
(Python 3.8 or later, no dependencies).

    import conclave
    c = conclave.Client("/run/conclave/agent.sock")   # or $CONCLAVE_SOCKET
    st = c.status()
    if st.leads_now():
        do_leader_work(fencing_token=st.epoch)

    for st in c.watch():          # the current status, then every change
        ...

    with c.campaign() as s:       # stand while this block runs (candidacy = "session")
        for st in s:              # the election's status while the session lives
            s.heartbeat()         # with session_ttl: check in within it

    db = c.election("db")         # the same calls for election "db"
    for st in c.elections():      # every election the agent runs
        print(st.election, st.leader, st.epoch)

Leadership is never cached here: every answer is the agent's at the time of
asking. A program that acts as leader holds the epoch it was given, passes
it to whatever it changes (the fencing token), and re-checks with
``Status.leads_now()`` or follows ``watch()``.
"""

import http.client
import json
import os
import socket
import time
import urllib.parse

__all__ = [
    "Client", "Status", "Leader", "Member", "Quorum", "Watcher",
    "AgentError", "NotLeaderError", "NoElectionError", "WatchEnded",
    "Session", "SessionEnded",
    "DEFAULT_SOCKET", "ENV_SOCKET", "STALE_AFTER", "DEFAULT_ELECTION",
    "valid_election_name",
]

ENV_SOCKET = "CONCLAVE_SOCKET"
DEFAULT_SOCKET = "data/n1/agent.sock"

# The election of the [election] table, which the unprefixed paths
# (/v1/status, …) act on; [elections.NAME] tables are the others.
DEFAULT_ELECTION = "default"
MAX_ELECTION_NAME = 32
_NAME_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz")
_NAME_REST = _NAME_FIRST | frozenset("0123456789_-")

# An answer older than this no longer vouches for leadership (the Go
# client's client.DefaultStaleAfter, which `agent exec` applies; bully and
# ring have no lease to go by).
STALE_AFTER = 1.0

# Bounds on what is read, so a confused peer on the socket cannot make the
# client allocate without limit (the Go client's bounds).
MAX_ANSWER_BYTES = 4 << 20
MAX_WATCH_LINE = 64 << 10

# The agent caps a blocking /v1/leader at this many seconds.
MAX_WAIT = 300.0


def valid_election_name(name):
    """Whether name can be an election's: 1 to 32 bytes of a-z, 0-9, '_'
    and '-', starting with a letter (the Go api.ValidElectionName)."""
    return (isinstance(name, str) and 0 < len(name) <= MAX_ELECTION_NAME
            and name[0] in _NAME_FIRST and all(ch in _NAME_REST for ch in name))


def _election_path(election, path):
    """The path of election for path (one of /v1/status, /v1/leader,
    /v1/watch, /v1/resign): the unprefixed path for the default election,
    which agents from before named elections answer too."""
    if not election or election == DEFAULT_ELECTION:
        return path
    return "/v1/elections/%s/%s" % (election, path[len("/v1/"):])


def default_socket_path():
    """$CONCLAVE_SOCKET when set and not empty, else data/n1/agent.sock."""
    return os.environ.get(ENV_SOCKET) or DEFAULT_SOCKET


class AgentError(Exception):
    """A non-2xx answer from the agent, or an agent that cannot be reached
    (status 0)."""

    def __init__(self, path, status, message):
        self.path, self.status, self.message = path, status, message
        super().__init__("agent %s: %s %s" % (path, status or "unreachable", message))


class NotLeaderError(AgentError):
    """409 from resign: this node does not lead."""


class NoElectionError(AgentError):
    """404: the agent runs no election of that name; Client.elections()
    lists those it runs."""


class WatchEnded(AgentError):
    """The agent ended the watch stream (the watcher lagged, or the agent
    is stopping). Watch again to resume."""


class SessionEnded(AgentError):
    """The session is over: closed, expired (no heartbeat within its TTL)
    or the agent stopped. reason is "closed", "expired" or "stopped" when
    the agent said which. Campaign again to stand again."""

    def __init__(self, path, status, message, reason=""):
        super().__init__(path, status, message)
        self.reason = reason


class Quorum:
    """The configured voters (majority); in bully and ring, live members."""

    __slots__ = ("voters", "reachable", "healthy")

    def __init__(self, d):
        d = d or {}
        self.voters = int(d.get("voters", 0))
        self.reachable = int(d.get("reachable", 0))
        self.healthy = bool(d.get("healthy", False))

    def __repr__(self):
        return "Quorum(voters=%d, reachable=%d, healthy=%s)" % (self.voters, self.reachable, self.healthy)


class Status:
    """This agent's view of the election at one instant (GET /v1/status).

    ``asked_at`` is time.monotonic() when the request was sent: the lease
    counts from then, not from when the answer arrived.
    """

    __slots__ = ("election", "node", "id", "protocol", "role", "leader", "epoch", "lease_ms",
                 "lease_ns", "leader_age_ms", "seq", "members", "quorum", "asked_at")

    def __init__(self, d, asked_at):
        # The election this status is of; agents from before named
        # elections ran only the default one and do not say.
        self.election = d.get("election") or DEFAULT_ELECTION
        self.node = d.get("node", "")
        self.id = int(d.get("id", 0))
        self.protocol = d.get("protocol", "")
        self.role = d.get("role", "")
        self.leader = d.get("leader", "")
        self.epoch = int(d.get("epoch", 0))
        self.lease_ms = int(d.get("lease_ms", 0))
        # lease_ns is exact: a lease under a millisecond has lease_ms 0,
        # which must not read as "no lease" (older agents send lease_ms only).
        self.lease_ns = int(d.get("lease_ns", 0))
        # On an observer: how old its knowledge of leader and epoch is
        # (learned by gossip); 0 on voters.
        self.leader_age_ms = int(d.get("leader_age_ms", 0))
        self.seq = int(d.get("seq", 0))
        self.members = int(d.get("members", 0))
        self.quorum = Quorum(d.get("quorum"))
        self.asked_at = asked_at

    @property
    def is_leader(self):
        """The agent said this node leads (at the time of asking)."""
        return self.role == "leader"

    def leads_now(self, now=None):
        """Whether this answer still vouches for this node's leadership now.

        The rule of the Go client's client.Leadership (which `agent exec`
        uses), for a single answer: the agent said "leader", the answer is at
        most STALE_AFTER seconds old, and, when the protocol has a lease
        (majority), the lease counted from when the question was asked has
        not run out. A paused or slow process therefore stops believing it
        leads on its own; ask again (or watch) to renew.
        """
        if not self.is_leader:
            return False
        now = time.monotonic() if now is None else now
        if now - self.asked_at > STALE_AFTER:
            return False
        lease = self.lease()
        if lease > 0 and now > self.asked_at + lease:
            return False
        return True

    def lease(self):
        """Seconds of lease left when the question was asked; 0 for none."""
        if self.lease_ns > 0:
            return self.lease_ns / 1e9
        return self.lease_ms / 1000.0

    def __repr__(self):
        return "Status(election=%r, node=%r, role=%r, leader=%r, epoch=%d, lease_ms=%d)" % (
            self.election, self.node, self.role, self.leader, self.epoch, self.lease_ms)


class Leader:
    """Who leads (GET /v1/leader)."""

    __slots__ = ("leader", "epoch", "is_self")

    def __init__(self, d):
        self.leader = d.get("leader", "")
        self.epoch = int(d.get("epoch", 0))
        self.is_self = bool(d.get("is_self", False))

    def __repr__(self):
        return "Leader(leader=%r, epoch=%d, is_self=%s)" % (self.leader, self.epoch, self.is_self)


class Member:
    """One node as this agent sees it (GET /v1/members)."""

    __slots__ = ("name", "id", "addr", "state", "phi")

    def __init__(self, d):
        self.name = d.get("name", "")
        self.id = int(d.get("id", 0))
        self.addr = d.get("addr", "")
        self.state = d.get("state", "")
        self.phi = float(d.get("phi", 0))

    def __repr__(self):
        return "Member(name=%r, state=%r, phi=%.2f)" % (self.name, self.state, self.phi)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("agent", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _go_duration(seconds):
    """Seconds as a Go duration string ("1.5s")."""
    ms = max(1, int(round(seconds * 1000)))
    return "%dms" % ms


class Client:
    """Talks to one agent over its Unix socket. Each call opens its own
    connection, so a Client may be shared between threads.

    timeout bounds each request (seconds); blocking calls add their wait.
    election names the election status(), leader(), wait_for_leader(),
    watch() and resign() act on (default: DEFAULT_ELECTION); members() and
    health() are the agent's, the same for every election. A name that
    cannot be an election's raises ValueError here; one the agent does not
    run raises NoElectionError from each call.
    """

    def __init__(self, socket_path=None, timeout=5.0, election=None):
        if election is not None and not valid_election_name(election):
            raise ValueError("invalid election name %r: use 1 to %d bytes of a-z, 0-9, '_' and '-', "
                             "starting with a letter" % (election, MAX_ELECTION_NAME))
        self.socket_path = socket_path or default_socket_path()
        self.timeout = timeout
        self.election_name = election or DEFAULT_ELECTION

    def election(self, name):
        """A Client for the same agent that acts on election name."""
        return Client(self.socket_path, self.timeout, election=name)

    def _path(self, path):
        return _election_path(self.election_name, path)

    # -- requests --------------------------------------------------------

    def _open(self, method, path, query=None, timeout=None):
        url = path + ("?" + urllib.parse.urlencode(query) if query else "")
        conn = _UnixConnection(self.socket_path, self.timeout if timeout is None else timeout)
        try:
            conn.request(method, url, headers={"Host": "agent"})
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            raise AgentError(path, 0, "%s (is the agent running? socket %s)" % (e, self.socket_path)) from e
        except http.client.HTTPException as e:
            conn.close()
            raise AgentError(path, 0, "bad answer: %s" % e) from e
        return conn, resp

    def _call(self, method, path, query=None, timeout=None):
        conn, resp = self._open(method, path, query, timeout)
        try:
            body = resp.read(MAX_ANSWER_BYTES + 1)
        except (OSError, http.client.HTTPException) as e:
            raise AgentError(path, 0, "reading answer: %s" % e) from e
        finally:
            conn.close()
        if len(body) > MAX_ANSWER_BYTES:
            raise AgentError(path, resp.status, "answer larger than %d bytes" % MAX_ANSWER_BYTES)
        if resp.status // 100 != 2:
            raise _answer_error(path, resp.status, body)
        try:
            return json.loads(body)
        except ValueError as e:
            raise AgentError(path, resp.status, "decoding answer: %s" % e) from e

    # -- the API ---------------------------------------------------------

    def status(self, consistent=False):
        """The agent's status. consistent=True has the leader confirm its
        leadership with a quorum first (majority only; others answer 400)."""
        asked_at = time.monotonic()
        d = self._call("GET", self._path("/v1/status"), {"consistent": "true"} if consistent else None)
        return Status(d, asked_at)

    def leader(self, index=None, wait=None):
        """Who leads. With wait (seconds) the call blocks until the epoch
        exceeds index (default 0) or wait passes (the agent caps it at 300 s),
        then answers with the leader of that moment: compare the epoch with
        index to tell which happened."""
        path = self._path("/v1/leader")
        if wait is None or wait <= 0:
            return Leader(self._call("GET", path))
        wait = min(float(wait), MAX_WAIT)
        q = {"index": str(index or 0), "wait": _go_duration(wait)}
        return Leader(self._call("GET", path, q, timeout=self.timeout + wait))

    def wait_for_leader(self, timeout=60.0):
        """Blocks until some node leads and returns it, or raises
        TimeoutError after timeout seconds."""
        deadline = time.monotonic() + timeout
        l = self.leader()
        while not l.leader:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no leader within %.1f s" % timeout)
            # Blocks until the epoch moves past the one seen (a new
            # leadership), polled at most every second when an epoch passes
            # without a leader (an election in progress).
            l = self.leader(index=l.epoch, wait=min(left, 1.0) if l.epoch else left)
        return l

    def members(self):
        """Every member the agent knows."""
        return [Member(m) for m in self._call("GET", "/v1/members")]

    def resign(self):
        """Asks the agent to hand leadership over. Raises NotLeaderError when
        it does not lead (and AgentError 403 when the caller is neither the
        agent's user nor root)."""
        self._call("POST", self._path("/v1/resign"))

    def elections(self):
        """The status of every election the agent runs, sorted by name
        (GET /v1/elections); each Status's election names it. An agent from
        before named elections runs only the default one: its status."""
        asked_at = time.monotonic()
        try:
            items = self._call("GET", "/v1/elections")
        except AgentError as e:
            if e.status != 404 or "no such endpoint" not in e.message:
                raise
            return [Status(self._call("GET", "/v1/status"), asked_at)]
        return [Status(d, asked_at) for d in items]

    def health(self):
        """Returns while the agent runs its event loop; raises AgentError
        otherwise."""
        self._call("GET", "/v1/health")

    def campaign(self):
        """Opens a session on the election (POST /v1/campaign): while it is
        open, and checked in within its ttl with heartbeat(), the agent
        stands in the election, whose candidacy must be "session"
        (docs/elections.md). Use it as a context manager, or close() it:
        closing the connection closes the session. Iterating it yields the
        election's status while the session lives and raises SessionEnded
        when the agent ends it. An election that stands always raises
        AgentError 409."""
        path = self._path("/v1/campaign")
        conn, resp = self._open("POST", path, timeout=None)
        if resp.status != 200:
            try:
                body = resp.read(MAX_ANSWER_BYTES)
            finally:
                conn.close()
            raise _answer_error(path, resp.status, body)
        s = Session(self, conn, resp, path)
        try:
            first = s._line()
        except BaseException:
            s.close()
            raise
        if not first.get("session"):
            s.close()
            raise AgentError(path, 200, "the first line names no session: %r" % (first,))
        s.id = first["session"]
        s.ttl = first.get("ttl_ms", 0) / 1000.0
        return s

    def watch(self):
        """A stream of the agent's status: the current one first, then every
        change. Iterate it; close it (or use it in a with block) when done."""
        asked_at = time.monotonic()
        # No read timeout: a quiet stream is a stable cluster.
        path = self._path("/v1/watch")
        conn, resp = self._open("GET", path, timeout=None)
        if resp.status != 200:
            try:
                body = resp.read(MAX_ANSWER_BYTES)
            finally:
                conn.close()
            raise _answer_error(path, resp.status, body)
        return Watcher(conn, resp, asked_at, path)


class Watcher:
    """Iterator over a /v1/watch stream.

    Each Status's asked_at is when the client began waiting for its line
    (the request itself, for the first): the line may have been written any
    time after that, so its lease is counted from then, as `agent exec`
    does. A line that took long to come therefore no longer vouches for
    leadership; a leader that must know it still leads polls status().
    """

    def __init__(self, conn, resp, asked_at, path="/v1/watch"):
        self._conn, self._resp = conn, resp
        self._waiting_since = asked_at
        self._path = path

    def __iter__(self):
        return self

    def __next__(self):
        asked_at = self._waiting_since
        try:
            line = self._resp.readline(MAX_WATCH_LINE + 1)
        except (OSError, ValueError, http.client.HTTPException) as e:
            if self._resp.closed or self._conn.sock is None:
                raise StopIteration from None
            raise AgentError(self._path, 0, "stream broken: %s" % e) from e
        if not line:
            raise WatchEnded(self._path, 200, "stream closed")
        if len(line) > MAX_WATCH_LINE or not line.endswith(b"\n"):
            raise AgentError(self._path, 200, "line longer than %d bytes" % MAX_WATCH_LINE)
        self._waiting_since = time.monotonic()
        try:
            d = json.loads(line)
        except ValueError as e:
            raise AgentError(self._path, 200, "decoding line: %s" % e) from e
        if d.get("error"):
            raise WatchEnded(self._path, 200, d["error"])
        return Status(d, asked_at)

    def close(self):
        """Ends the stream. Idempotent."""
        try:
            if self._conn.sock is not None:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._resp.close()
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Session:
    """A session held open by Client.campaign(). id names it; ttl is the
    election's session_ttl in seconds (0: no check-in needed); ended is why
    it ended ("closed", "expired", "stopped"), "" while it lives."""

    def __init__(self, client, conn, resp, path):
        self._client, self._conn, self._resp, self._path = client, conn, resp, path
        self._asked_at = time.monotonic()
        self.id, self.ttl, self.ended = "", 0.0, ""

    def _line(self):
        try:
            line = self._resp.readline(MAX_WATCH_LINE + 1)
        except (OSError, ValueError, http.client.HTTPException) as e:
            if self._resp.closed or self._conn.sock is None:
                self.ended = self.ended or "closed"
                raise SessionEnded(self._path, 0, "closed by its holder", "closed") from None
            raise AgentError(self._path, 0, "stream broken: %s" % e) from e
        if not line:
            raise SessionEnded(self._path, 200, "stream closed without a last line (is the agent stopping?)")
        if len(line) > MAX_WATCH_LINE or not line.endswith(b"\n"):
            raise AgentError(self._path, 200, "line longer than %d bytes" % MAX_WATCH_LINE)
        try:
            d = json.loads(line)
        except ValueError as e:
            raise AgentError(self._path, 200, "decoding line: %s" % e) from e
        if d.get("ended") or d.get("error"):
            self.ended = d.get("ended", "")
            raise SessionEnded(self._path, 200, d.get("error", ""), self.ended)
        return d

    def __iter__(self):
        return self

    def __next__(self):
        asked_at = self._asked_at
        d = self._line()
        self._asked_at = time.monotonic()
        return Status(d, asked_at)

    def heartbeat(self):
        """Checks in: the session lives another ttl. Raises SessionEnded
        (410) when it is over."""
        path = _election_path(self._client.election_name, "/v1/heartbeat")
        self._client._call("POST", path, {"session": self.id})

    def close(self):
        """Ends the session: the agent closes it when the connection
        closes. Idempotent."""
        try:
            if self._conn.sock is not None:
                self._conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._resp.close()
        self._conn.close()
        self.ended = self.ended or "closed"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _answer_error(path, status, body):
    try:
        msg = json.loads(body).get("error") or ""
    except (ValueError, AttributeError):
        msg = ""
    if not msg:
        msg = body[:200].decode("utf-8", "replace")
    cls = AgentError
    if status == 410:
        return SessionEnded(path, status, msg)
    if status == 409 and not path.endswith("/campaign"):
        cls = NotLeaderError
    elif status == 404 and msg.startswith("no election "):
        cls = NoElectionError
    return cls(path, status, msg)
