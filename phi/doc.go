// Package phi implements the phi-accrual failure detector of Hayashibara,
// Défago, Yared and Katayama (2004), the detector Akka and Cassandra use.
//
// Instead of a yes/no verdict after a fixed timeout, a Detector answers "how
// sure am I that the peer is gone?" as phi = -log10(P_later(t_now - t_last)):
// the probability, under a normal distribution fitted to a sliding window of
// recent heartbeat inter-arrival times, that the next heartbeat would still
// arrive later than now. phi = 1 means a 10% chance of being wrong, phi = 8 a
// chance of 1e-8. The caller suspects the peer when phi reaches a threshold,
// so one threshold adapts itself to a quiet LAN and to a jittery WAN.
//
// The package is pure and must stay so: it imports only the standard library
// and the protocols types, never reads a clock (timestamps are arguments),
// never starts a goroutine, never uses global randomness and never does I/O.
// A Detector is not safe for concurrent use; the agent's event loop owns it.
// Heartbeat and Phi do O(1) work and never allocate, so a detector per peer
// costs nothing at the heartbeat rate.
//
// See docs/phi.md for the evaluation that chose the defaults.
package phi
