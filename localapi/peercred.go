package localapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"slices"
	"strconv"
	"syscall"
)

// ErrForbidden: a request that changes the agent (resign, maint, a voter
// change) came from a local user who may only read → 403 Forbidden.
var ErrForbidden = errors.New("forbidden")

// peer is who is on the other end of a socket connection, as the kernel
// says (SO_PEERCRED): it cannot be forged by the client.
type peer struct {
	known bool
	uid   uint32
	gid   uint32
	pid   int32
}

type peerKey struct{}

// connContext records the peer's credentials for every connection Serve
// accepts. Reading them can fail (not a Unix socket); the request then
// carries an unknown peer, which may read but not write.
func connContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{}
	if w, ok := c.(interface{ Unwrap() net.Conn }); ok {
		c = w.Unwrap()
	}
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			var cred *syscall.Ucred
			var credErr error
			if err := raw.Control(func(fd uintptr) {
				cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
			}); err == nil && credErr == nil {
				p = peer{known: true, uid: cred.Uid, gid: cred.Gid, pid: cred.Pid}
			}
		}
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// peerOf returns the caller of a request, and false for a request that
// did not come through Serve (an in-process caller, a handler test).
func peerOf(ctx context.Context) (peer, bool) {
	p, ok := ctx.Value(peerKey{}).(peer)
	return p, ok
}

// access decides who may change the agent through the socket. Whoever can
// open the socket (its mode, api.socket_mode, and its group) may read.
// Writes need root, the agent's own user, or membership of the write
// group: a group-readable socket must not hand everyone in the group the
// power to move leadership.
type access struct {
	self       uint32 // the agent's effective uid
	writeGroup string // api.write_group as configured; "" for none
	writeGID   uint32 // its gid, when writeGroup is set
	// groupsOf returns the gids a user belongs to (the group database);
	// os/user's in the server.
	groupsOf func(uid uint32) ([]uint32, error)
}

// newAccess resolves the write group, a name or a numeric gid.
func newAccess(writeGroup string) (access, error) {
	a := access{self: uint32(os.Geteuid()), writeGroup: writeGroup, groupsOf: userGroups}
	if writeGroup == "" {
		return a, nil
	}
	g, err := user.LookupGroup(writeGroup)
	if err != nil {
		if _, numErr := strconv.ParseUint(writeGroup, 10, 32); numErr == nil {
			g, err = user.LookupGroupId(writeGroup)
		}
	}
	if err != nil {
		return a, fmt.Errorf("localapi: api.write_group %q: %w: create the group (groupadd %s) or name an existing one", writeGroup, err, writeGroup)
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return a, fmt.Errorf("localapi: api.write_group %q has gid %q, not a number", writeGroup, g.Gid)
	}
	a.writeGID = uint32(gid)
	return a, nil
}

// userGroups returns the groups uid belongs to, as the group database
// says. SO_PEERCRED carries only the caller's effective gid; supplementary
// groups come from here, as they would for a login of that user.
func userGroups(uid uint32) ([]uint32, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return nil, err
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(ids))
	for _, id := range ids {
		if n, err := strconv.ParseUint(id, 10, 32); err == nil {
			out = append(out, uint32(n))
		}
	}
	return out, nil
}

// mayWrite says whether p may change the agent, and if not, which user or
// group would be needed. A request with no peer (hasPeer false) did not
// come through the socket and is trusted like the process itself.
func (a access) mayWrite(p peer, hasPeer bool) error {
	if !hasPeer {
		return nil
	}
	if !p.known {
		return fmt.Errorf("%w: cannot tell who is calling (no peer credentials); writes need %s", ErrForbidden, a.who())
	}
	if p.uid == 0 || p.uid == a.self {
		return nil
	}
	if a.writeGroup != "" {
		if p.gid == a.writeGID {
			return nil
		}
		if gids, err := a.groupsOf(p.uid); err == nil && slices.Contains(gids, a.writeGID) {
			return nil
		}
	}
	return fmt.Errorf("%w: uid %d (gid %d, pid %d) may read but not change the agent; writes need %s", ErrForbidden, p.uid, p.gid, p.pid, a.who())
}

// who says who may write, for errors.
func (a access) who() string {
	if a.writeGroup == "" {
		return fmt.Sprintf("root or the agent's user (uid %d); set api.write_group to let a group's members write", a.self)
	}
	return fmt.Sprintf("root, the agent's user (uid %d) or membership of group %q (api.write_group, gid %d)", a.self, a.writeGroup, a.writeGID)
}
