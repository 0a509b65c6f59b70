// Package health is the agent's shell around leadership health
// (docs/health.md): the check runner ([[check]]: a command whose exit
// status 0 passes, or an HTTP GET whose 2xx passes, with interval,
// timeout, fall and rise), maintenance mode persisted in the data
// directory, and the hooks run on leadership transitions ([[hook]]).
//
// Everything here runs in goroutines of its own and never blocks the
// agent's election loop: results are read with Runner.Snapshot after a
// coalesced notification on Runner.Changed, and Hooks.Fire only queues.
// What the election does with health — an ineligible node does not
// campaign, a leader hands over — is decided inside the protocol
// (protocols.Candidacy), so the simulator covers it.
package health
