// Package store keeps a node's protocols.HardState (term, vote, epoch)
// durable in its data directory, with the highest epoch the agent reported
// from gossip (the observed-epoch file, store/observed.go), and guards the data directory with a lock
// so that only one agent uses it at a time.
//
// A Save is atomic and durable when it returns: the state is written to a
// temporary file, fsynced, renamed over the state file and the directory is
// fsynced, so after a crash the file holds either the old or the new state,
// never a mix. The file is a size-bounded, versioned binary record with a
// magic header and a CRC-32C checksum.
//
// The package must never silently reset state. A missing file means a node
// that has never run (the zero HardState); any other problem — an empty,
// truncated, oversized or corrupted file, an unknown version — is an error
// naming the file, and the agent must refuse to start. Losing a vote or an
// epoch can elect two leaders in one term or reuse a fencing token; an
// operator who really wants a fresh node deletes the file by hand.
//
// A Store also refuses to save a state that goes back: a lower term or epoch,
// or a different vote in the same term. Those are protocol bugs that would
// break the safety guarantees, and the driver must stop rather than persist
// them.
package store
