package localapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// ErrForbidden: a request that changes the election (resign) came from a
// local user other than the agent's own or root → 403 Forbidden.
var ErrForbidden = errors.New("forbidden")

// peer is who is on the other end of a socket connection, as the kernel
// says (SO_PEERCRED): it cannot be forged by the client.
type peer struct {
	known bool
	uid   uint32
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
				p = peer{known: true, uid: cred.Uid, pid: cred.Pid}
			}
		}
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// mayWrite decides whether a request may change the election. Whoever can
// open the socket (its mode, socket_mode) may read; only the agent's own
// user and root may make it resign, so a group-readable socket does not
// hand every member of the group the power to move leadership. Requests
// that did not come through Serve (in-process callers, tests of the
// handler) carry no peer and are trusted like the process itself.
func mayWrite(ctx context.Context) error {
	p, ok := ctx.Value(peerKey{}).(peer)
	if !ok {
		return nil
	}
	if !p.known {
		return fmt.Errorf("%w: cannot tell who is calling (no peer credentials); only the agent's user or root may do this", ErrForbidden)
	}
	if p.uid == 0 || p.uid == uint32(os.Geteuid()) {
		return nil
	}
	return fmt.Errorf("%w: uid %d (pid %d) may read but not change the election; only the agent's user (uid %d) or root may", ErrForbidden, p.uid, p.pid, os.Geteuid())
}
