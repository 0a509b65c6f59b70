// Package fence holds helpers for protected resources: the things a leader
// changes (a database, a file, a remote service) that must refuse a
// leader which has been replaced but still acts — a process that was
// paused, partitioned or slow and wakes up believing it leads.
//
// The agent gives every leadership an epoch (the fencing token) that only
// grows. A protected resource remembers the highest token it has accepted
// and refuses lower ones; a stale leader therefore cannot change it once a
// newer leader has touched it.
//
//   - Guard is that rule in Go, for a resource the program itself owns:
//     it keeps the highest accepted token (durably when given a file) and
//     refuses lower ones with a *StaleError, which matches ErrStale.
//   - SQL implements the standard pattern on a database/sql database: a
//     one-row epoch table raised by the new leader with
//     UPDATE … SET epoch = token WHERE epoch < token, and every side-effecting
//     transaction first checking epoch = token under a shared lock (FOR SHARE,
//     LOCK IN SHARE MODE on MySQL/MariaDB,
//     or SQLite's write transaction), so the check and the write commit
//     together or not at all.
//
// This package never talks to the agent and never decides who leads: the
// caller brings the token (from the client package or $CONCLAVE_EPOCH).
// It must never accept a lower token after a higher one, and never treat an
// error it could not check as an acceptance.
package fence
