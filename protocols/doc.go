// Package protocols holds the types every election protocol shares: node
// identity, the one Message type with its append-only kind enum, the durable
// HardState, the Ready output and the Protocol interface.
//
// A protocol is a deterministic state machine. It must never start a
// goroutine, perform I/O, read a clock or use global randomness: time enters
// as the now argument of every input, randomness through an injected
// *rand.Rand, and logging through the Logger interface. This is what lets
// the simulator in sim/ replay any failure exactly from a seed.
//
// # Driver contract
//
// One goroutine (the agent's event loop, or the simulator) owns a Protocol
// and is the only caller of its methods. After feeding any input (Step, Tick,
// MemberUp, MemberDown, Suspect, Resign) the driver checks HasReady and, when
// it is true, takes Ready and handles it strictly in this order:
//
//  1. persist Ready.HardState (if non-nil) durably — fsync before going on;
//  2. send Ready.Messages;
//  3. announce Ready.SoftState (if non-nil) to local watchers;
//  4. call Advance(ready).
//
// The slices in a Ready belong to the protocol again once Advance returns:
// a driver that keeps messages beyond that copies them.
//
// Sending a message before the HardState of the same Ready is durable can
// elect two leaders: a vote reply promises that the vote survives a crash.
//
// Leadership reported to local processes must come from Status(now), which
// accounts for the leader lease at the instant of asking, and never from a
// cached SoftState: a leader whose lease ran out (for example because its
// process was paused) is no longer reported as leader.
package protocols
